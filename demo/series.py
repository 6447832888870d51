"""The exporters' series as Prometheus would have stored them, kept for the alert replay.

`TappedSource` is the recommender's embedded source that also hands every exposition it scrapes to a
`SeriesRecorder`, so the series are what the recommender saw, stamped with the simulated time of the
scrape (and, while a change is applied, what `record()` scrapes at the cycle times the recommender skips:
demo.schedule). The recorder keeps the samples of the metrics the rule files mention (a keep list, as a
scrape config's `metric_relabel_configs` would), adds the target labels Prometheus adds (`job`,
`instance`, and `node` from service discovery for node exporters; a scraped label of the same name
becomes `exported_<name>`, as without `honor_labels`) and an `up` sample per target and scrape, and writes
them as VictoriaMetrics JSON lines (`series/metrics.jsonl.gz`, the format of /api/v1/import and export).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from urllib.parse import urlsplit

from postmortem.replay.store import gzip_lines
from recommender.signals import scrape as sc
from recommender.signals.embedded import EmbeddedSource

INSTANCE = "cluster:9479"  # the simulated cluster's address as a scrape config would name it
JOBS = {"/fabric/metrics": "ibpool-fabric", "/scheduler/metrics": "ibpool-scheduler"}
NODE_JOB = "ibpool-exporter"
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

Key = tuple[tuple[str, str], ...]


def _unescape(value: str) -> str:
    return re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], value)


class SeriesRecorder:
    """Samples by series, filled from scraped texts (thread-safe)."""

    def __init__(self, keep: Collection[str]) -> None:
        self.keep = frozenset(keep)
        self.series: dict[Key, tuple[list[int], list[float]]] = {}
        self.targets: dict[str, dict[str, str]] = {}  # metrics path -> target labels
        self._lock = threading.Lock()

    def discovered(self, text: str) -> None:
        """The http_sd document: each node target's labels by its metrics path."""
        targets: dict[str, dict[str, str]] = {}
        for group in json.loads(text):
            labels = dict(group.get("labels", {}))
            path = labels.get("__metrics_path__", "/metrics")
            node = labels.get("node", "")
            # `node` only, as deploy/prometheus/prometheus.yml labels its targets: a `pool` target label
            # would start a new series on every node move (Prometheus ends the old one with a staleness
            # marker; an import has none, so both would overlap for the rules' lookback).
            targets[path] = {
                "job": NODE_JOB,
                "instance": f"{INSTANCE}/{node}" if node else INSTANCE,
                "node": node,
            }
        with self._lock:
            self.targets = targets

    def _target(self, url: str) -> dict[str, str] | None:
        path = urlsplit(url).path
        if path in JOBS:
            return {"job": JOBS[path], "instance": f"{INSTANCE}{path.removesuffix('/metrics')}"}
        return self.targets.get(path)

    def scraped(self, url: str, text: str | None, at: float) -> None:
        """One scrape's text (None: the scrape failed) at simulated Unix time `at`."""
        target = self._target(url)
        if target is None:
            return
        stamp = round(at * 1000)
        rows: list[tuple[Key, float]] = [(_key("up", target), 0.0 if text is None else 1.0)]
        for line in (text or "").splitlines():
            if not line or line[0] == "#":
                continue
            brace, space = line.find("{"), line.find(" ")
            cut = brace if 0 <= brace < space else space
            name = line[:cut]
            if name not in self.keep:
                continue
            labels: dict[str, str] = {}
            if cut == brace:
                close = line.rfind("}")
                labels = {k: _unescape(v) for k, v in _LABEL.findall(line[brace + 1 : close])}
                rest = line[close + 1 :].split()
            else:
                rest = line[cut:].split()
            try:
                value = float(rest[0])
            except (IndexError, ValueError):
                continue
            if not math.isfinite(value):  # NaN and Inf have no place in the JSON lines
                continue
            for clash in set(labels) & set(target):
                labels[f"exported_{clash}"] = labels.pop(clash)
            rows.append((_key(name, {**labels, **target}), value))
        with self._lock:
            for key, value in rows:
                times, values = self.series.setdefault(key, ([], []))
                times.append(stamp)
                values.append(value)

    def write(self, path: Path) -> int:
        """Write every series (sorted) as gzip JSON lines; the number of samples written."""
        with self._lock:
            items = sorted(self.series.items())
        data = [
            {"metric": dict(key), "timestamps": times, "values": values} for key, (times, values) in items
        ]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip_lines(data))
        return sum(len(times) for times, _ in self.series.values())


def _key(name: str, labels: dict[str, str]) -> Key:
    return (("__name__", name), *sorted(labels.items()))


class TappedSource(EmbeddedSource):
    """The embedded source, recording every exposition it reads (see the module docstring)."""

    recorder: SeriesRecorder | None = None
    on_scrape: Callable[[], None] | None = None  # called after every scrape taken

    def record(self) -> None:
        """Scrape every target for the recorder only (the recommender's previous scrape is kept)."""
        self._scrape_all()

    def _scrape_all(self) -> sc.Scrape:
        scrape = super()._scrape_all()
        if self.on_scrape is not None:
            self.on_scrape()
        return scrape

    def _get(self, url: str) -> str:
        at = self._clock()
        recorder = self.recorder
        try:
            text = super()._get(url)
        except OSError:
            if recorder is not None:
                recorder.scraped(url, None, at)
            raise
        if recorder is not None:
            if url == self.settings.targets_url:
                recorder.discovered(text)
            else:
                recorder.scraped(url, text, at)
        return text
