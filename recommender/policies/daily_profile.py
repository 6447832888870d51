"""Time-of-day demand profile per pool, learned from history, for shift plans (day pool vs night pool).

Demand (allocated + pending GPUs, what the users want whatever capacity the pool had) is kept per
time slot: its minimum and maximum within the slot. A forecast for time *t* looks at the same time of
day on each of the last `days` days:

- `expected_demand`: the level the pool's demand stayed at or above for the whole slot of *t* on at
  least `min_days` of those days (the `min_days`-th largest slot minimum). A pool that needed more than
  its capacity at that hour on most recent days will probably need it again today.
- `expected_peak`: the largest demand seen on *any* of those days over `[t, t + horizon)`: what a
  donor must keep for itself if it lends now.
- `likely_peak`: the demand reached within `[t, t + likely_window)` on at least `likely_days` of those
  days (the `likely_days`-th largest of the daily peaks; 0 when `likely_days` is 0): what a donor will
  probably need again within the hour, however quiet its last hours were.

Both are None until `min_days` days of history exist (no guess without evidence). Slots are aligned to
absolute time (minutes since the epoch), so "the same time yesterday" is exactly 1440 minutes earlier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DAY_MIN = 1440.0


@dataclass(frozen=True, slots=True)
class ProfileParams:
    """How the profile is learned: slot width, look-back days, agreement needed, look-ahead horizon."""

    slot_min: float = 30.0
    days: int = 7
    min_days: int = 5
    horizon_min: float = 240.0
    likely_days: int = 0
    likely_window_min: float = 60.0

    def __post_init__(self) -> None:
        errors = []
        if self.slot_min <= 0 or DAY_MIN % self.slot_min:
            errors.append("slot_min must be > 0 and divide a day")
        if self.days < 1 or not 1 <= self.min_days <= self.days:
            errors.append("need days >= 1 and 1 <= min_days <= days")
        if not 0 <= self.horizon_min < DAY_MIN:
            errors.append("horizon_min must be >= 0 and under a day")
        if not 0 <= self.likely_days <= self.min_days:
            errors.append("likely_days must be between 0 and min_days")
        if not 0 < self.likely_window_min < DAY_MIN:
            errors.append("likely_window_min must be > 0 and under a day")
        if errors:
            raise ValueError("; ".join(errors))


@dataclass(frozen=True, slots=True)
class Forecast:
    """What the profile expects for one pool (GPUs)."""

    expected_demand: int
    expected_peak: int
    days_seen: int
    likely_peak: int = 0


class DailyProfile:
    """Slot minima/maxima of each pool's demand over the last `days` days (plus the horizon)."""

    def __init__(self, params: ProfileParams | None = None) -> None:
        self.params = params or ProfileParams()
        self._slots: dict[str, dict[int, tuple[int, int]]] = {}
        self._first: dict[str, int] = {}
        self._cache: dict[tuple[str, int], Forecast | None] = {}
        self._per_day = round(DAY_MIN / self.params.slot_min)
        span = math.ceil(self.params.horizon_min / self.params.slot_min)
        self._keep = self.params.days * self._per_day + span + 1

    def slot_of(self, minute: float) -> int:
        """Absolute slot index of a time (minutes since the epoch)."""
        return math.floor(minute / self.params.slot_min)

    def record(self, pool: str, minute: float, demand: int) -> None:
        """Add one demand sample of `pool` at `minute` (samples arrive in time order per pool)."""
        slot = self.slot_of(minute)
        slots = self._slots.setdefault(pool, {})
        self._first.setdefault(pool, slot)
        low, high = slots.get(slot, (demand, demand))
        slots[slot] = (min(low, demand), max(high, demand))
        stale = slot - self._keep
        if stale in slots:
            del slots[stale]

    def forecast(self, pool: str, minute: float) -> Forecast | None:
        """Expected demand in the slot of `minute` and the peak over the horizon from it; None without
        `min_days` complete days of history (cached per pool and slot)."""
        slot = self.slot_of(minute)
        key = (pool, slot)
        if key not in self._cache:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = self._forecast(pool, slot)
        return self._cache[key]

    def _forecast(self, pool: str, slot: int) -> Forecast | None:
        p, slots = self.params, self._slots.get(pool)
        if not slots:
            return None
        span = max(1, math.ceil(p.horizon_min / p.slot_min))
        near = max(1, math.ceil(p.likely_window_min / p.slot_min))
        lows: list[int] = []
        highs: list[int] = []
        peak = 0
        for day in range(1, p.days + 1):
            past = slot - day * self._per_day
            if past < self._first[pool] or past not in slots:
                continue
            lows.append(slots[past][0])
            highs.append(max((slots[s][1] for s in range(past, past + near) if s in slots), default=0))
            for s in range(past, past + span):
                if s in slots:
                    peak = max(peak, slots[s][1])
        if len(lows) < p.min_days:
            return None
        lows.sort(reverse=True)
        highs.sort(reverse=True)
        likely = highs[p.likely_days - 1] if p.likely_days else 0  # likely_days <= min_days <= days seen
        return Forecast(lows[p.min_days - 1], peak, len(lows), likely)
