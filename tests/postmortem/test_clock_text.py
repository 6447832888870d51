"""Times inside free text (the proposal store's messages) are shown the report's one way."""

from __future__ import annotations

from postmortem.model import clock, clock_text


def test_rfc3339_times_in_text_are_shown_on_the_report_clock() -> None:
    text = "proposal 4e9009f88dad expired at 2026-12-03T08:10:00Z; it cannot become approved"
    assert clock_text(text) == "proposal 4e9009f88dad expired at 2026-12-03 08:10; it cannot become approved"
    assert clock_text("at 2026-12-03T08:10:59.5Z and 2026-12-04T00:00:00Z") == (
        "at 2026-12-03 08:10 and 2026-12-04 00:00"
    )
    assert clock(1_764_749_400.0) == "2025-12-03 08:10"
    assert clock_text("no time here: 08:10, node0008") == "no time here: 08:10, node0008"
