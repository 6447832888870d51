"""RFC 3339 timestamps in UTC: the one textual form proposals and the store use."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_RFC3339 = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$",
)


def parse_rfc3339(text: str) -> datetime:
    """An aware UTC datetime from RFC 3339 text (any offset; fractions beyond microseconds are cut).

    Raises ValueError with a short reason.
    """
    if not _RFC3339.fullmatch(text):
        raise ValueError(f"must be an RFC 3339 timestamp like 2024-05-01T12:00:00Z, got {text!r}")
    head, sep, tail = text.partition(".")
    if sep:
        digits = re.match(r"[0-9]+", tail)
        assert digits is not None  # guaranteed by the pattern
        fraction = digits.group()
        text = f"{head}.{fraction[:6].ljust(6, '0')}{tail[len(fraction) :]}"
    text = text.replace("z", "Z").replace("t", "T")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError as exc:
        raise ValueError(f"not a valid date and time ({exc}): {text!r}") from None


def format_rfc3339(moment: datetime) -> str:
    """Canonical text: UTC with `Z`, seconds always, microseconds only when not zero."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)
    if utc.microsecond:
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_sortable(moment: datetime) -> str:
    """Fixed-width UTC text (microseconds always) whose string order is time order, for the database."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)
