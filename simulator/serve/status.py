"""The cluster server's own pages: health, a JSON summary of the model, and a landing page."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import asdict

from exporter.fabric.background import BackgroundSweeper
from exporter.scheduler.poller import SchedulerPoller
from foundation.loop import Loop
from simulator.cluster.model import ClusterModel
from simulator.serve.controls import FAULT_KINDS
from simulator.serve.runner import ClusterRunner
from simulator.serve.targets import node_metrics_path

RECENT_EVENTS = 50


def health_report(
    runner: ClusterRunner, sweeper: BackgroundSweeper, poller: SchedulerPoller, threads: Sequence[Loop]
) -> dict[str, object]:
    """`status` ok or unhealthy, with the reasons: a thread dead, fabric stale, scheduler poll failing."""
    reasons: list[str] = []
    if not runner.alive() or not all(thread.alive() for thread in threads):
        reasons.append("a simulation thread has stopped (clock, sweeps or polls)")
    problem = sweeper.health_problem()
    if problem:
        reasons.append(problem)
    state = poller.state()
    if state.ok is False:
        reasons.append(f"scheduler poll failing: {state.error}")
    return {"status": "unhealthy" if reasons else "ok", "reasons": reasons, "model_time_seconds": runner.now}


def model_status(model: ClusterModel, speed: float) -> dict[str, object]:
    """Time, speed, job counts, QoS tables, pools and recent controls and faults (call under the lock)."""
    qos = model.qos()
    pools: dict[str, dict[str, object]] = {}
    for name, pool in model.scheduler_view().pools.items():
        entry: dict[str, object] = {k: v for k, v in asdict(pool).items() if k not in ("name", "nodes")}
        entry["nodes"] = len(pool.nodes)
        pools[name] = entry
    return {
        "time_seconds": model.now,
        "speed": speed,
        "jobs": model.job_states(),
        "qos": {
            "vlarb_high": ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_high),
            "vlarb_low": ",".join(f"{vl}:{w}" for vl, w in qos.vlarb_low),
            "sl2vl": ",".join(map(str, qos.sl2vl)),
            "vl_weights": list(model.vl_weights()),
        },
        "pools": pools,
        "events": [asdict(event) for event in model.events[-RECENT_EVENTS:]],
    }


_PAGE = """<!doctype html><html><head><title>ibpool simulate</title></head><body>
<h1>ibpool simulate: {nodes} nodes</h1>
<ul>
<li><a href="/targets">/targets</a> (Prometheus http_sd / file_sd JSON)</li>
<li><a href="/fabric/metrics">/fabric/metrics</a> &middot; <a href="/scheduler/metrics">/scheduler/metrics</a>
 &middot; <a href="{first}">{first}</a> (one per node)</li>
<li><a href="/-/model">/-/model</a> &middot; <a href="/healthz">/healthz</a></li>
<li>POST /-/control/vl-weights, /-/control/partition, /-/control/drain, /-/control/resume,
 /-/control/advance</li>
<li>POST /-/fault?kind=...: {kinds}</li>
</ul></body></html>
"""


def landing_page(model: ClusterModel) -> str:
    """Links to every endpoint."""
    first = node_metrics_path(model.spec.nodes[0])
    kinds = ", ".join(FAULT_KINDS)
    return _PAGE.format(nodes=len(model.spec.nodes), first=html.escape(first), kinds=html.escape(kinds))
