"""Place panels on Grafana's 24-column grid under titled rows, with ids in reading order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import attr
from grafanalib.core import GridPos, RowPanel

WIDTH = 24


@dataclass(frozen=True)
class Row:
    """A titled row of panels; `widths` (columns each) default to equal shares of the grid."""

    title: str
    panels: Sequence[Any]
    height: int = 8
    widths: Sequence[int] = ()


def grid(rows: Sequence[Row]) -> list[Any]:
    """Row panels and their panels, positioned left to right, wrapping at 24 columns; ids 1, 2, 3..."""
    out: list[Any] = []
    y = 0
    for row in rows:
        out.append(RowPanel(title=row.title, gridPos=GridPos(h=1, w=WIDTH, x=0, y=y), id=len(out) + 1))
        y += 1
        widths = list(row.widths) or [max(WIDTH // len(row.panels), 1)] * len(row.panels)
        if len(widths) != len(row.panels):
            raise ValueError(f"row {row.title!r}: {len(widths)} widths for {len(row.panels)} panels")
        x = 0
        for panel, w in zip(row.panels, widths, strict=True):
            if x + w > WIDTH:
                x, y = 0, y + row.height
            out.append(attr.evolve(panel, gridPos=GridPos(h=row.height, w=w, x=x, y=y), id=len(out) + 1))
            x += w
        y += row.height
    return out
