"""A pool's time-of-day demand profile, used only where it forecasts better than persistence.

The day is cut into slots of `slot_min` minutes (the reversal window, an hour by default) on the clock of
the samples. For each finished slot the profile keeps its peak and mean demand over the history window.
Its forecast of a slot is the median, over the previous days, of the same slot's peak (or mean).

**Calibration check.** Each time a slot finishes, its forecasts are scored against what happened: the
profile's (from the days before), the last day's median slot whatever the hour (a level with no time of
day: a profile must beat it to show a *daily* pattern, not just an average) and persistence's at every
lead of 1 to a day's slots (the slot that many slots earlier). The absolute errors are summed over the
slots of each day. The profile answers for a horizon only where, on every whole day checked in the
history window and at least two (a daily pattern repeats), its error was below both, persistence's
averaged over the leads the horizon covers (peaks for a donor's idle span, means for a taker's use);
otherwise it says nothing and the planner falls back to persistence. Noise that a median of a few days
happens to forecast well on one day does not pass. A demand with no stable
daily pattern (the shared trace) therefore leaves the planner as it was; a day/night cluster gets the
profile's foresight (a donor whose busy hours come back every day is not lent just before them).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from statistics import median

DAY_MIN = 1440.0


class DailyProfile:
    """Slot peaks and means of one pool, their forecasts and the running calibration check."""

    __slots__ = (
        "_checks",
        "_cur",
        "_cur_samples",
        "_miss_counts",
        "_misses",
        "_verdicts",
        "day_slots",
        "slot_min",
        "slots",
        "window_slots",
    )

    def __init__(self, slot_min: float, window_min: float) -> None:
        self.slot_min = slot_min
        self.day_slots = max(1, round(DAY_MIN / slot_min))
        self.window_slots = max(1, math.floor(window_min / slot_min))
        self.slots: dict[int, _Slot] = {}
        self._cur: int | None = None
        self._cur_samples: list[int] = []
        # per finished slot: (slot, [profile error, last day's median error, persistence error at lead
        # 1..day] for peaks, the same for means)
        self._checks: deque[tuple[int, list[float], list[float]]] = deque()
        # slots whose peak rose above the profile's forecast of it: (slot, forecast, peak), and per level
        self._misses: deque[tuple[int, int, int]] = deque()
        self._verdicts: dict[tuple[int, int], bool] = {}  # better(), until the next slot finishes
        self._miss_counts: list[int] = [0]

    def push(self, minute: float, demand: int) -> None:
        """Add a sample (in time order)."""
        k = math.floor(minute / self.slot_min + 1e-9)
        if self._cur is not None and k != self._cur:
            self._finish(self._cur, _Slot(self._cur_samples))
            self._cur_samples = []
        self._cur = k
        self._cur_samples.append(demand)

    def _finish(self, k: int, slot: _Slot) -> None:
        self._verdicts = {}
        peak, mean = slot.peak, slot.mean
        prof_peak, prof_mean = self._forecast_safe(k, 0), self._forecast_safe(k, 1)
        if prof_peak is not None and peak > prof_peak:
            self._miss(k, math.ceil(prof_peak), peak, +1)
        last_day = [self.slots[k - j] for j in range(1, self.day_slots + 1) if k - j in self.slots]
        if prof_peak is not None and prof_mean is not None and len(last_day) == self.day_slots:
            # the profile, then the last day's median whatever the hour, then persistence at each lead
            peaks = [abs(peak - prof_peak), abs(peak - median(x.peak for x in last_day))]
            means = [abs(mean - prof_mean), abs(mean - median(x.mean for x in last_day))]
            for lead in range(1, self.day_slots + 1):
                before = self.slots.get(k - lead)
                if before is None:
                    break
                peaks.append(abs(peak - before.peak))
                means.append(abs(mean - before.mean))
            if len(peaks) == self.day_slots + 2:
                self._checks.append((k, peaks, means))
        self.slots[k] = slot
        for gone in [s for s in self.slots if s <= k - self.window_slots]:
            del self.slots[gone]
        while self._misses and self._misses[0][0] <= k - self.window_slots:
            _, low, high = self._misses.popleft()
            self._count(low, high, -1)
        while self._checks and self._checks[0][0] <= k - self.window_slots:
            self._checks.popleft()

    def _miss(self, k: int, low: int, high: int, sign: int) -> None:
        self._misses.append((k, low, high))
        self._count(low, high, sign)

    def _count(self, low: int, high: int, sign: int) -> None:
        counts = self._miss_counts
        if high > len(counts):
            counts.extend([0] * (high - len(counts)))
        for level in range(max(0, low), high):
            counts[level] += sign

    def misses(self, level: int) -> int:
        """Slots over the window whose peak rose above `level` although the profile forecast it at or
        below `level`: the rises a loan timed by the profile would not have seen coming."""
        return self._miss_counts[level] if 0 <= level < len(self._miss_counts) else 0

    def _forecast_safe(self, k: int, part: int) -> float | None:
        days = self.window_slots // self.day_slots
        seen = [
            self.slots[k - j * self.day_slots].part(part)
            for j in range(1, days + 1)
            if k - j * self.day_slots in self.slots
        ]
        return median(seen) if seen else None

    def _slot_use(self, k: int, level: int, width: int) -> float | None:
        """The median over the previous days of slot k's mean GPUs above `level` (clipped to `width`)."""
        days = self.window_slots // self.day_slots
        seen = [
            self.slots[k - j * self.day_slots].use(level, width)
            for j in range(1, days + 1)
            if k - j * self.day_slots in self.slots
        ]
        return median(seen) if seen else None

    def better(self, part: int, leads: int) -> bool:
        """Whether the profile forecast better on **every** day checked in the window, at least two (a
        daily pattern must repeat): its error summed over the day below that of the last day's median (a
        level with no time of day) and below persistence's averaged over leads 1..`leads` (`part` 0: peaks,
        1: means)."""
        if leads < 1 or leads > self.day_slots:
            return False
        key = (part, leads)
        if key not in self._verdicts:
            days: dict[int, list[float]] = {}
            for k, peaks, means in self._checks:
                err = peaks if part == 0 else means
                day = days.setdefault(k // self.day_slots, [0.0, 0.0, 0.0, 0])
                day[0] += err[0]
                day[1] += err[1]
                day[2] += sum(err[2 : leads + 2]) / leads
                day[3] += 1
            whole = [d for d in days.values() if d[3] == self.day_slots]
            self._verdicts[key] = len(whole) >= 2 and all(d[0] < d[1] and d[0] < d[2] for d in whole)
        return self._verdicts[key]

    def use(self, now: float, level: int, width: int, horizon_min: float) -> float | None:
        """The profile's forecast of GPUs above `level` (clipped to `width`) per minute over the next
        `horizon_min` (at most a day): per slot ahead, the median over the previous days of what the same
        slot wanted above `level`; None where it does not beat persistence."""
        leads = math.ceil(horizon_min / self.slot_min - 1e-9)
        if not self.better(1, leads):
            return None
        k = math.floor(now / self.slot_min + 1e-9)
        total, n = 0.0, 0
        for lead in range(1, leads + 1):
            forecast = self._slot_use(k + lead, level, width)
            if forecast is None:
                return None
            total += forecast
            n += 1
        return total / n if n else None

    def soon(self, now: float, within: float) -> int:
        """The profile's peak of the next slot if it starts within `within` minutes and the profile beats
        persistence one slot ahead; else 0."""
        k = math.floor(now / self.slot_min + 1e-9)
        if (k + 1) * self.slot_min - now > within or not self.better(0, 1):
            return 0
        forecast = self._forecast_safe(k + 1, 0)
        return math.ceil(forecast) if forecast is not None else 0

    def due(self, now: float, level: int, span: float) -> float | None:
        """Minutes until the first slot within `span` (at most a day) whose profile peak exceeds `level`,
        where the profile's peaks beat persistence; None if it expects none or does not beat it."""
        leads = min(self.day_slots, math.ceil(span / self.slot_min - 1e-9))
        if not self.better(0, leads):
            return None
        k = math.floor(now / self.slot_min + 1e-9)
        for lead in range(1, leads + 1):
            forecast = self._forecast_safe(k + lead, 0)
            if forecast is not None and forecast > level:
                return max(0.0, (k + lead) * self.slot_min - now)
        return None


class _Slot:
    """One finished slot's samples, sorted, with prefix sums (its use above any level in O(log n))."""

    __slots__ = ("mean", "peak", "prefix", "values")

    def __init__(self, samples: list[int]) -> None:
        self.values = sorted(samples)
        self.prefix = [0]
        for v in self.values:
            self.prefix.append(self.prefix[-1] + v)
        self.peak = self.values[-1] if self.values else 0
        self.mean = self.prefix[-1] / len(self.values) if self.values else 0.0

    def part(self, which: int) -> float:
        """0: the peak, 1: the mean."""
        return float(self.peak) if which == 0 else self.mean

    def use(self, level: int, width: int) -> float:
        """Mean over the slot's samples of min(width, max(0, demand - level))."""
        n = len(self.values)
        if not n:
            return 0.0
        lo = bisect_right(self.values, level)
        hi = bisect_right(self.values, level + width)
        partial = self.prefix[hi] - self.prefix[lo] - level * (hi - lo)
        return (partial + width * (n - hi)) / n
