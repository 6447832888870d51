"""The run directory: everything a post-mortem needs, written as the demo goes (JSON, CSV, gzip JSON lines).

`run.json` (settings, cluster, start time), `timeline.jsonl`, `series/` (pools, links and QoS as CSV; the
exporters' series for the alert replay), `alerts.json`, `twin.json`, `proposals.json`, `effects.json`,
`summary.json` / `summary.txt` and the proposal store `ibpool.db`. What each file holds: docs/demo.md.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

POOL_FIELDS = (
    "time",
    "t",
    "pool",
    "capacity_gpus",
    "allocated_gpus",
    "pending_gpus",
    "running_jobs",
    "pending_jobs",
    "gpu_utilization",
    "multinode_jobs",
    "iteration_seconds_mean",
    "slowdown_mean",
    "slowdown_max",
)
LINK_FIELDS = ("time", "t", "link", "kind", "desc", "congestion", "utilization", "saturated", "pools")
QOS_FIELDS = ("time", "t", "vlarb_high", "vlarb_low", "sl2vl")


def rfc3339(unix: float) -> str:
    """UTC text with `Z`, to the second."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Event:
    """One timeline entry. `t`: simulated seconds since the start; `time`: that moment as RFC 3339 UTC.

    kinds: scenario (a scripted job), fault, proposal, approval, refusal, apply, status, note, real (the
    model following OpenSM and Slurm with --real). Alerts are not events of the run: alerts.json has them.
    """

    t: float
    time: str
    kind: str
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)


class RunDir:
    """Appends events and series rows as they happen; writes the JSON files at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        (path / "series").mkdir(parents=True, exist_ok=True)
        self.events: list[Event] = []
        self._timeline = (path / "timeline.jsonl").open("w", encoding="utf-8")
        self._files: list[TextIO] = [self._timeline]
        self.pools = self._csv("series/pools.csv", POOL_FIELDS)
        self.links = self._csv("series/links.csv", LINK_FIELDS)
        self.qos = self._csv("series/qos.csv", QOS_FIELDS)

    def _csv(self, name: str, fields: tuple[str, ...]) -> csv.DictWriter[str]:
        handle = (self.path / name).open("w", encoding="utf-8", newline="")
        self._files.append(handle)
        writer = csv.DictWriter(handle, fieldnames=list(fields))
        writer.writeheader()
        return writer

    def event(self, event: Event) -> None:
        """Append one event (flushed, so a killed run keeps its timeline)."""
        self.events.append(event)
        self._timeline.write(json.dumps(asdict(event), sort_keys=True) + "\n")
        self._timeline.flush()

    def write_json(self, name: str, data: object) -> None:
        """A JSON file in the run directory."""
        (self.path / name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    def close(self) -> None:
        """Flush everything and write timeline.json."""
        for handle in self._files:
            handle.close()
        self.write_json("timeline.json", [asdict(e) for e in self.events])


def load_timeline(path: Path) -> list[dict[str, Any]]:
    """The events of a run directory (for `ibpool postmortem` and tests)."""
    data = json.loads((path / "timeline.json").read_text(encoding="utf-8"))
    return list(data)
