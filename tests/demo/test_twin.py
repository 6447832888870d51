"""The twin machinery on a small model: the log replays the run exactly, the static twin leaves the
changes out, a change's counterfactual isolates it, and a regression is named."""

from __future__ import annotations

import pytest

from demo.controls import LoggedModel, Replayer, keep_all, keep_untagged
from demo.measure import Meter, percentile
from demo.twin import fingerprint, run_twins
from simulator.cluster import scenarios

WINDOW = 600.0


def _run() -> LoggedModel:
    """Two chatty jobs on a shared uplink; at 300 s a 'proposal' gives the `hi` pool's VL the weight."""
    model = LoggedModel(scenarios.shared_uplink_spec(), [])
    model.submit(scenarios.chatty("hi", work=3600.0))
    model.submit(scenarios.chatty("lo", work=3600.0))
    model.advance(300.0)
    model.log.tag = "p1"
    model.set_vl_weights("", "0:16,1:240")
    model.log.tag = None
    model.advance(900.0)
    return model


def test_the_log_replays_the_run_exactly() -> None:
    live = _run()
    again = Replayer(live.fresh(), 60.0, None)
    again.run(live.log.entries, keep_all)
    assert fingerprint(again.model) == fingerprint(live)
    static = Replayer(live.fresh(), 60.0, None)
    static.run(live.log.entries, keep_untagged)
    assert fingerprint(static.model) != fingerprint(live)  # the change made a difference
    assert static.model.qos().vlarb_low == scenarios.shared_uplink_spec().qos.vlarb_low
    assert live.log.tags() == ["p1"]
    assert live.log.first("p1") == 300.0


def test_static_twin_and_counterfactual() -> None:
    live = _run()
    result = run_twins(
        live.fresh,
        live.log,
        live,
        duration=1200.0,
        every=60.0,
        window=WINDOW,
        priority_pool="hi",
        priority_job="hi-chatty",
    )
    assert result.replay_matches
    loop, static = result.loop.priority, result.static.priority
    assert loop.iteration_seconds is not None and static.iteration_seconds is not None
    assert loop.iteration_seconds < static.iteration_seconds  # the weights helped the priority job
    assert static.slowdown is not None and static.slowdown > 1.2
    (effect,) = result.effects
    assert (effect.tag, effect.start, effect.end) == ("p1", 300.0, 900.0)
    hi_with = effect.with_change.pools["hi"].multinode_slowdown
    hi_without = effect.without.pools["hi"].multinode_slowdown
    assert hi_with is not None and hi_without is not None and hi_with < hi_without
    regressions = {(r.pool, r.metric) for r in effect.regressions}
    assert ("lo", "multinode_slowdown") in regressions  # the cost to the other pool, named
    assert not any(pool == "hi" for pool, _ in regressions)


def test_meter_and_percentiles() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0
    model = LoggedModel(scenarios.shared_uplink_spec(), [scenarios.chatty("hi", work=600.0)])
    meter = Meter(0.0, 1200.0, 60.0, "hi", "hi-chatty")
    Replayer(model.fresh(), 60.0, meter).run([], keep_all, until=1200.0)
    result = meter.finish(model)
    hi = result.pools["hi"]
    assert hi.gpu_hours_served == pytest.approx(16 * 600 / 3600, rel=0.05)  # 16 GPUs for ~10 minutes
    assert result.pools["overall"].allocation == pytest.approx(16 * 600 / (64 * 1200), rel=0.1)
