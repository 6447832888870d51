"""Alert times in the demo depend only on the faults and the rules, not on what else the loop does: a short
demo run whose one apply (a move of a busy node, which the simulated Slurm side waits on up to its 15-minute
drain deadline, advancing the clock) spans the scripted GPU fault, replayed by vmalert over the shipped
rules. Without the schedule (demo.schedule) the fault waited for the apply to end and the cycles it
spanned were never scraped."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from demo.alert_replay import SERIES_FILE, load_rules, replay_run
from demo.loop import Loop
from demo.scenario import FAULT_NODE, RULE_SETTINGS
from demo.series import SeriesRecorder
from demo.settings import FAST, HIGH_POOL, LOW_POOL
from proposals.model import from_dict
from proposals.store import Store
from proposals.targets import format_node_list
from recommender.cycle import CycleResult
from simulator.serve.cluster_server import ClusterServer

CYCLE = FAST.cycle_seconds
MOVE_AT = 2 * CYCLE  # the cycle whose apply spans the fault
FAULT_AT = 2.5 * CYCLE  # between two scrapes, while the apply waits
DRAIN_DEADLINE = 900.0  # the demo's simulated Slurm side's, longer than a cycle
# A fault is first scraped at the next cycle; GpuXidError (`for: 1m`) fires one minute after that.
FIRST_SCRAPE_AFTER = (FAULT_AT // CYCLE + 1) * CYCLE
XID_FOR = 60.0
TIMINGS = replace(
    FAST,
    name="alert-timing",
    duration_seconds=6 * CYCLE,
    episode_at=0.0,  # the two long all-reduce jobs from the start: busy nodes to move
    episode_work_seconds=2 * 3600.0,
    fault_at=FAULT_AT,
)

pytestmark = pytest.mark.skipif(
    shutil.which("vmalert") is None or shutil.which("victoria-metrics") is None,
    reason="needs vmalert and victoria-metrics (Debian package victoria-metrics)",
)


class _MoveDuringTheFault(Loop):
    """The demo loop with one move of a busy `llm` node, approved by a person at MOVE_AT."""

    store: Store
    move_id = ""

    def _loop(self, server: ClusterServer, base: str, store: Store) -> None:
        self.store = store
        super()._loop(server, base, store)

    def _cycle(self, result: CycleResult) -> None:
        super()._cycle(result)
        if abs(self.model.now - MOVE_AT) < 1e-6:
            self._propose_move()

    def _propose_move(self) -> None:
        busy = {
            self.model.spec.nodes[i]
            for job in self.model.running.values()
            if job.request.pool == LOW_POOL and job.request.work_seconds - job.progress > DRAIN_DEADLINE
            for i in job.nodes
        }
        low, high = self.model.partition_nodes(LOW_POOL), self.model.partition_nodes(HIGH_POOL)
        node = min(sorted(busy - {FAULT_NODE}))
        now = datetime.fromtimestamp(self.now(), UTC)
        doc = {
            "kind": "move_nodes",
            "changes": [
                _change(LOW_POOL, low, [n for n in low if n != node]),
                _change(HIGH_POOL, high, [*high, node]),
            ],
            "evidence": [
                {
                    "query": f'ibpool_pool_pending_gpus{{pool="{HIGH_POOL}"}}',
                    "window": "10m",
                    "value": 8,
                    "threshold": 0,
                }
            ],
            "expected_effect": f"{HIGH_POOL} gets {node}",
            "created_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "expires_at": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "policy": "test",
        }
        stored, _ = self.store.submit(from_dict(doc))
        self.store.transition(stored.id, "approved", "alice")
        self.move_id = stored.id


def _change(pool: str, before: list[str], after: list[str]) -> dict[str, str]:
    return {
        "target": f"slurm.partition.{pool}.nodes",
        "before": format_node_list(before),
        "after": format_node_list(after),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Loop, dict[str, Any]]:
    out = tmp_path_factory.mktemp("alert-timing")
    ruleset, why_not = load_rules(None, dict(RULE_SETTINGS))
    assert ruleset is not None, why_not
    recorder = SeriesRecorder(ruleset.metric_names())
    loop = _MoveDuringTheFault(TIMINGS, out, recorder, say=lambda _: None)
    try:
        loop.run()
    finally:
        loop.run_dir.close()
        recorder.write(out / SERIES_FILE)
    replay_run(out, ruleset, why_not, loop.start_unix, loop.start_unix + TIMINGS.duration_seconds)
    return loop, json.loads((out / "alerts.json").read_text())


@pytest.mark.slow
def test_the_apply_spans_the_fault(run: tuple[Loop, dict[str, Any]]) -> None:
    loop, _ = run
    assert isinstance(loop, _MoveDuringTheFault) and loop.move_id
    (applied,) = [e for e in loop.run_dir.events if e.kind == "apply" and loop.move_id[:12] in e.summary]
    assert applied.t >= MOVE_AT + DRAIN_DEADLINE  # it waited out the drain deadline
    assert MOVE_AT < FAULT_AT < FIRST_SCRAPE_AFTER < MOVE_AT + DRAIN_DEADLINE  # the fault, the next scrape
    faults = [e for e in loop.run_dir.events if e.kind == "fault"]
    assert faults and all(e.t == e.detail["at"] == FAULT_AT for e in faults)  # at its time, not after


@pytest.mark.slow
def test_the_first_gpu_xid_alert_fires_a_scrape_and_its_for_after_the_fault(
    run: tuple[Loop, dict[str, Any]],
) -> None:
    loop, alerts = run
    assert alerts["status"] == "replayed"
    xid = [f for f in alerts["firings"] if f["name"] == "GpuXidError"]
    assert len(xid) == 1  # one XID, one alert: no gap in the scrapes that ends it and fires it again
    assert xid[0]["start"] - loop.start_unix == FIRST_SCRAPE_AFTER + XID_FOR
