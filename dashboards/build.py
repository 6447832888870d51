"""Every dashboard, rendered to deterministic JSON (sorted keys, fixed ids), and the staleness check."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grafanalib._gen import DashboardEncoder

from dashboards import decisions, fabric, fleet, node, pool

JSON_DIR = Path(__file__).resolve().parent / "json"

BUILDERS: dict[str, Callable[[], Any]] = {
    fleet.UID: fleet.build,
    pool.UID: pool.build,
    node.UID: node.build,
    fabric.UID: fabric.build,
    decisions.UID: decisions.build,
}


def render(board: Any) -> str:
    """The dashboard's JSON text: two-space indent, sorted keys, one trailing newline."""
    return json.dumps(board.to_json_data(), sort_keys=True, indent=2, cls=DashboardEncoder) + "\n"


def rendered() -> dict[str, str]:
    """File name (`<uid>.json`) -> JSON text, for every dashboard."""
    out = {}
    for uid, build in BUILDERS.items():
        board = build()
        if board.uid != uid:
            raise ValueError(f"dashboard registered as {uid!r} has uid {board.uid!r}")
        out[f"{uid}.json"] = render(board)
    return out


def as_dicts() -> dict[str, dict[str, Any]]:
    """uid -> the dashboard exactly as Grafana receives it (parsed back from the JSON text)."""
    return {name.removesuffix(".json"): json.loads(text) for name, text in rendered().items()}


def write(directory: Path = JSON_DIR) -> list[str]:
    """Write every dashboard, remove JSON files no dashboard produces; the names changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = stale(directory)
    wanted = rendered()
    for name, text in wanted.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for path in directory.glob("*.json"):
        if path.name not in wanted:
            path.unlink()
    return changed


def stale(directory: Path = JSON_DIR) -> list[str]:
    """Names of files that regenerating would create, change or remove."""
    wanted = rendered()
    present = {p.name for p in directory.glob("*.json")} if directory.is_dir() else set()
    out = [name for name in sorted(present - wanted.keys())]
    for name, text in sorted(wanted.items()):
        path = directory / name
        if name not in present or path.read_text(encoding="utf-8") != text:
            out.append(name)
    return sorted(out)
