"""Figures for the recommender's own metrics: `ibpool_proposals{state}` and the oldest pending age."""

from __future__ import annotations

from datetime import datetime

from proposals.states import PENDING
from proposals.store import Store


def proposal_counts(store: Store) -> dict[str, int]:
    """Number of proposals per state, every state present (zeros included)."""
    return store.counts()


def oldest_pending_age_seconds(store: Store, now: datetime | None = None) -> float | None:
    """Seconds since the oldest pending proposal was submitted; None when nothing is pending."""
    pending = store.list_proposals(PENDING)
    if not pending:
        return None
    moment = now if now is not None else store.now()
    return max(0.0, (moment - min(p.submitted_at for p in pending)).total_seconds())
