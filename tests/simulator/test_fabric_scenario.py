"""The fabric scenario meets its targets (figures, not timings)."""

from __future__ import annotations

from simulator.fabric_scenario import run


def test_recommended_weights_meet_the_targets() -> None:
    result = run()
    assert result.shared_default_seconds > 1.1 * result.alone_seconds  # the stall is real
    assert result.shared_recommended_seconds <= 1.10 * result.alone_seconds
    assert result.low_share_recommended >= result.min_share
    assert result.weights_recommended != result.weights_default
    assert "hi iteration alone" in result.table()
