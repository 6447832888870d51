"""`ibpool dashboards generate|check` (also `python -m dashboards ...`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dashboards.build import JSON_DIR, stale, write


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ibpool dashboards", description="Generate or check the Grafana JSON.")
    p.add_argument("action", choices=("generate", "check"), help="write the JSON, or fail if it is stale")
    p.add_argument("--dir", type=Path, default=JSON_DIR, help=f"JSON directory (default {JSON_DIR})")
    return p


def main(argv: list[str]) -> int:
    """Exit 0 when generated or up to date; 1 when `check` finds stale files; 2 on usage errors."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.action == "generate":
        for name in write(args.dir):
            print(f"updated {args.dir / name}")
        return 0
    names = stale(args.dir)
    for name in names:
        print(f"stale: {args.dir / name} (run `python -m dashboards generate`)", file=sys.stderr)
    return 1 if names else 0
