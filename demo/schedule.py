"""The demo's clock stops: scripted events and the scrapes kept for the alert replay happen at their own
simulated times, whoever advances the model (a cycle, the recommender's first window, an apply waiting for
drained jobs).

`Schedule` is the cluster runner's `Stops`. A scrape is due every cycle; the recommender's fetch takes it
(its source records what it reads), except while a change is applied, when the schedule records it itself.
The events at a time run once the scrape at that time is taken, outside any change (for the twins).
Why: docs/demo.md ("One cycle").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from demo.scenario import ScriptedEvent

_EPS = 1e-6


class Schedule:
    """Scripted events and scrape times on the model clock (see the module docstring)."""

    def __init__(
        self,
        events: Sequence[ScriptedEvent],
        every: float,
        clock: Callable[[], float],
        record: Callable[[], None],
        run: Callable[[ScriptedEvent], None],
    ) -> None:
        self.events = sorted(events, key=lambda item: item.at)
        self.every = every
        self.clock = clock  # the model's time
        self.scraped_at: float | None = None  # the last scrape taken (by the recommender or recorded here)
        self.applying = False  # set while a change is applied: no fetch comes, the scrape is recorded here
        self._record = record
        self._run = run

    def next_scrape(self) -> float:
        """The next scrape time not yet taken."""
        if self.scraped_at is None:
            return 0.0
        return (math.floor(self.scraped_at / self.every + _EPS) + 1) * self.every

    def scraped(self) -> None:
        """A scrape was taken and recorded now (the recommender's source says so after each one)."""
        self.scraped_at = self.clock()

    def next_stop(self, now: float) -> float | None:
        """`now` when there is something to do now, else the next time there will be (None: nothing
        before the recommender's fetch)."""
        scrape = self.next_scrape()
        if self.events and self._before(self.events[0], scrape):
            return max(self.events[0].at, now)
        if self.applying or scrape > now + _EPS:
            return max(scrape, now)
        return None  # the recommender's fetch takes the scrape due now; the events after it wait for it

    def reached(self, now: float) -> None:
        """Record the scrape due now (while applying), then run the events due."""
        if self.applying and self.next_scrape() <= now + _EPS:
            self._record()
            self.scraped_at = now  # also when the recorder does not say so
        self.run_due(now)

    def run_due(self, now: float) -> None:
        """Run the events due at `now` that no untaken scrape comes before."""
        while (
            self.events
            and self.events[0].at <= now + _EPS
            and self._before(self.events[0], self.next_scrape())
        ):
            self._run(self.events.pop(0))

    @staticmethod
    def _before(item: ScriptedEvent, scrape: float) -> bool:
        return item.at < scrape - _EPS
