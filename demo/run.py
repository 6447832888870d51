"""The closed loop on one machine: simulated cluster -> exporters -> recommender -> approval -> apply.

Time: the model's clock is frozen (`speed 0`) and the loop advances it one cycle at a time (paced to
`Timings.speed` simulated seconds per wall second, or as fast as the machine goes), so every reader sees
simulated time: the exporters' sweep and poll timestamps, the signals' rate windows, the proposal store's
clock (created_at, expires_at, audit entries) are `start + model time`. Each cycle: scripted events due,
advance, sample the series, one recommender cycle (embedded source scraping the served exporters, both
policies, auto-approval by demo/approval.yaml), then every approved proposal goes through the real apply
orchestrator with the simulated sides (HTTP controls, read back), or with `real=True` the real OpenSM and
Slurm sides on programs `demo.real` starts (a smaller cluster; the model mirrored into ibsim every cycle
and fed back from OpenSM and Slurm after every applied change).
"""

from __future__ import annotations

import logging
import math
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from demo.alerts import AlertTracker
from demo.real import RealBackends
from demo.real.scenario import real_model, real_scripted
from demo.record import Event, RunDir, rfc3339
from demo.scenario import WAIT_TICK_BYTES, ScriptedEvent, demo_model, scripted
from demo.settings import HIGH_POOL, Timings
from proposals import targets
from proposals.approval_config import ApprovalConfig, load_approval_config
from proposals.model import Change
from proposals.states import APPROVED
from proposals.store import Store
from recommender.cycle import CycleResult, Recommender
from recommender.policies.quota import QuotaPolicy
from recommender.policies.rebalance import RebalancePolicy
from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from recommender.signals.model import Signals
from scheduler_hooks.apply.orchestrator import Orchestrator
from scheduler_hooks.apply.sides import Side
from simulator.backends.simulated_side import SimulatedQosSide, SimulatedSlurmSide
from simulator.cluster.model import ClusterModel
from simulator.cluster.workload import JobRequest
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.qos_reader import SimulatorQos

log = logging.getLogger(__name__)

APPROVAL_FILE = Path(__file__).with_name("approval.yaml")
APPLIER = "ibpool-demo"


@dataclass(frozen=True)
class PoolSample:
    """One pool at one cycle."""

    capacity_gpus: int
    allocated_gpus: int
    pending_gpus: int
    running_jobs: int
    pending_jobs: int
    utilization: float | None
    multinode_jobs: int
    iteration_seconds: float | None
    slowdown_mean: float | None
    slowdown_max: float | None


@dataclass(frozen=True)
class Sample:
    """Every pool at one cycle, and the worst fabric wait share."""

    t: float
    pools: dict[str, PoolSample]
    worst_link_wait: float | None


@dataclass(frozen=True)
class AppliedChange:
    """One applied proposal."""

    t: float
    proposal_id: str
    kind: str
    policy: str
    changes: tuple[tuple[str, str, str], ...]
    expected_effect: str
    evidence_since: float  # simulated time from which the evidence held (start of the "before" window)


@dataclass
class DemoReport:
    """What the run saw, proposed and applied (the summary is built from it)."""

    timings: Timings
    out: Path
    start_unix: float
    samples: list[Sample] = field(default_factory=list)
    applied: list[AppliedChange] = field(default_factory=list)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0
    verified_on: str = "the simulated cluster"


class CapturingSource:
    """The embedded source, keeping the last snapshot for the alert-like events and the series."""

    name = "embedded"

    def __init__(self, inner: EmbeddedSource) -> None:
        self.inner = inner
        self.last: Signals | None = None

    def fetch(self) -> Signals:
        """Fetch and keep."""
        self.last = self.inner.fetch()
        return self.last

    def reset(self) -> None:
        """Forget the previous scrape."""
        self.inner.reset()


def _post(url: str, body: str = "") -> None:
    request = urllib.request.Request(url, data=body.encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10.0) as answer:
        answer.read()


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


class Demo:
    """One demo run; `run()` once."""

    def __init__(
        self,
        timings: Timings,
        out: Path,
        say: Callable[[str], None] = print,
        seed: int = 1,
        approval_file: Path = APPROVAL_FILE,
        *,
        real: bool = False,
    ) -> None:
        self.timings = timings
        self.out = out
        self.say = say
        self.seed = seed
        self.approval: ApprovalConfig = load_approval_config(approval_file)
        self.start_unix = float(math.floor(time.time()))
        self.real = real
        self.model: ClusterModel = (real_model if real else demo_model)(timings, seed)
        self.backends: RealBackends | None = None
        self.run_dir = RunDir(out)
        self.report = DemoReport(timings, out, self.start_unix)
        self.alerts = AlertTracker(HIGH_POOL)
        self._seen_model_events = 0
        self._proposed_at: dict[str, float] = {}

    # --- clocks ----------------------------------------------------------------------------------

    def now(self) -> float:
        """Simulated time as Unix seconds."""
        return self.start_unix + self.model.now

    def _store_clock(self) -> datetime:
        return datetime.fromtimestamp(self.now(), UTC)

    # --- output ----------------------------------------------------------------------------------

    def emit(self, kind: str, summary: str, **detail: Any) -> None:
        """One timeline event and one progress line."""
        t = self.model.now
        self.run_dir.event(Event(t, rfc3339(self.now()), kind, summary, detail))
        self.say(f"[{_clock(t)} {self._hour(t)}] {kind:<9} {summary}")

    def _hour(self, t: float) -> str:
        minutes = int((self.timings.start_hour * 3600 + t) // 60) % (24 * 60)
        return f"{minutes // 60:02d}:{minutes % 60:02d}"

    # --- the loop --------------------------------------------------------------------------------

    def run(self) -> DemoReport:
        """Run the whole demo; the run directory is complete when this returns."""
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

    def _loop(self, server: ClusterServer, base: str, store: Store) -> None:
        t = self.timings
        source = CapturingSource(
            EmbeddedSource(
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
        )
        recommender = Recommender(
            source,
            store,
            quota=QuotaPolicy(t.quota),
            rebalance=RebalancePolicy(t.rebalance),
            approval=self.approval,
            gpus_per_node=self.model.spec.gpus_per_node,
        )
        sides: list[Side]
        if self.backends is not None:
            sides = self.backends.sides(self.out / "apply" / "real")
        else:
            slurm = SimulatedSlurmSide(
                base, advance_seconds=t.cycle_seconds / 3, drain_deadline_seconds=900.0
            )
            sides = [SimulatedQosSide(base), slurm]
        orchestrator = Orchestrator(
            store,
            sides,
            limits=self.approval.limits,
            who=APPLIER,
            state_dir=self.out / "apply",
        )
        events = (real_scripted if self.real else scripted)(t)
        self.emit(
            "note",
            f"{len(self.model.spec.nodes)} nodes, pools "
            + ", ".join(f"{p.name} ({len(p.nodes)} nodes, {p.priority_class})" for p in self.model.spec.pools)
            + f"; {t.name} timings: {t.duration_seconds / 60:g} simulated minutes, a cycle every "
            f"{t.cycle_seconds:g} s (compressed policy windows, see demo.settings)",
        )
        paced_from = time.perf_counter()
        cycle = 0
        while self.model.now < t.duration_seconds - 1e-6:
            events = self._due(events, server, base)
            if cycle > 0:  # the first fetch advances one window itself (two scrapes)
                server.runner.advance(t.cycle_seconds)
            self._pace(paced_from)
            self._push(server)
            result = recommender.run_once()
            self._model_events()
            self._observe(source.last)
            self._cycle(result)
            for stored in store.list_proposals(APPROVED):
                if self._apply(orchestrator, stored.id, store):
                    self._sync(server)
            cycle += 1
            if cycle % t.status_every == 0:
                self._status(store)
        if cycle % t.status_every:
            self._status(store)

    def _pace(self, since: float) -> None:
        if self.timings.speed is None:
            return
        ahead = self.model.now / self.timings.speed - (time.perf_counter() - since)
        if ahead > 0:
            time.sleep(ahead)

    def _due(self, events: list[ScriptedEvent], server: ClusterServer, base: str) -> list[ScriptedEvent]:
        later = []
        for item in events:
            if item.at > self.model.now + 1e-6:
                later.append(item)
                continue
            job = item.job
            if job is not None:
                server.runner.change(partial(_submit, job=job))
                self.emit("scenario", item.summary, job=job.name, gpus=job.gpus, pool=job.pool)
            else:
                _post(f"{base}/-/fault?{item.fault}")
        return later

    def _model_events(self) -> None:
        events = self.model.events
        for event in events[self._seen_model_events :]:
            if event.kind in ("lose_gpu", "xid", "restore_gpu", "link_down", "link_up", "flap"):
                self.emit("fault", f"{event.kind} {event.target} {event.detail}".strip(), at=event.time)
        self._seen_model_events = len(events)

    def _observe(self, signals: Signals | None) -> None:
        sample = self._sample(signals)
        self.report.samples.append(sample)
        stamp = rfc3339(self.now())
        for name, pool in sorted(sample.pools.items()):
            self.run_dir.pools.writerow(
                {
                    "time": stamp,
                    "t": sample.t,
                    "pool": name,
                    "capacity_gpus": pool.capacity_gpus,
                    "allocated_gpus": pool.allocated_gpus,
                    "pending_gpus": pool.pending_gpus,
                    "running_jobs": pool.running_jobs,
                    "pending_jobs": pool.pending_jobs,
                    "gpu_utilization": _num(pool.utilization),
                    "multinode_jobs": pool.multinode_jobs,
                    "iteration_seconds_mean": _num(pool.iteration_seconds),
                    "slowdown_mean": _num(pool.slowdown_mean),
                    "slowdown_max": _num(pool.slowdown_max),
                }
            )
        qos = self.model.qos()
        self.run_dir.qos.writerow(
            {
                "time": stamp,
                "t": sample.t,
                "vlarb_high": ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_high),
                "vlarb_low": ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_low),
                "sl2vl": ",".join(map(str, qos.sl2vl)),
            }
        )
        if signals is None:
            return
        for link in signals.links.values():
            if not link.utilization and not link.congestion:
                continue
            self.run_dir.links.writerow(
                {
                    "time": stamp,
                    "t": sample.t,
                    "link": link.key,
                    "kind": link.kind,
                    "desc": link.desc,
                    "congestion": _num(link.congestion),
                    "utilization": _num(link.utilization),
                    "saturated": int(link.saturated),
                    "pools": ";".join(link.pools),
                }
            )
        for kind, summary, detail in self.alerts.update(signals):
            self.emit(kind, summary, **detail)

    def _sample(self, signals: Signals | None) -> Sample:
        view = self.model.scheduler_view()
        pools: dict[str, PoolSample] = {}
        for name, pool in view.pools.items():
            jobs = [j for j in self.model.job_metrics(name) if len(j.nodes) > 1]
            finite = [j for j in jobs if math.isfinite(j.iteration_seconds)]
            util = None
            if signals is not None and name in signals.pools:
                util = signals.pools[name].utilization
            pools[name] = PoolSample(
                capacity_gpus=pool.capacity_gpus,
                allocated_gpus=pool.allocated_gpus,
                pending_gpus=pool.pending_gpus,
                running_jobs=pool.running_jobs,
                pending_jobs=pool.pending_jobs,
                utilization=util,
                multinode_jobs=len(jobs),
                iteration_seconds=_mean([j.iteration_seconds for j in finite]),
                slowdown_mean=_mean([j.slowdown for j in finite]),
                slowdown_max=max((j.slowdown for j in finite), default=None),
            )
        worst = None
        if signals is not None:
            waits = [x.congestion for x in signals.links.values() if x.kind == "fabric" and x.congestion]
            worst = max(waits, default=0.0)
        return Sample(self.model.now, pools, worst)

    def _cycle(self, result: CycleResult) -> None:
        for sub in result.submitted:
            if not sub.created:
                continue
            p = sub.proposal
            self._proposed_at[sub.id] = self.model.now
            self.emit(
                "proposal",
                f"{p.kind} {sub.id[:12]} by policy:{p.policy}: {describe_changes(p.changes)}",
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
                    f"{decision.proposal_id[:12]} left for a person by {decision.who}: {_short(why)}",
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

    def _apply(self, orchestrator: Orchestrator, pid: str, store: Store) -> bool:
        """Apply one approved proposal; True when it was applied."""
        stored = store.get(pid)
        outcome, recovered = orchestrator.apply(pid)
        for item in recovered:
            self.emit("apply", f"{item.proposal_id[:12]} recovered: {item.result}", outcome=item.to_dict())
        self.emit("apply", f"{pid[:12]} {outcome.message}", outcome=outcome.to_dict())
        if outcome.result != "applied":
            return False
        p = stored.proposal
        persistence = (
            self.timings.quota.persistence_seconds
            if p.policy == "quota"
            else self.timings.rebalance.drain_min * 60
        )
        proposed = self._proposed_at.get(pid, self.model.now)
        self.report.applied.append(
            AppliedChange(
                t=self.model.now,
                proposal_id=pid,
                kind=p.kind,
                policy=p.policy,
                changes=tuple((c.target, c.before, c.after) for c in p.changes),
                expected_effect=p.expected_effect,
                evidence_since=max(0.0, proposed - persistence - self.timings.cycle_seconds),
            )
        )
        return True

    def _status(self, store: Store) -> None:
        if not self.report.samples:
            return
        sample = self.report.samples[-1]
        parts = []
        for name, pool in sorted(sample.pools.items()):
            util = "-" if pool.utilization is None else f"{pool.utilization:.2f}"
            parts.append(
                f"{name} util {util} GPUs {pool.allocated_gpus}/{pool.capacity_gpus} "
                f"pending {pool.pending_gpus}"
            )
        hi = sample.pools.get(HIGH_POOL)
        if hi is not None and hi.slowdown_max is not None:
            parts.append(f"{HIGH_POOL} slowdown x{hi.slowdown_max:.2f}")
        if sample.worst_link_wait is not None:
            parts.append(f"worst switch-port wait {sample.worst_link_wait:.0%}")
        counts = store.counts()
        parts.append(f"proposals {sum(counts.values())}, applied {counts.get('applied', 0)}")
        self.emit("status", " | ".join(parts))


def describe_changes(changes: Sequence[Change]) -> str:
    """A short text of changes: node moves as `N node(s) (names) A -> B`, tables as `before -> after`."""
    gained: dict[str, set[str]] = {}
    lost: dict[str, set[str]] = {}
    parts: list[str] = []
    for c in changes:
        target = targets.parse_target(c.target)
        if target.family == targets.SLURM_NODES:
            before, after = set(targets.parse_node_list(c.before)), set(targets.parse_node_list(c.after))
            gained[target.pool or ""] = after - before
            lost[target.pool or ""] = before - after
        else:
            parts.append(f"{c.target} {c.before or '-'} -> {c.after or '-'}")
    for to_pool, nodes in gained.items():
        for from_pool, gone in lost.items():
            moved = sorted(nodes & gone, key=targets.node_sort_key)
            if moved:
                parts.append(f"{len(moved)} node(s) ({', '.join(moved)}) {from_pool} -> {to_pool}")
    return _short("; ".join(parts))


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


def _submit(model: ClusterModel, job: JobRequest) -> str:
    return f"job {model.submit(job)}"


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _short(text: str, limit: int = 150) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clock(t: float) -> str:
    seconds = int(t)
    return f"+{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
