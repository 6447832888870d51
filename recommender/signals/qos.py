"""The QoS tables in force, read-only: from OpenSM's config file or the simulated cluster's `/-/model`.

OpenSM file: the `qos_vlarb_high`, `qos_vlarb_low` and `qos_sl2vl` lines of opensm.conf; each pool's SL
comes from the recommender config (`qos.pool_sl`), as written in the QoS policy file's port groups.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from proposals import targets
from recommender.signals.fetch import http_get
from recommender.signals.model import QosSignals


class QosError(Exception):
    """The QoS tables could not be read."""


class QosReader(Protocol):
    """Returns the QoS tables now; raises QosError."""

    def read(self) -> QosSignals: ...


class OpenSmQosFile:
    """opensm.conf's QoS lines, with pool SLs from config."""

    def __init__(self, path: Path, pool_sl: Mapping[str, int]) -> None:
        self.path = path
        self.pool_sl = dict(pool_sl)

    def read(self) -> QosSignals:
        """Parse the file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise QosError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        values: dict[str, str] = {}
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) == 2 and words[0] in ("qos_vlarb_high", "qos_vlarb_low", "qos_sl2vl"):
                values[words[0]] = words[1]
        try:
            high = targets.format_vlarb(targets.parse_vlarb(values["qos_vlarb_high"]))
            low = targets.format_vlarb(targets.parse_vlarb(values["qos_vlarb_low"]))
            sl2vl = tuple(int(v) for v in values.get("qos_sl2vl", "").split(",") if v)
        except (KeyError, ValueError) as exc:
            raise QosError(f"{self.path}: no valid qos_vlarb_high/qos_vlarb_low: {exc}") from None
        # The file is the live state OpenSM re-reads on SIGHUP: its age is 0 (read now).
        return QosSignals(high, low, sl2vl, dict(self.pool_sl), 0.0)


class SimulatorQos:
    """The simulated cluster server's `/-/model` JSON (QoS tables and every pool's SL)."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout

    def read(self) -> QosSignals:
        """GET the model summary."""
        try:
            body = json.loads(http_get(self.url, self.timeout))
            qos = body["qos"]
            pool_sl = {name: int(p["service_level"]) for name, p in body["pools"].items()}
            sl2vl = tuple(int(v) for v in str(qos["sl2vl"]).split(",") if v)
            return QosSignals(str(qos["vlarb_high"]), str(qos["vlarb_low"]), sl2vl, pool_sl, 0.0)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise QosError(f"{self.url}: {exc}") from None
