"""Nearest-rank quantiles: one definition for the policy, its live and backtest inputs and the metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence


def rank_of(q: float, count: int) -> int:
    """1-based nearest rank of quantile `q` among `count` sorted values (q = 0: the minimum)."""
    return min(count, max(1, math.ceil(q * count)))


def nearest_rank(values: Sequence[int], q: float) -> int:
    """The nearest-rank `q`-quantile of non-empty `values` (0: minimum, 1: maximum)."""
    if not values:
        raise ValueError("no values")
    return sorted(values)[rank_of(q, len(values)) - 1]
