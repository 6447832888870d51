"""The QoS tables in force, read-only, from OpenSM's config file; and the end of every fetch (`snapshot`).

OpenSM file: the `qos_vlarb_high`, `qos_vlarb_low` and `qos_sl2vl` lines of opensm.conf; each pool's SL
comes from the recommender config (`qos.pool_sl`), as written in the QoS policy file's port groups.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from proposals import targets
from recommender.signals.assemble import assemble
from recommender.signals.model import QosSignals, Signals
from recommender.signals.raw import RawData

log = logging.getLogger(__name__)


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


def snapshot(
    raw: RawData,
    reader: QosReader | None,
    *,
    taken_at: float,
    window_seconds: float,
    source: str,
    max_age_seconds: float,
) -> Signals:
    """What a source ends every fetch with: the QoS tables read now, the snapshot assembled from `raw`,
    and a log line per missing signal."""
    qos, qos_error = read_qos(reader)
    signals = assemble(
        raw,
        taken_at=taken_at,
        window_seconds=window_seconds,
        source=source,
        max_age_seconds=max_age_seconds,
        qos=qos,
        qos_error=qos_error,
    )
    for item in signals.missing:
        log.info("signal missing: %s", item)
    return signals
