"""The demo's clock stops (demo.schedule): a scripted event runs at its own time, after the scrape at that
time; while a change is applied the schedule records the cycles' scrapes itself."""

from __future__ import annotations

from demo.scenario import ScriptedEvent
from demo.schedule import Schedule
from simulator.cluster.model import ClusterModel
from simulator.serve.presets import preset_spec
from simulator.serve.runner import ClusterRunner

CYCLE = 600.0


class _Clock:
    """A small model on the cluster runner, with the schedule as its stops and a log of what happened."""

    def __init__(self, events: list[ScriptedEvent]) -> None:
        spec = preset_spec("small", nodes=4)
        self.runner = ClusterRunner(ClusterModel(spec), speed=0)
        self.log: list[tuple[float, str]] = []
        self.schedule = Schedule(events, CYCLE, lambda: self.runner.now, self._record, self._run)
        self.runner.set_stops(self.schedule)

    @property
    def now(self) -> float:
        return self.runner.now

    def _record(self) -> None:
        self.log.append((self.now, "recorded scrape"))

    def _run(self, item: ScriptedEvent) -> None:
        self.log.append((self.now, item.summary))

    def fetch(self) -> None:
        """The recommender's fetch: its source records and tells the schedule."""
        self.log.append((self.now, "fetch"))
        self.schedule.scraped()

    def advance_to(self, end: float) -> None:
        self.runner.advance(end - self.now)


def _fault(at: float) -> ScriptedEvent:
    return ScriptedEvent(at, "fault", f"fault at {at:g}")


def test_an_event_at_a_cycle_waits_for_the_fetch_and_one_between_cycles_runs_at_its_time() -> None:
    clock = _Clock([_fault(900.0), _fault(1200.0)])
    clock.fetch()
    for end in (600.0, 1200.0, 1800.0):
        clock.advance_to(end)
        clock.fetch()
        clock.schedule.run_due(clock.now)  # the loop, at the start of the next cycle
    assert clock.log == [
        (0.0, "fetch"),
        (600.0, "fetch"),
        (900.0, "fault at 900"),
        (1200.0, "fetch"),
        (1200.0, "fault at 1200"),
        (1800.0, "fetch"),
    ]


def test_while_applying_the_schedule_records_the_scrapes_the_fetch_skips() -> None:
    clock = _Clock([_fault(1500.0)])
    clock.fetch()
    for end in (600.0, 1200.0):
        clock.advance_to(end)
        clock.fetch()
    clock.schedule.applying = True  # an apply waiting for drained jobs: 1200 -> 2100
    for end in (1400.0, 1600.0, 1800.0, 2000.0, 2100.0):
        clock.advance_to(end)
    clock.schedule.applying = False
    clock.advance_to(2400.0)
    clock.fetch()
    assert clock.log == [
        (0.0, "fetch"),
        (600.0, "fetch"),
        (1200.0, "fetch"),
        (1500.0, "fault at 1500"),
        (1800.0, "recorded scrape"),
        (2400.0, "fetch"),
    ]
