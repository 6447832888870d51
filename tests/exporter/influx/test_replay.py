"""ReplayWindow: what was acknowledged recently, bounded by age and points."""

from __future__ import annotations

from exporter.influx.replay import ReplayWindow


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def test_keeps_batches_younger_than_the_window_oldest_first() -> None:
    clock = Clock()
    window = ReplayWindow(seconds=5.0, max_points=100, clock=clock)
    window.add(b"a", 1)
    clock.now += 4.0
    window.add(b"b", 2)
    clock.now += 2.0  # "a" is 6 s old now
    window.add(b"c", 3)
    assert window.take() == [(b"b", 2), (b"c", 3)]
    assert window.take() == []
    assert window.points == 0


def test_holds_at_most_max_points_dropping_the_oldest() -> None:
    window = ReplayWindow(seconds=60.0, max_points=5, clock=Clock())
    for name in (b"a", b"b", b"c"):
        window.add(name, 2)
    assert window.points == 4
    assert window.take() == [(b"b", 2), (b"c", 2)]
