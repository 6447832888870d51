"""The QoS tables in force, read-only, from OpenSM's config file.

OpenSM file: the `qos_vlarb_high`, `qos_vlarb_low` and `qos_sl2vl` lines of opensm.conf; each pool's SL
comes from the recommender config (`qos.pool_sl`), as written in the QoS policy file's port groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from proposals import targets
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


def read_qos(reader: QosReader | None) -> tuple[QosSignals | None, str | None]:
    """(the tables, None), or (None, why not) when there is no reader or it failed."""
    if reader is None:
        return None, "no QoS source configured (qos.file)"
    try:
        return reader.read(), None
    except QosError as exc:
        return None, str(exc)
