"""Inline SVG line charts (no script, no external assets); every text is escaped."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape

from postmortem.model import Point

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
MARKER_COLORS = {"apply": "#2ca02c", "fault": "#d62728", "alert": "#ff7f0e", "proposal": "#9467bd"}


def _clock(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%H:%M")


def _num(value: float) -> str:
    return f"{value:.3g}"


def segments(points: Sequence[Point]) -> list[list[Point]]:
    """Split a series where a gap is over twice its usual spacing (no line drawn across missing samples)."""
    if len(points) < 2:
        return [list(points)] if points else []
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points))
    usual = gaps[len(gaps) // 2]
    out: list[list[Point]] = [[points[0]]]
    for previous, point in itertools.pairwise(points):
        if usual > 0 and point[0] - previous[0] > 2 * usual:
            out.append([])
        out[-1].append(point)
    return out


def line_chart(
    series: Mapping[str, Sequence[Point]],
    window: tuple[float, float],
    *,
    title: str,
    width: int = 760,
    height: int = 220,
    y_max: float | None = None,
    markers: Sequence[tuple[float, str, str]] = (),
) -> str:
    """One chart: a polyline per series over `window`, y from 0, vertical markers (at, kind, label)."""
    left, right, top, bottom = 52, 12, 24, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    start, end = window
    span = max(end - start, 1e-9)
    values = [v for points in series.values() for _, v in points]
    top_value = y_max if y_max is not None else max([*values, 0.0])
    top_value = top_value if top_value > 0 else 1.0

    def x(at: float) -> float:
        return left + (at - start) / span * plot_w

    def y(value: float) -> float:
        return top + plot_h - min(max(value, 0.0), top_value) / top_value * plot_h

    parts = [
        f'<svg class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999"/>',
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        value = top_value * fraction
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#ddd"/>'
            f'<text x="{left - 4}" y="{y(value) + 4:.1f}" font-size="10" text-anchor="end">'
            f"{_num(value)}</text>"
        )
    for index in range(5):
        at = start + span * index / 4
        anchor = "start" if index == 0 else "end" if index == 4 else "middle"
        parts.append(
            f'<text x="{x(at):.1f}" y="{height - 18}" font-size="10" text-anchor="{anchor}">'
            f"{_clock(at)}</text>"
        )
    for at, kind, label in markers:
        if start <= at <= end:
            color = MARKER_COLORS.get(kind, "#555")
            parts.append(
                f'<line x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{top}" y2="{top + plot_h}" stroke="{color}" '
                f'stroke-dasharray="4 3"><title>{escape(label)}</title></line>'
            )
    legend_x = left
    for index, (name, points) in enumerate(sorted(series.items())):
        color = PALETTE[index % len(PALETTE)]
        for segment in segments([(at, v) for at, v in points if start <= at <= end]):
            coords = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in segment)
            shape = "polyline" if len(segment) > 1 else "circle"
            geometry = (
                f'points="{coords}"'
                if len(segment) > 1
                else f'cx="{x(segment[0][0]):.1f}" cy="{y(segment[0][1]):.1f}" r="2"'
            )
            parts.append(
                f'<{shape} fill="{"none" if len(segment) > 1 else color}" stroke="{color}" '
                f'stroke-width="1.8" '
                f"{geometry}><title>{escape(name)}</title></{shape}>"
            )
        parts.append(
            f'<rect x="{legend_x}" y="{height - 11}" width="10" height="10" fill="{color}"/>'
            f'<text x="{legend_x + 14}" y="{height - 2}" font-size="10">{escape(name)}</text>'
        )
        legend_x += 24 + 7 * len(name)
    parts.append("</svg>")
    return "".join(parts)
