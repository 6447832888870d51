"""The two budgeted references: the reference plan of long loans (hindsight greedy, replayed) and the upper
bound at the policy's budget (layer activations assigned to token slots)."""

from __future__ import annotations

import itertools
import random

import pytest

from recommender.backtest.bound import budget_bound, max_assignment, slot_steps
from recommender.backtest.engine import Prepared, run
from recommender.backtest.metrics import summarize
from recommender.backtest.model import ModelParams
from recommender.backtest.reference import Budget, PlanStrategy, ReferencePlanner, reference_plan
from recommender.backtest.report import BacktestConfig, run_backtest
from recommender.backtest.strategies import StaticStrategy
from recommender.backtest.trace import Trace
from recommender.policies.rebalance import RebalanceParams
from tests.recommender.scenarios import make_trace, quiet_owner_bursts

MODEL = ModelParams()
DAY = 1440


def random_trace(seed: int, pools: int = 4, days: int = 2) -> Trace:
    rng = random.Random(seed)
    steps = days * DAY
    out: dict[str, tuple[int, list[int], list[int]]] = {}
    for p in range(pools):
        cap = 8 * rng.randint(2, 5)
        level, run_row, pend_row = 0, [], []
        for _ in range(steps):
            if rng.random() < 0.01:
                level = rng.choice((0, cap // 2, cap, cap + 16, cap + 32))
            run_row.append(min(cap, level))
            pend_row.append(max(0, level - cap) + rng.choice((0, 0, 0, 4)))
        out[f"p{p}"] = (cap, run_row, pend_row)
    return make_trace(out)


def test_the_reference_lends_a_never_used_pools_nodes_once_for_the_whole_trace() -> None:
    """The slow lane in hindsight: an idle pool's nodes go to the chronic queue once, never back."""
    steps = 3 * DAY
    trace = make_trace({"busy": (16, [16] * steps, [24] * steps), "idle": (24, [0] * steps, [0] * steps)})
    prepared = Prepared.of(trace, 8)
    loans = reference_plan(prepared, MODEL, Budget(0.5, 60))
    # 2 pools x 0.5 a day: a token a day; every lend from home pays 2 (its return prepaid, as the policy
    # pays, though this one is still open at the end), made as soon as it is paid
    assert [(loan.start, loan.end) for loan in loans] == [(2 * DAY, None)]
    assert loans[0].value == 8 * (3 * DAY - 2 * DAY - 11)


def test_the_open_end_reference_pays_one_token_for_a_loan_open_at_the_end() -> None:
    """The second and third rounds' reference: hindsight of the horizon makes a loan to the end cost 1."""
    steps = 3 * DAY
    trace = make_trace({"busy": (16, [16] * steps, [24] * steps), "idle": (24, [0] * steps, [0] * steps)})
    loans = reference_plan(Prepared.of(trace, 8), MODEL, Budget(0.5, 60, prepaid_end=False))
    assert [(loan.start, loan.end) for loan in loans] == [(DAY, None), (2 * DAY, None)]
    assert loans[0].value == 8 * (3 * DAY - DAY - 11)


def test_the_reference_returns_a_node_before_its_owner_needs_it_and_no_donor_waits() -> None:
    trace = quiet_owner_bursts(days=4, burst_day=3)
    prepared = Prepared.of(trace, 8)
    loans = reference_plan(prepared, MODEL, Budget(20.0, 60))
    burst = 3 * DAY + 720
    assert loans and all(
        loan.end is not None and loan.end + 1 + (2 if loan.reclaimed else 10) <= burst
        for loan in loans
        if loan.start < burst
    )
    static = run(prepared, StaticStrategy(), MODEL)
    result = run(prepared, PlanStrategy(loans), MODEL)
    figures = summarize(result, static)
    assert figures["pools"]["owner"]["wait_minutes"] == 0
    assert figures["worst_pool_p99_wait_ratio_vs_static"] == 1.0 and result.reversals == 0


@pytest.mark.parametrize(
    ("loss", "end", "reclaimed"), [(30.0, 400 - 1 - 10, False), (5.0, 400 - 1 - 2, True)]
)
def test_the_reference_returns_a_busy_node_by_reclaim_only_when_the_later_return_is_worth_the_work_lost(
    loss: float, end: int, reclaimed: bool
) -> None:
    """The donor needs its node from minute 400 and the taker uses it to the end: a reclaim may return it 8
    minutes later than a drain (64 GPU-minutes more use) but requeues the 8 GPUs running on it; worth it
    when a requeued GPU loses 5 minutes of work (40), not 30 (240)."""
    steps = 600
    trace = make_trace(
        {"donor": (16, [0] * 400 + [16] * 200, [0] * steps), "taker": (8, [8] * steps, [8] * steps)}
    )
    prepared = Prepared.of(trace, 8)
    model = ModelParams(preempt_loss_min=loss)
    loans = reference_plan(prepared, model, Budget(20.0, 60))
    assert [(loan.end, loan.reclaimed) for loan in loans] == [(end, reclaimed)]
    static = run(prepared, StaticStrategy(), model)
    result = run(prepared, PlanStrategy(loans), model)
    assert result.reclaims == reclaimed and sum(result.lost) == (8 * loss if reclaimed else 0.0)
    assert summarize(result, static)["pools"]["donor"]["wait_minutes"] == 0  # home in time either way


@pytest.mark.parametrize("seed", range(3))
def test_the_replayed_reference_serves_what_it_planned_within_its_budget(seed: int) -> None:
    trace = random_trace(seed)
    prepared = Prepared.of(trace, 8)
    planner = ReferencePlanner(prepared, MODEL, Budget(0.5, 60))
    loans = planner.plan()
    static = run(prepared, StaticStrategy(), MODEL)
    result = run(prepared, PlanStrategy(loans), MODEL)
    gain = summarize(result, static)["served_gpu_minutes"] - summarize(static, static)["served_gpu_minutes"]
    # a loan's value is net of the work its return requeues (a reclaim that finds the node busy)
    assert gain == pytest.approx(sum(loan.value for loan in loans))
    assert result.reversals == 0
    assert result.moves <= 0.5 * len(trace.pools) * 2  # tokens accrued over the two days
    for p in range(len(trace.pools)):  # donors never wait more than under static
        assert all(w <= s for w, s in zip(result.waits[p], static.waits[p], strict=True))


def test_the_assignment_is_the_best_matching() -> None:
    rng = random.Random(5)
    for rows, cols in ((3, 3), (4, 2), (2, 5), (5, 5)):
        weights = [[float(rng.randint(0, 20)) for _ in range(cols)] for _ in range(rows)]
        best = 0.0
        if rows <= cols:
            for perm in itertools.permutations(range(cols), rows):
                best = max(best, sum(weights[i][j] for i, j in enumerate(perm)))
        else:
            for perm in itertools.permutations(range(rows), cols):
                best = max(best, sum(weights[i][j] for j, i in enumerate(perm)))
        assert max_assignment(weights) == best


def test_token_slots_follow_the_accrual() -> None:
    # 4 pools x 0.5 a day: two tokens a day, one every 720 minutes
    assert slot_steps(4, 0.5, 1.0, 3 * DAY) == [720, 1440, 2160, 2880, 3600]


def test_the_budget_bound_counts_each_layer_once_from_its_slot() -> None:
    """One pool short of two nodes for two days, tokens every 720 minutes: layer 1 from the first
    slot, layer 2 from the second, each after the drain."""
    steps = 2 * DAY
    trace = make_trace({"busy": (16, [16] * steps, [16] * steps), "idle": (32, [0] * steps, [0] * steps)})
    for p in range(2):
        trace.capacity[p][:] = [trace.capacity[p][0]] * steps
    bound = budget_bound(
        Prepared.of(trace, 8), gpus_per_node=8, drain_steps=11, moves_per_pool_day=1.0, first=0, stop=steps
    )
    # 2 pools x 1 a day: a token every 720 minutes
    assert bound.gain == 8 * (steps - 720 - 11) + 8 * (steps - 1440 - 11)


@pytest.mark.parametrize("seed", range(4))
def test_the_budget_bound_is_at_least_every_node_strategy_at_the_policys_budget(seed: int) -> None:
    report = run_backtest(random_trace(seed, days=3), BacktestConfig(policy=RebalanceParams()))
    bound = report["budget_bound"]["served_gpu_minutes"]
    for name in ("policy", "reference", "hindsight", "static"):
        assert bound >= report[name]["served_gpu_minutes"] - 1e-6, name
    assert bound <= report["bound"]["served_gpu_minutes"] + 1e-6


def test_the_budget_bound_is_reached_where_the_budget_is_the_only_limit() -> None:
    """A never-used pool and a queue that never ends: nothing but the budget limits a loan, so the
    open-end reference plan's loans to the end (1 token each) reach the bound exactly; the reference that
    prepays every return, like the policy, and the policy stay under it."""
    steps = 4 * DAY
    trace = make_trace({"busy": (16, [16] * steps, [24] * steps), "idle": (24, [0] * steps, [0] * steps)})
    report = run_backtest(trace, BacktestConfig())
    gain = {
        name: report[name]["served_gpu_minutes"] - report["static"]["served_gpu_minutes"]
        for name in ("policy", "reference", "ref_open_end", "budget_bound")
    }
    assert gain["budget_bound"] == gain["ref_open_end"] == 8 * (3 * steps - 6 * DAY - 3 * 11)
    assert gain["reference"] == 8 * (steps - 2 * DAY - 11)  # one lend: a token a day, 2 a lend
    assert gain["policy"] <= gain["budget_bound"]
