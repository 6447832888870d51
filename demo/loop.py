"""The closed loop on one machine: simulated cluster -> exporters -> recommender -> approval -> apply.

The model's clock is frozen and the loop advances it one cycle at a time, as fast as the machine goes, so
every reader sees simulated time (`start + model time`; start is 06:00 UTC the day before the run). Each
cycle advances, runs one recommender cycle and records the series, then applies every approved proposal
through the real apply orchestrator (simulated sides, or with `real=True` the real OpenSM and Slurm of
`demo.real`). Scripted events and the scrapes for the alert replay keep their own times whatever advances
the clock (`demo.schedule`). Every change to the model is logged with its proposal (`demo.controls`), for
the twins. The cycle in full: docs/demo.md.
"""

from __future__ import annotations

import logging
import math
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from demo.controls import LoggedModel
from demo.observe import Sample, sample, write
from demo.real import RealBackends
from demo.real.scenario import real_model, real_scripted
from demo.record import Event, RunDir, rfc3339
from demo.scenario import WAIT_TICK_BYTES, ScriptedEvent, demo_model, scripted
from demo.schedule import Schedule
from demo.series import SeriesRecorder, TappedSource
from demo.settings import HIGH_POOL, Timings
from postmortem.changes import describe
from postmortem.model import clock, clock_text
from proposals.approval_config import ApprovalConfig, load_approval_config
from proposals.states import APPROVED
from proposals.store import Store
from recommender.cycle import CycleResult, Recommender
from recommender.policies.quota import QuotaPolicy
from recommender.policies.rebalance import RebalancePolicy
from recommender.signals.embedded import EmbeddedSettings
from recommender.signals.model import Signals
from scheduler_hooks.apply.orchestrator import Orchestrator
from scheduler_hooks.apply.sides import Side
from simulator.backends.simulated_side import SimulatedQosSide, SimulatedSlurmSide
from simulator.cluster.workload import JobRequest
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.qos_reader import SimulatorQos

log = logging.getLogger(__name__)

APPROVAL_FILE = Path(__file__).with_name("approval.yaml")
APPLIER = "ibpool-demo"


@dataclass(frozen=True)
class AppliedChange:
    """One applied proposal: when it started and finished applying (simulated seconds)."""

    t: float
    started: float
    proposal_id: str
    kind: str
    policy: str
    changes: tuple[tuple[str, str, str], ...]
    expected_effect: str


@dataclass
class LoopReport:
    """What the loop run saw, proposed and applied."""

    timings: Timings
    out: Path
    start_unix: float
    samples: list[Sample] = field(default_factory=list)
    applied: list[AppliedChange] = field(default_factory=list)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0
    verified_on: str = "the simulated cluster"


def start_of_run(start_hour: float, now: float | None = None) -> float:
    """Unix time of simulated t=0: `start_hour` UTC on the day before today."""
    today = math.floor((time.time() if now is None else now) / 86400.0) * 86400.0
    return today - 86400.0 + start_hour * 3600.0


def _post(url: str, body: str = "") -> None:
    request = urllib.request.Request(url, data=body.encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10.0) as answer:
        answer.read()


def _submit(model: LoggedModel, job: JobRequest) -> str:
    return f"job {model.submit(job)}"


class Loop:
    """One loop run; `run()` once."""

    def __init__(
        self,
        timings: Timings,
        out: Path,
        recorder: SeriesRecorder,
        *,
        say: Callable[[str], None] = print,
        seed: int = 1,
        approval_file: Path = APPROVAL_FILE,
        real: bool = False,
    ) -> None:
        self.timings = timings
        self.out = out
        self.recorder = recorder
        self.say = say
        self.approval: ApprovalConfig = load_approval_config(approval_file)
        self.start_unix = start_of_run(timings.start_hour)
        self.real = real
        self.model: LoggedModel = real_model(timings, seed) if real else demo_model(timings, seed)
        self.backends: RealBackends | None = None
        self.run_dir = RunDir(out)
        self.report = LoopReport(timings, out, self.start_unix)
        self._seen_model_events = 0
        self._last_signals: Signals | None = None
        self._schedule: Schedule | None = None

    # --- clocks and output -----------------------------------------------------------------------

    def now(self) -> float:
        """Simulated time as Unix seconds."""
        return self.start_unix + self.model.now

    def _store_clock(self) -> datetime:
        return datetime.fromtimestamp(self.now(), UTC)

    def emit(self, kind: str, summary: str, **detail: Any) -> None:
        """One timeline event and one progress line (on the run's clock)."""
        self.run_dir.event(Event(self.model.now, rfc3339(self.now()), kind, summary, detail))
        self.say(f"[{clock(self.now())}] {kind:<9} {clock_text(summary)}")

    # --- the run ---------------------------------------------------------------------------------

    def run(self) -> LoopReport:
        """Run the whole loop; the run directory's series and timeline are written as it goes."""
        wall = time.perf_counter()
        settings = ServerSettings(
            listen_address="127.0.0.1:0", speed=0.0, sweep_interval_seconds=5.0, poll_interval_seconds=5.0
        )
        if self.real:
            self.report.verified_on = "the real OpenSM (smpquery on ibsim) and Slurm (sinfo)"
            self.backends = RealBackends(self.out / "real", self.model)
            self.say("starting ibsim + OpenSM and a Slurm cluster (munged, slurmctld, slurmd per node) ...")
            self.backends.start()  # stops what it started when it fails
        try:
            self._serve(settings)
        finally:
            if self.backends is not None:
                self.backends.close()
            self.report.wall_seconds = time.perf_counter() - wall
        return self.report

    def _serve(self, settings: ServerSettings) -> None:
        server = ClusterServer(self.model, settings)
        # The exporters date their sweeps and polls with the model's clock (see the module docstring).
        server.fabric._clock = self.now
        server.poller._wall = self.now
        server.start()
        base = f"http://127.0.0.1:{server.port}"
        try:
            with Store(self.out / "ibpool.db", clock=self._store_clock) as store:
                self._loop(server, base, store)
                self.report.proposals = _proposals(store)
        finally:
            server.close()

    def _source(self, server: ClusterServer, base: str) -> TappedSource:
        t = self.timings
        source = TappedSource(
            EmbeddedSettings(
                f"{base}/targets",
                window_seconds=t.cycle_seconds,
                max_age_seconds=3 * t.cycle_seconds,
                wait_tick_bytes=WAIT_TICK_BYTES,
            ),
            SimulatorQos(f"{base}/-/model"),
            clock=self.now,
            sleep=server.runner.advance,
        )
        source.recorder = self.recorder
        return source

    def _sides(self, base: str) -> list[Side]:
        if self.backends is not None:
            return self.backends.sides(self.out / "apply" / "real")
        step = self.model.spec.tick_seconds * max(1, round(self.timings.cycle_seconds / 3 / 10))
        slurm = SimulatedSlurmSide(base, advance_seconds=step, drain_deadline_seconds=900.0)
        return [SimulatedQosSide(base), slurm]

    def _loop(self, server: ClusterServer, base: str, store: Store) -> None:
        t = self.timings
        source = self._source(server, base)
        recommender = Recommender(
            _Keeping(source, self),
            store,
            quota=QuotaPolicy(t.quota),
            rebalance=RebalancePolicy(t.rebalance),
            approval=self.approval,
            gpus_per_node=self.model.spec.gpus_per_node,
        )
        orchestrator = Orchestrator(
            store, self._sides(base), limits=self.approval.limits, who=APPLIER, state_dir=self.out / "apply"
        )
        events = real_scripted(t) if self.real else scripted(t)
        schedule = Schedule(
            events,
            t.cycle_seconds,
            clock=lambda: self.model.now,
            record=source.record,
            run=partial(self._run_event, server=server, base=base),
        )
        source.on_scrape = schedule.scraped
        server.runner.set_stops(schedule)
        self._schedule = schedule
        self.emit(
            "note",
            f"{len(self.model.spec.nodes)} nodes, pools "
            + ", ".join(f"{p.name} ({len(p.nodes)} nodes, {p.priority_class})" for p in self.model.spec.pools)
            + f"; {t.name} timings: {t.duration_seconds / 3600:g} simulated hours, a cycle every "
            f"{t.cycle_seconds / 60:g} min (compressed policy windows, see demo.settings)",
        )
        cycle = 0
        while self.model.now < t.duration_seconds - 1e-6:
            schedule.run_due(self.model.now)
            if cycle > 0:  # the first fetch advances one window itself (two scrapes)
                target = (math.floor(self.model.now / t.cycle_seconds + 1e-9) + 1) * t.cycle_seconds
                server.runner.advance(min(target, t.duration_seconds) - self.model.now)
            self._push(server)
            result = recommender.run_once()
            self._model_events()
            item = sample(self.model, self._last_signals)
            self.report.samples.append(item)
            write(self.run_dir, self.model, self.now(), item, self._last_signals)
            self._cycle(result)
            for stored in store.list_proposals(APPROVED):
                self._apply(orchestrator, stored.id, store, server)
            cycle += 1
            if cycle % t.status_every == 0:
                self._status(store)
        if cycle % t.status_every:
            self._status(store)

    def _run_event(self, item: ScriptedEvent, server: ClusterServer, base: str) -> None:
        """One scripted event, at its time: outside any change being applied (the twins keep it)."""
        tag, self.model.log.tag = self.model.log.tag, None
        try:
            job = item.job
            if job is not None:
                server.runner.change(partial(_submit, job=job))
                self.emit("scenario", item.summary, job=job.name, gpus=job.gpus, pool=job.pool)
            for fault in item.faults:
                _post(f"{base}/-/fault?{fault}")
        finally:
            self.model.log.tag = tag
        self._model_events()

    def _model_events(self) -> None:
        events = self.model.events
        for event in events[self._seen_model_events :]:
            if event.kind in ("lose_gpu", "xid", "restore_gpu", "link_down", "link_up", "flap"):
                self.emit("fault", f"{event.kind} {event.target} {event.detail}".strip(), at=event.time)
        self._seen_model_events = len(events)

    def _cycle(self, result: CycleResult) -> None:
        for sub in result.submitted:
            if not sub.created:
                continue
            p = sub.proposal
            changes = tuple((c.target, c.before, c.after) for c in p.changes)
            self.emit(
                "proposal",
                f"{p.kind} {sub.id[:12]} by policy:{p.policy}: {describe(changes, 150)}",
                id=sub.id,
                proposal=p.to_dict(),
            )
        for decision in result.decisions:
            if decision.approved:
                self.emit("approval", f"{decision.proposal_id[:12]} auto-approved by {decision.who}")
            else:
                why = "; ".join(decision.reasons)
                self.emit(
                    "refusal",
                    f"{decision.proposal_id[:12]} left for a person by {decision.who}: {why[:120]}",
                    reasons=list(decision.reasons),
                )

    def _push(self, server: ClusterServer) -> None:
        """`--real`: the model's counters and link states into ibsim."""
        if self.backends is None:
            return
        with server.runner.locked():
            count = self.backends.push()
        log.debug("pushed %d console commands to ibsim", count)

    def _sync(self, server: ClusterServer) -> None:
        """`--real`: what OpenSM programmed and Slurm's partitions, fed back into the model."""
        if self.backends is None:
            return
        with server.runner.locked():
            synced = self.backends.sync()
        server.runner.changed()
        parts = []
        if synced.qos is not None:
            tables = synced.qos.after
            parts.append(
                "QoS from smpquery: vlarb_high "
                + (",".join(f"{vl}:{w}" for vl, w in tables.vlarb_high) or "-")
                + " vlarb_low "
                + (",".join(f"{vl}:{w}" for vl, w in tables.vlarb_low) or "-")
            )
        for pool, (before, after) in synced.slurm.moved.items():
            parts.append(f"{pool} from sinfo: {len(before)} -> {len(after)} nodes")
        self.emit("real", "model follows OpenSM/Slurm: " + ("; ".join(parts) or "already in step"))

    def _apply(self, orchestrator: Orchestrator, pid: str, store: Store, server: ClusterServer) -> None:
        """Apply one approved proposal, the model's changes logged under its id."""
        stored = store.get(pid)
        started = self.model.now
        self.model.log.tag = pid
        if self._schedule is not None:
            self._schedule.applying = True
        try:
            outcome, recovered = orchestrator.apply(pid)
            if outcome.result == "applied":
                self._sync(server)
        finally:
            self.model.log.tag = None
            if self._schedule is not None:
                self._schedule.applying = False
        for item in recovered:
            self.emit("apply", f"{item.proposal_id[:12]} recovered: {item.result}", outcome=item.to_dict())
        self.emit("apply", f"{pid[:12]} {outcome.message}", outcome=outcome.to_dict())
        if outcome.result != "applied":
            return
        p = stored.proposal
        self.report.applied.append(
            AppliedChange(
                t=self.model.now,
                started=started,
                proposal_id=pid,
                kind=p.kind,
                policy=p.policy,
                changes=tuple((c.target, c.before, c.after) for c in p.changes),
                expected_effect=p.expected_effect,
            )
        )

    def _status(self, store: Store) -> None:
        if not self.report.samples:
            return
        item = self.report.samples[-1]
        parts = []
        for name, pool in sorted(item.pools.items()):
            util = "-" if pool.utilization is None else f"{pool.utilization:.2f}"
            parts.append(
                f"{name} util {util} GPUs {pool.allocated_gpus}/{pool.capacity_gpus} "
                f"pending {pool.pending_gpus}"
            )
        hi = item.pools.get(HIGH_POOL)
        if hi is not None and hi.slowdown_max is not None:
            parts.append(f"{HIGH_POOL} slowdown x{hi.slowdown_max:.2f}")
        if item.worst_link_wait is not None:
            parts.append(f"worst switch-port wait {item.worst_link_wait:.0%}")
        counts = store.counts()
        parts.append(f"proposals {sum(counts.values())}, applied {counts.get('applied', 0)}")
        self.emit("status", " | ".join(parts))


class _Keeping:
    """The source as the recommender sees it, keeping the last snapshot for the cycle's series."""

    name = "embedded"

    def __init__(self, inner: TappedSource, loop: Loop) -> None:
        self.inner = inner
        self.loop = loop

    def fetch(self) -> Signals:
        """Fetch and keep."""
        signals = self.inner.fetch()
        self.loop._last_signals = signals
        return signals

    def reset(self) -> None:
        """Forget the previous scrape."""
        self.inner.reset()


def _proposals(store: Store) -> list[dict[str, Any]]:
    out = []
    for stored in store.list_proposals():
        out.append(
            {
                "id": stored.id,
                "state": stored.state,
                "proposer": stored.proposer,
                "proposal": stored.proposal.to_dict(),
                "audit": [_plain(a) for a in store.audit(stored.id)],
                "steps": [_plain(s) for s in store.steps(stored.id)],
            }
        )
    return out


def _plain(record: object) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, datetime) else v for k, v in vars(record).items()}
