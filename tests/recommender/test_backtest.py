"""The capacity model, the planner and its references (hindsight, bound, sharing) on constructed traces."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from recommender.backtest.engine import Observation, Prepared, RunResult, Strategy, run
from recommender.backtest.hindsight import HindsightStrategy, instant_bound
from recommender.backtest.metrics import percentile, summarize
from recommender.backtest.model import ModelParams, NodeMove
from recommender.backtest.reference import Budget, PlanStrategy, reference_plan
from recommender.backtest.report import STRATEGIES, BacktestConfig, run_backtest
from recommender.backtest.sharing import run_sharing
from recommender.backtest.strategies import PolicyStrategy, StaticStrategy
from recommender.backtest.trace import Trace
from recommender.policies.rebalance import BUDGET, RebalanceParams
from tests.recommender.scenarios import (
    borrower_and_donor,
    flickering,
    make_trace,
    quiet_owner_bursts,
    spiky_donor,
)

MODEL = ModelParams()
ROOMY = RebalanceParams(moves_per_pool_day=20.0)  # two-pool traces: a budget that does not bind

REQUIRED = {
    "pending_gpu_minutes",
    "served_gpu_minutes",
    "coverage",
    "coverage_beyond_static",
    "allocation_utilization",
    "moves",
    "moves_per_pool_day",
    "reversals_within_60min",
    "worst_pool_p95_wait_ratio_vs_static",
    "worst_pool_p99_wait_ratio_vs_static",
    "lost_gpu_minutes",
    "preempted_gpus",
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


def runs(trace: Trace, params: RebalanceParams = ROOMY) -> dict[str, RunResult]:
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    budget = Budget(params.moves_per_pool_day, round(params.reversal_min))
    return {
        "static": run(prepared, StaticStrategy(), MODEL),
        "policy": run(prepared, PolicyStrategy(prepared, params, MODEL), MODEL),
        "hindsight": run(prepared, HindsightStrategy(prepared, params, MODEL), MODEL),
        "reference": run(prepared, PlanStrategy(reference_plan(prepared, MODEL, budget)), MODEL),
        "sharing": run_sharing(prepared, MODEL),
        "bound": instant_bound(prepared, MODEL),
    }


def coverage(results: dict[str, RunResult]) -> dict[str, float]:
    return {n: summarize(r, results["static"])["coverage_beyond_static"] for n, r in results.items()}


def test_capacity_is_conserved_under_the_planner_and_its_hindsight() -> None:
    trace = quiet_owner_bursts(days=3, burst_day=2)
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    for inner in (PolicyStrategy(prepared, ROOMY, MODEL), HindsightStrategy(prepared, ROOMY, MODEL)):
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
    assert figures["coverage_beyond_static"] == 0.0
    assert figures["worst_pool_p95_wait_ratio_vs_static"] == 1.0


def test_the_planner_lends_for_a_lasting_shortfall_and_then_holds() -> None:
    results = runs(borrower_and_donor())
    cover = coverage(results)
    assert cover["bound"] >= cover["hindsight"] >= cover["policy"] > 0.75
    assert cover["reference"] >= cover["policy"]
    assert results["policy"].moves == 2  # 16 GPUs short: 2 nodes, then no churn
    first = results["policy"].move_log[0][0]
    # not before the shortfall (08:00) has shown at the loan's scale enough to pay two tokens
    assert 8 * 60 + MODEL.drain_delay_min < first < 10 * 60


def test_drain_delay_keeps_a_moved_node_out_of_service() -> None:
    prepared = Prepared.of(borrower_and_donor(hours=10), 8)

    class Probe(PolicyStrategy):
        seen: dict[int, int]

        def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
            self.seen[step] = obs.capacity[0]
            return super().decide(step, obs)

    probe = Probe(prepared, ROOMY, MODEL)
    probe.seen = {}
    result = run(prepared, probe, MODEL)
    arrive = result.move_log[0][0] + 1 + round(MODEL.drain_delay_min)
    assert probe.seen[arrive - 1] == 16 and probe.seen[arrive] > 16


class Script:
    """Makes the moves it is given at their steps and records each pool's capacity."""

    name = "script"

    def __init__(self, plan: dict[int, list[NodeMove]]) -> None:
        self.plan = plan
        self.seen: dict[int, list[int]] = {}

    def decide(self, step: int, obs: Observation) -> Sequence[NodeMove]:
        self.seen[step] = list(obs.capacity)
        return self.plan.get(step, ())


@pytest.mark.parametrize(("kind", "delay", "lost"), [("reclaim", 2, 8 * 30), ("takeback", 10, 0)])
def test_a_reclaim_serves_its_owner_after_the_reclaim_delay_and_requeues_the_work_on_the_node(
    kind: str, delay: int, lost: float
) -> None:
    """`a` lends a node to `b`, which runs 8 GPUs of work on it; at minute 70 `a` wants it back: a reclaim
    has it home 2 minutes after the decision step and costs `b` 30 minutes of work on each of the 8 GPUs;
    a drain takes 10 and kills nothing."""
    steps = 120
    trace = make_trace({"a": (16, [0] * 60 + [16] * 60, [0] * steps), "b": (16, [16] * steps, [8] * steps)})
    prepared = Prepared.of(trace, 8)
    script = Script({0: [NodeMove(0, 1, 0, 1, "lend")], 70: [NodeMove(1, 0, 0, 1, kind)]})
    result = run(prepared, script, MODEL)
    back = 70 + 1 + delay
    assert script.seen[back - 1] == [8, 16] and script.seen[back] == [16, 16]
    assert result.lost == [0.0, lost] and result.preempted == [0.0, lost / 30]
    assert result.takebacks == 1 and result.reclaims == (kind == "reclaim")
    assert result.move_log[-1] == (70, "b", "a", "a", 1, kind)
    served = summarize(result, run(prepared, StaticStrategy(), MODEL))["pools"]["b"]["served_gpu_minutes"]
    assert served == 8 * (70 + 1 - 11) - lost  # b's pending served on a's node from minute 11 to minute 70


def test_flickering_pending_is_lent_for_once_and_never_churns() -> None:
    """Pending that comes and goes within minutes is worth a third of a node's rate over a long loan: the
    two nodes it needs are lent once each, then they stay."""
    results = runs(flickering())
    log = results["policy"].move_log
    assert sum(n for *_, n, kind in log if kind == "lend") <= 2
    assert all(kind == "lend" for *_, kind in log) and results["policy"].reversals == 0


def test_a_spiky_donor_lends_only_what_it_never_needs_and_nothing_moves_back() -> None:
    results = runs(spiky_donor())
    policy = results["policy"]
    assert policy.reversals == 0
    assert summarize(policy, results["static"])["worst_pool_p95_wait_ratio_vs_static"] <= 1.05
    assert policy.moves_out[1] <= 1  # spiky reaches 24 of its 32 GPUs: one node at most is spare


def test_the_slow_lane_lends_an_idle_pools_nodes_and_the_owner_gets_them_back() -> None:
    trace = quiet_owner_bursts()
    prepared = Prepared.of(trace, MODEL.gpus_per_node)
    result = run(prepared, PolicyStrategy(prepared, ROOMY, MODEL), MODEL)
    kinds = [(kind, src, dst) for _, src, dst, _, _, kind in result.move_log]
    assert ("lend", "owner", "busy") in kinds
    assert {("takeback", "busy", "owner"), ("reclaim", "busy", "owner")} & set(kinds)
    assert result.reversals == 0


def test_the_budget_is_paced_over_a_long_busy_trace() -> None:
    """Four pools whose shortfall moves around every day: moves stay within the paced budget."""
    days, n = 12, 4
    rng = random.Random(3)
    pools: dict[str, tuple[int, list[int], list[int]]] = {}
    busy_day = [rng.randrange(n) for _ in range(days)]
    for p in range(n):
        run_row, pend_row = [], []
        for d in range(days):
            on = busy_day[d] == p
            run_row += [32 if on else 0] * 1440
            pend_row += [24 if on else 0] * 1440
        pools[f"p{p}"] = (32, run_row, pend_row)
    trace = make_trace(pools)
    prepared = Prepared.of(trace, 8)
    result = run(prepared, PolicyStrategy(prepared, RebalanceParams(), MODEL), MODEL)
    assert 0 < result.moves <= 0.5 * n * days  # tokens accrued; the bucket starts empty
    assert result.reversals == 0


def test_capacity_not_a_multiple_of_a_node_keeps_its_remainder() -> None:
    steps = 900
    trace = make_trace(
        {"busy": (16, [16] * steps, [0] * 120 + [40] * (steps - 120)), "odd": (20, [0] * steps, [0] * steps)}
    )
    prepared = Prepared.of(trace, 8)
    assert prepared.home_nodes == [2, 2]
    result = run(prepared, PolicyStrategy(prepared, ROOMY, MODEL), MODEL)
    assert result.moves_out[1] == 2  # both whole nodes, never the 4-GPU remainder
    assert result.capacity[1] >= 4 * (steps - 200)  # the remainder stays and keeps counting


@pytest.mark.parametrize("seed", range(4))
def test_the_bound_is_at_least_every_node_strategy_on_random_traces(seed: int) -> None:
    rng = random.Random(seed)
    steps = 2 * 1440
    pools: dict[str, tuple[int, list[int], list[int]]] = {}
    for p in range(4):
        cap = 8 * rng.randint(2, 5)
        level, run_row, pend_row = 0, [], []
        for _ in range(steps):
            if rng.random() < 0.01:
                level = rng.choice((0, cap // 2, cap, cap + 16))
            run_row.append(min(cap, level))
            pend_row.append(max(0, level - cap) + rng.choice((0, 0, 0, 4)))
        pools[f"p{p}"] = (cap, run_row, pend_row)
    results = runs(make_trace(pools))
    served = {n: summarize(r, results["static"])["served_gpu_minutes"] for n, r in results.items()}
    assert served["bound"] >= max(served["policy"], served["hindsight"], served["static"])


@pytest.mark.parametrize("trace", [borrower_and_donor(), quiet_owner_bursts(days=4, burst_day=3)])
def test_hindsight_at_the_same_budget_covers_at_least_the_policy_on_constructed_traces(trace: Trace) -> None:
    cover = coverage(runs(trace))
    assert cover["hindsight"] >= cover["policy"]


def test_sharing_borrows_idle_gpus_and_preempts_them_when_the_owner_returns() -> None:
    steps = 200
    owner = [0] * 100 + [32] * 100  # the owner wants all its GPUs back at minute 100
    trace = make_trace({"busy": (16, [16] * steps, [16] * steps), "owner": (32, owner, [0] * steps)})
    results = runs(trace)
    sharing = results["sharing"]
    figures = summarize(sharing, results["static"])
    assert sharing.preempted[0] == 16 and sharing.lost[0] == 16 * MODEL.preempt_loss_min
    assert figures["pools"]["busy"]["served_gpu_minutes"] == 16 * 100 - 16 * MODEL.preempt_loss_min
    assert figures["worst_pool_p95_wait_ratio_vs_static"] == 1.0  # owners never wait for their GPUs
    assert figures["moves"] == 0


def test_report_has_every_field_for_every_strategy_and_says_what_blocked_the_policy() -> None:
    tight = RebalanceParams(moves_per_pool_day=0.01)
    report = run_backtest(borrower_and_donor(), BacktestConfig(policy=tight), first=60)
    for name in STRATEGIES:
        assert set(report[name]) >= REQUIRED
        assert set(report[name]["pools"]) == (set() if name == "budget_bound" else {"busy", "idle"})
    assert report["static"]["moves"] == 0 and report["bound"]["moves"] is None
    assert report["budget_bound"]["moves"] is None
    assert report["meta"]["eval_days"] == round((16 * 60 - 60) / 1440, 4)
    assert report["policy"]["parameters"]["planner"] == tight.as_dict()
    assert report["policy"]["moves"] == 0
    assert set(report["policy"]["blocked_unmet_gpu_minutes"]) >= {BUDGET}


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.95) == 0.0
    assert percentile(list(range(1, 101)), 0.95) == 95.0
    assert percentile([0] * 96 + [50] * 4, 0.95) == 0.0


def test_the_slow_lane_lends_a_never_used_pools_nodes_once_and_keeps_them_lent() -> None:
    """A pool with no demand at all lends every node to the chronic queue, once each, for good (two pools:
    a token a day, a lend every two days)."""
    steps = 7 * 1440
    trace = make_trace({"busy": (16, [16] * steps, [24] * steps), "idle": (24, [0] * steps, [0] * steps)})
    prepared = Prepared.of(trace, 8)
    result = run(prepared, PolicyStrategy(prepared, RebalanceParams(), MODEL), MODEL)
    assert [(src, dst, kind) for _, src, dst, _, _, kind in result.move_log] == [("idle", "busy", "lend")] * 3
    assert result.moves == 3


def test_a_sparse_owner_waits_once_when_it_wakes_and_keeps_its_nodes_after() -> None:
    """Idle for days, then two half-hour bursts to all its GPUs two days apart: the first waits for one
    reclaim while every node comes home at once (the holder's work on them requeued); it then counts as
    sparse (demand in a sliver of its minutes) and lends nothing, so the second burst finds every node
    home."""
    days, steps = 7, 7 * 1440
    bursts = [range(d * 1440 + 720, d * 1440 + 750) for d in (3, 5)]
    owner = [32 if any(t in b for b in bursts) else 0 for t in range(steps)]
    trace = make_trace({"busy": (16, [16] * steps, [16] * steps), "owner": (32, owner, [0] * steps)})
    prepared = Prepared.of(trace, 8)
    policy = run(prepared, PolicyStrategy(prepared, ROOMY, MODEL), MODEL)
    takebacks = [(step, n, kind) for step, _, _, _, n, kind in policy.move_log if kind != "lend"]
    assert policy.move_log[0][1:3] == ("owner", "busy")  # lent while it had no demand
    # every node lent, at the first minute of the first burst, by reclaim
    assert takebacks == [(bursts[0].start, 2, "reclaim")]
    assert not [m for m in policy.move_log if m[0] > bursts[0].start and m[1] == "owner"]
    static = run(prepared, StaticStrategy(), MODEL)
    figures = summarize(policy, static)["pools"]
    assert figures["owner"]["wait_minutes"] == 1 + MODEL.reclaim_delay_min  # the first burst only
    assert figures["busy"]["lost_gpu_minutes"] == 16 * MODEL.preempt_loss_min  # both nodes were busy
    assert days == 7


def office_cluster(days: int = 14) -> Trace:
    """`office` wants 56 of its 64 GPUs from 09:00 to 17:00 every day and nothing otherwise; `batch` is
    always 32 GPUs short; 14 full one-node pools make the budget 8 tokens a day."""
    steps = days * 1440
    pools: dict[str, tuple[int, list[int], list[int]]] = {
        "office": (64, [56 if 9 <= (t % 1440) // 60 < 17 else 0 for t in range(steps)], [0] * steps),
        "batch": (64, [64] * steps, [32] * steps),
    }
    for i in range(14):
        pools[f"full{i:02d}"] = (8, [8] * steps, [0] * steps)
    return make_trace(pools)


def test_a_calibrated_profile_lends_a_day_pools_nodes_at_night_and_recalls_them_in_time() -> None:
    """With the profile every recall lands (by drain) before 09:00; without it the office lends at night
    too, but each morning its demand finds its nodes away: a reclaim (its allowance cannot absorb a daily
    drain), which costs it a reclaim's wait and the batch pool its work on them."""
    trace = office_cluster()
    with_profile = run_backtest(trace, BacktestConfig(), first=7 * 1440)
    without = run_backtest(trace, BacktestConfig(profile=False), first=7 * 1440)
    policy = with_profile["policy"]
    assert policy["coverage_beyond_static"] > without["policy"]["coverage_beyond_static"]
    assert policy["pools"]["office"]["wait_minutes"] == 0  # every recall landed before 09:00
    assert policy["reclaim_moves"] == 0 and policy["lost_gpu_minutes"] == 0
    assert policy["worst_pool_p99_wait_ratio_vs_static"] == 1.0 and policy["reversals_within_60min"] == 0
    assert policy["moves_per_pool_day"] <= 0.5
    blind = without["policy"]
    days = 7
    assert blind["reclaim_moves"] >= days and blind["lost_gpu_minutes"] > 0
    assert blind["pools"]["office"]["wait_minutes"] == days * (1 + MODEL.reclaim_delay_min)  # once a morning


def test_without_a_daily_pattern_the_profile_changes_nothing() -> None:
    """The calibration check falls back to persistence: the same moves with and without a profile."""
    rng = random.Random(4)
    steps, hold = 6 * 1440, 7 * 60  # levels held for seven hours: no time of day
    pools: dict[str, tuple[int, list[int], list[int]]] = {}
    for p in range(4):
        levels = [rng.choice((0, 8, 40, 56)) for _ in range(steps // hold + 1)]
        row = [levels[t // hold] for t in range(steps)]
        pools[f"p{p}"] = (32, [min(32, x) for x in row], [max(0, x - 32) for x in row])
    trace = make_trace(pools)
    prepared = Prepared.of(trace, 8)
    with_profile = run(prepared, PolicyStrategy(prepared, ROOMY, MODEL), MODEL)
    without = run(prepared, PolicyStrategy(prepared, ROOMY, MODEL, profile=False), MODEL)
    assert with_profile.moves > 0
    assert with_profile.move_log == without.move_log
