"""Maps the poller's cached outcome to the scheduler metric families (docs/architecture.md §4).

`scheduler` serves the last successful poll's pool and node series, or nothing when the latest poll
failed, none has finished yet or the last success is older than `max_age_seconds`: old values are never
served as fresh. `scheduler_status` always serves `ibpool_scheduler_up` and the last success's time. Two
collectors, so that `ibpool_exporter_collector_success` says what failed (docs/scheduler-exporter.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from exporter import catalog
from exporter.scheduler.errors import NoFreshDataError
from exporter.scheduler.poller import PollState, SchedulerPoller
from exporter.scheduler.pools import SchedulerSnapshot
from foundation.exposition import MetricFamily


def fresh_snapshot(state: PollState, now: float, max_age_seconds: float) -> SchedulerSnapshot:
    """The snapshot when it may be served as current; NoFreshDataError saying why not otherwise."""
    if state.ok is None:
        raise NoFreshDataError("no scheduler poll has finished yet")
    if not state.ok:
        raise NoFreshDataError(f"last scheduler poll failed: {state.error}")
    if state.snapshot is None or state.success_monotonic is None:
        raise NoFreshDataError("no successful scheduler poll")
    age = now - state.success_monotonic
    if age > max_age_seconds:
        raise NoFreshDataError(
            f"last successful scheduler poll is {age:.1f} s old (max {max_age_seconds:g} s)"
        )
    return state.snapshot


def snapshot_families(snapshot: SchedulerSnapshot) -> list[MetricFamily]:
    """The pool and node families of one snapshot; unknown GPU figures are omitted."""
    node_info = MetricFamily(catalog.POOL_NODE_INFO)
    capacity = MetricFamily(catalog.POOL_CAPACITY_GPUS)
    allocated = MetricFamily(catalog.POOL_ALLOCATED_GPUS)
    pending_gpus = MetricFamily(catalog.POOL_PENDING_GPUS)
    pending_jobs = MetricFamily(catalog.POOL_PENDING_JOBS)
    running_jobs = MetricFamily(catalog.POOL_RUNNING_JOBS)
    for pool in snapshot.pools:
        for node in pool.nodes:
            node_info.add_info((pool.name, node))
        values = (
            (capacity, pool.capacity_gpus),
            (allocated, pool.allocated_gpus),
            (pending_gpus, pool.pending_gpus),
            (pending_jobs, pool.pending_jobs),
            (running_jobs, pool.running_jobs),
        )
        for family, value in values:
            if value is not None:
                family.add((pool.name,), value)
    node_state = MetricFamily(catalog.NODE_STATE_INFO)
    for node, state in snapshot.node_states:
        node_state.add_info((node, state))
    return [node_info, capacity, allocated, pending_gpus, pending_jobs, running_jobs, node_state]


class SchedulerCollector:
    """Pool and node series of the last poll, only while they are fresh (see the module docstring)."""

    name = "scheduler"
    serves_snapshot = True  # reads the background loop's last result: runs inline, no deadline thread

    def __init__(
        self, poller: SchedulerPoller, max_age_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._poller = poller
        self._max_age = max_age_seconds
        self._clock = clock

    def collect(self) -> list[MetricFamily]:
        """The families of the fresh snapshot; raise NoFreshDataError when there is none."""
        return snapshot_families(fresh_snapshot(self._poller.state(), self._clock(), self._max_age))

    def close(self) -> None:
        """Nothing to release (the poller is stopped by its owner)."""


class SchedulerStatusCollector:
    """`ibpool_scheduler_up` and the timestamp of the last successful poll; never fails."""

    name = "scheduler_status"
    serves_snapshot = True  # reads the background loop's last result: runs inline, no deadline thread

    def __init__(
        self, poller: SchedulerPoller, max_age_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._poller = poller
        self._max_age = max_age_seconds
        self._clock = clock

    def collect(self) -> list[MetricFamily]:
        """Up (1 while fresh data are served, else 0) and the last success's Unix time when there is one."""
        state = self._poller.state()
        try:
            fresh_snapshot(state, self._clock(), self._max_age)
            up = 1
        except NoFreshDataError:
            up = 0
        up_family = MetricFamily(catalog.SCHEDULER_UP)
        up_family.add((), up)
        stamp = MetricFamily(catalog.SCHEDULER_POLL_TIMESTAMP)
        if state.success_unix is not None:
            stamp.add((), state.success_unix)
        return [up_family, stamp]

    def close(self) -> None:
        """Nothing to release."""
