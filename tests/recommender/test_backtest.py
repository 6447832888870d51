"""The capacity model and the three strategies on constructed traces."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from recommender.backtest.engine import Observation, Prepared, RunResult, Strategy, run
from recommender.backtest.metrics import percentile, summarize
from recommender.backtest.model import ModelParams, NodeMove
from recommender.backtest.oracle import OracleParams, OracleStrategy
from recommender.backtest.report import BacktestConfig, run_backtest
from recommender.backtest.strategies import PolicyStrategy, StaticStrategy
from recommender.backtest.trace import Trace
from recommender.policies.rebalance import ClusterView, Move, RebalanceParams
from tests.recommender.scenarios import (
    borrower_and_donor,
    day_and_night,
    flickering,
    make_trace,
    quiet_owner_bursts,
    spiky_donor,
)

MODEL = ModelParams()
QUICK = RebalanceParams(min_history_min=60.0, reserve_headroom=0.0)

REQUIRED = {
    "pending_gpu_minutes",
    "served_gpu_minutes",
    "coverage",
    "allocation_utilization",
    "moves",
    "moves_per_pool_day",
    "reversals_within_60min",
    "worst_pool_p95_wait_ratio_vs_static",
    "pools",
    "parameters",
}


class Conserving:
    """Wraps a strategy and checks, every step, that no capacity appears or vanishes."""

    def __init__(self, inner: Strategy, trace: Trace) -> None:
        self.inner, self.trace, self.name = inner, trace, inner.name
        self.checked = 0

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        """Check the sum over pools plus nodes in transit, then delegate."""
        total = sum(obs.capacity) + MODEL.gpus_per_node * obs.model.nodes_in_transit()
        assert total == sum(series[step] for series in self.trace.capacity)
        self.checked += 1
        return self.inner.decide(step, obs)


def all_runs(trace: Trace, params: RebalanceParams = QUICK) -> dict[str, RunResult]:
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    strategies: list[Strategy] = [
        StaticStrategy(),
        PolicyStrategy(prepared, params, MODEL),
        OracleStrategy(prepared, OracleParams(), MODEL),
    ]
    return {s.name: run(prepared, s, MODEL) for s in strategies}


def test_capacity_is_conserved_under_every_strategy() -> None:
    trace = spiky_donor(hours=12)
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    for inner in (PolicyStrategy(prepared, QUICK, MODEL), OracleStrategy(prepared, OracleParams(), MODEL)):
        checked = Conserving(inner, trace)
        result = run(prepared, checked, MODEL)
        assert checked.checked == trace.steps
        assert result.moves > 0


def test_static_never_moves_and_serves_pending_only_from_its_own_idle_gpus() -> None:
    trace = make_trace({"a": (16, [8, 16, 16], [4, 8, 0]), "b": (8, [0, 0, 0], [0, 0, 0])})
    result = run(Prepared.of(trace, 8), StaticStrategy(), MODEL)
    figures = summarize(result, result)
    assert result.moves == 0 and result.move_log == []
    assert figures["pending_gpu_minutes"] == 12.0
    assert figures["served_gpu_minutes"] == 4.0  # minute 0: 4 pending fit in 8 idle GPUs; minute 1: none
    assert figures["coverage"] == round(4 / 12, 4)
    assert figures["coverage_beyond_static"] == 0.0  # static itself serves nothing beyond static
    assert figures["worst_pool_p95_wait_ratio_vs_static"] == 1.0


def test_oracle_beats_policy_beats_static_on_coverage() -> None:
    runs = all_runs(borrower_and_donor())
    cover = {name: summarize(res, runs["static"])["coverage"] for name, res in runs.items()}
    assert cover["static"] == 0.0
    assert cover["oracle"] >= cover["policy"] > cover["static"]
    assert cover["oracle"] > 0.9
    assert runs["policy"].moves == 2  # 16 pending GPUs: 2 nodes in one decision, then no churn
    # pending in all but the window's persistence_quantile share of minutes (48 of 60 + 1) has lasted
    forgiven = math.ceil(QUICK.persistence_quantile * QUICK.persistence_min)
    assert runs["policy"].move_log[0][0] == 8 * 60 + QUICK.persistence_min - forgiven


def test_drain_delay_keeps_a_moved_node_out_of_service() -> None:
    runs = all_runs(borrower_and_donor(hours=10))
    step = runs["policy"].move_log[0][0]
    prepared = Prepared.of(borrower_and_donor(hours=10), 8)

    class Probe(PolicyStrategy):
        seen: dict[int, int]

        def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
            self.seen[step] = obs.capacity[0]
            return super().decide(step, obs)

    probe = Probe(prepared, QUICK, MODEL)
    probe.seen = {}
    run(prepared, probe, MODEL)
    arrive = step + 1 + round(MODEL.drain_delay_min)
    assert probe.seen[arrive - 1] == 16 and probe.seen[arrive] > 16


def test_the_policy_sees_where_nodes_are_at_every_step_after_moves_and_arrivals() -> None:
    prepared = Prepared.of(borrower_and_donor(hours=10), 8)

    class Probe(PolicyStrategy):
        checked = 0

        def view(self, step: int, obs: Observation) -> ClusterView:
            out = super().view(step, obs)
            model = obs.model
            assert out.loans == self._loans(model)  # the cached placement is never stale
            movable = model.movable_all()
            assert [s.idle_nodes for s in out.pools] == [
                min((obs.capacity[p] - obs.allocated[p]) // 8, movable[p]) for p in range(len(movable))
            ]
            self.checked += bool(out.loans)
            return out

    probe = Probe(prepared, QUICK, MODEL)
    result = run(prepared, probe, MODEL)
    assert result.moves > 0 and probe.checked > 0


JUMPY = RebalanceParams(
    persistence_min=1, min_pending_nodes=0.1, reserve_window_min=1, cooldown_min=0, min_history_min=0,
    reserve_headroom=0.0, lend_budget_per_pool_day=1000, move_budget_per_pool_day=0,
    takeback_persistence_min=0,
)  # fmt: skip


def test_persistence_ignores_flickering_pending() -> None:
    trace = flickering()
    prepared = Prepared.of(trace, 8)
    calm = run(prepared, PolicyStrategy(prepared, QUICK, MODEL), MODEL)
    jumpy = run(prepared, PolicyStrategy(prepared, JUMPY, MODEL), MODEL)
    assert calm.moves == 0
    assert jumpy.moves > 0


def test_reserve_and_cooldown_prevent_flapping_on_a_noisy_donor() -> None:
    trace = spiky_donor()
    prepared = Prepared.of(trace, 8)
    calm = run(prepared, PolicyStrategy(prepared, QUICK, MODEL), MODEL)
    jumpy = run(prepared, PolicyStrategy(prepared, JUMPY, MODEL), MODEL)
    assert 0 < calm.moves <= 2 and calm.reversals == 0
    assert jumpy.moves > 10 * calm.moves and jumpy.reversals > 0


def test_capacity_not_a_multiple_of_a_node_keeps_its_remainder() -> None:
    steps = 600
    trace = make_trace(
        {"busy": (16, [16] * steps, [0] * 120 + [40] * (steps - 120)), "odd": (20, [0] * steps, [0] * steps)}
    )
    prepared = Prepared.of(trace, 8)
    assert prepared.home_nodes == [2, 2]
    result = run(prepared, PolicyStrategy(prepared, QUICK, MODEL), MODEL)
    assert result.moves_out[1] == 2  # both whole nodes, never the 4-GPU remainder
    assert result.capacity[1] >= 4 * (steps - 200)  # the remainder stays and keeps counting


def test_report_has_every_field_for_every_strategy() -> None:
    report = run_backtest(borrower_and_donor(), BacktestConfig(policy=QUICK), first=60)
    for name in ("policy", "static", "oracle"):
        assert set(report[name]) >= REQUIRED
        assert set(report[name]["pools"]) == {"busy", "idle"}
    assert report["static"]["moves"] == 0
    assert report["meta"]["eval_days"] == round((16 * 60 - 60) / 1440, 4)
    assert report["policy"]["parameters"]["policy"]["persistence_min"] == QUICK.persistence_min


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.95) == 0.0
    assert percentile(list(range(1, 101)), 0.95) == 95.0
    assert percentile([0] * 96 + [50] * 4, 0.95) == 0.0


def test_brief_owner_spike_recalls_nothing_a_lasting_one_does() -> None:
    steps = 600
    spike = [1] * steps  # never idle: an idle owner recalls at once (test below)
    spike[300:302] = [32] * 2  # shorter than either take-back persistence window
    spike[450:] = [32] * (steps - 450)  # lasting
    trace = make_trace({"busy": (16, [16] * steps, [16] * steps), "owner": (32, spike, [0] * steps)})
    prepared = Prepared.of(trace, 8)
    result = run(prepared, PolicyStrategy(prepared, QUICK, MODEL), MODEL)
    kinds = [(step, kind) for step, *_, kind in result.move_log]
    assert [k for _, k in kinds] == ["lend", "takeback"]
    assert 450 < kinds[1][0] <= 450 + QUICK.settled_takeback_min  # the lend is hours old
    eager = RebalanceParams(min_history_min=60.0, reserve_headroom=0.0, takeback_persistence_min=0)
    result = run(prepared, PolicyStrategy(prepared, eager, MODEL), MODEL)
    assert [kind for *_, kind in result.move_log][:2] == ["lend", "takeback"]
    assert result.move_log[1][0] == 300


def test_an_owner_idle_within_the_quiet_window_recalls_at_once() -> None:
    steps = 600
    demand = [0] * steps
    demand[300:302] = [32] * 2  # a fresh job on an idle pool: no persistence filter
    trace = make_trace({"busy": (16, [16] * steps, [16] * steps), "owner": (32, demand, [0] * steps)})
    prepared = Prepared.of(trace, 8)
    result = run(prepared, PolicyStrategy(prepared, QUICK, MODEL), MODEL)
    assert [(step, kind) for step, *_, kind in result.move_log][1] == (300, "takeback")
    off = replace(QUICK, takeback_quiet_min=0.0)
    result = run(prepared, PolicyStrategy(prepared, off, MODEL), MODEL)
    assert [kind for *_, kind in result.move_log] == ["lend"]  # the 2-minute job did not last 3


def test_a_take_back_that_could_be_a_reversal_waits_the_longer_window() -> None:
    steps = 480

    def owner_spike(at: int) -> list[int]:
        demand = [1] * steps  # never idle (an idle owner needs no filter once settled)
        demand[at : at + 4] = [32] * 4  # lasts the settled window (3 min), not the full one (5 min)
        return demand

    def moves_with_spike(at: int | None) -> list[tuple[int, str]]:
        owner = owner_spike(at) if at is not None else [1] * steps
        trace = make_trace({"busy": (16, [16] * steps, [16] * steps), "owner": (32, owner, [0] * steps)})
        prepared = Prepared.of(trace, 8)
        result = run(prepared, PolicyStrategy(prepared, QUICK, MODEL), MODEL)
        return [(step, kind) for step, *_, kind in result.move_log]

    [(lent_at, kind)] = moves_with_spike(None)
    assert kind == "lend"
    soon = lent_at + QUICK.cooldown_min // 2  # the lend's nodes have landed; a recall would be a reversal
    assert moves_with_spike(int(soon)) == [(lent_at, "lend")]
    late = lent_at + 3 * int(QUICK.cooldown_min)
    moves = moves_with_spike(late)
    assert [kind for _, kind in moves] == ["lend", "takeback"]
    assert late < moves[1][0] <= late + QUICK.settled_takeback_min


def test_time_of_day_plans_serve_a_day_pool_and_a_night_pool() -> None:
    trace = day_and_night(days=12)
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    first = 8 * 1440  # plans need 5 of the last 7 days; score the last 4
    static = run(prepared, StaticStrategy(), MODEL, first)
    roomy = {"lend_budget_per_pool_day": 10.0, "move_budget_per_pool_day": 20.0}
    with_plans = RebalanceParams.from_mapping(roomy)
    without = RebalanceParams.from_mapping({**roomy, "plan_days": 0})
    planned = summarize(run(prepared, PolicyStrategy(prepared, with_plans, MODEL), MODEL, first), static)
    reactive = summarize(run(prepared, PolicyStrategy(prepared, without, MODEL), MODEL, first), static)
    assert planned["coverage"] >= 0.85
    assert planned["reversals_within_60min"] == 0
    assert planned["worst_pool_p95_wait_ratio_vs_static"] <= 1.0
    assert planned["coverage"] > reactive["coverage"] + 0.5


def test_plans_do_not_fire_without_a_daily_pattern() -> None:
    trace = spiky_donor(hours=10 * 24)
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    strategy = PolicyStrategy(prepared, QUICK, MODEL)
    reasons: list[str] = []
    propose = strategy.policy.propose

    def recording(view: ClusterView) -> list[Move]:
        moves = propose(view)
        reasons.extend(m.reason for m in moves)
        return moves

    strategy.policy.propose = recording  # type: ignore[method-assign]
    run(prepared, strategy, MODEL)
    assert reasons and not [r for r in reasons if "time-of-day" in r]


def test_an_owner_that_took_its_nodes_back_does_not_lend_them_again_at_once() -> None:
    trace = quiet_owner_bursts()
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    result = run(prepared, PolicyStrategy(prepared, RebalanceParams(), MODEL), MODEL)
    kinds = [(kind, src, dst) for _, src, dst, _, _, kind in result.move_log]
    assert ("takeback", "busy", "owner") in kinds
    assert result.reversals == 0
