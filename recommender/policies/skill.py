"""How well a pool's recent demand forecasts its next day, against the window the planner would use.

Every `every` minutes (the recent window's length) it records two forecasts of the pool's mean demand over
the next `horizon` minutes (a day): the mean of the window the planner reads at that horizon (`scale`) and
the mean of the recent window (`recent`). A day later it scores both against what came. `weights()` gives
the two forecasts' weights for a blend, each the other's share of the summed absolute errors over the
history window (the forecast that erred less weighs more; inverse-error combination), or None before any
forecast has been scored. No constant of its own: the cadence, the horizon and the history are the
outlook's. Why: docs/backtest.md ("The forecast's skill").
"""

from __future__ import annotations

from collections import deque


class ForecastSkill:
    """Scores the recent window against the at-scale window as forecasts of the next day's mean demand."""

    __slots__ = (
        "_count",
        "_cum",
        "_due",
        "_err_recent",
        "_err_scale",
        "_errors",
        "_pending",
        "every",
        "history",
        "horizon",
    )

    def __init__(self, every: float, horizon: float, history: float) -> None:
        self.every, self.horizon, self.history = every, horizon, history
        self._cum = 0.0  # demand summed over every sample so far
        self._count = 0  # samples so far
        self._pending: deque[tuple[float, float, int, float, float]] = (
            deque()
        )  # (minute, cum, count, scale, recent)
        self._errors: deque[tuple[float, float, float]] = deque()  # (minute scored, scale's error, recent's)
        self._err_scale = 0.0
        self._err_recent = 0.0
        self._due: float | None = None  # when the next pair of forecasts is recorded

    def push(self, minute: float, demand: int) -> None:
        """Add a sample; score the forecasts a horizon old."""
        self._cum += demand
        self._count += 1
        pending = self._pending
        while pending and minute - pending[0][0] >= self.horizon:
            _, cum, count, scale, recent = pending.popleft()
            came = (self._cum - cum) / max(1, self._count - count)
            errs = (abs(scale - came), abs(recent - came))
            self._errors.append((minute, *errs))
            self._err_scale += errs[0]
            self._err_recent += errs[1]
        errors = self._errors
        while errors and errors[0][0] <= minute - self.history:
            _, scale_err, recent_err = errors.popleft()
            self._err_scale -= scale_err
            self._err_recent -= recent_err

    def record(self, minute: float, scale: float, recent: float) -> None:
        """The two forecasts made at `minute` (after its sample was pushed; call when `due`)."""
        self._due = minute + self.every
        self._pending.append((minute, self._cum, self._count, scale, recent))

    def due(self, minute: float) -> bool:
        """Whether a pair of forecasts is to be recorded at `minute`."""
        return self._due is None or minute >= self._due

    def weights(self) -> tuple[float, float] | None:
        """(scale's weight, recent's weight), summing to 1; None before any forecast was scored."""
        if not self._errors:
            return None
        scale = max(self._err_scale, 1e-9)
        recent = max(self._err_recent, 1e-9)
        return recent / (scale + recent), scale / (scale + recent)
