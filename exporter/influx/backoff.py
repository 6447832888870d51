"""Exponential backoff between write attempts, with jitter and a cap."""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    """Delay before retry n (0-based): `initial * base**n`, capped at `max_delay`, minus up to `jitter` of it.

    A server's Retry-After raises the delay (up to the cap); `reset()` after a success starts over.
    """

    def __init__(
        self,
        initial: float,
        base: float = 2.0,
        max_delay: float = 60.0,
        jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or base < 1 or max_delay < initial or not 0 <= jitter < 1:
            raise ValueError("need initial > 0, base >= 1, max_delay >= initial and 0 <= jitter < 1")
        self.initial, self.base, self.max_delay, self.jitter = initial, base, max_delay, jitter
        self._rng = rng
        self.attempt = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        """Seconds to wait before the next attempt; counts the attempt."""
        exponent = min(self.attempt, 64)  # keeps base**n finite
        delay = min(self.max_delay, self.initial * self.base**exponent)
        delay *= 1.0 - self.jitter * self._rng()
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay))
        self.attempt += 1
        return delay

    def reset(self) -> None:
        """Start again from `initial` (after a success)."""
        self.attempt = 0
