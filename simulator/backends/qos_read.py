"""Read the QoS tables in force on the fabric and apply them to the model.

Two sources: `OpenSMConf` (the generic `qos_vlarb_high`, `qos_vlarb_low` and `qos_sl2vl` keys of the file
OpenSM re-reads on SIGHUP) and `Smpquery` (`smpquery vlarb LID PORT` and `smpquery sl2vl LID PORT`: what
OpenSM actually programmed on a port, weights printed as hex such as `0xC8`). The port's tables are
normalised for the model: a VL listed twice gets the sum of its weights (capped at 255), entries for VLs
8-15 must have weight 0 (the model has data VLs 0-7) and are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from foundation.vlarb import VlarbParseError
from foundation.vlarb import parse_vlarb as parse_smpquery_vlarb
from simulator.backends.errors import QosReadError
from simulator.cluster.errors import ControlError
from simulator.cluster.hostlist import parse_vlarb
from simulator.cluster.model import ClusterModel
from simulator.cluster.spec import VL_COUNT, QosSpec, check_sl2vl, check_vlarb

Pairs = tuple[tuple[int, int], ...]
Run = Callable[[Sequence[str]], str]
_CELLS = re.compile(r"\|\s*([0-9A-Fa-fx]+)\s*(?=\|)")


@dataclass(frozen=True)
class QosTables:
    """VL arbitration tables (VL, weight) and, when read, the SL-to-VL map."""

    vlarb_high: Pairs
    vlarb_low: Pairs
    sl2vl: tuple[int, ...] | None = None


@dataclass(frozen=True)
class QosChange:
    """What `apply_qos` changed in the model."""

    before: QosSpec
    after: QosSpec


class QosSource(Protocol):
    """Where QoS tables are read from."""

    def read(self) -> QosTables:
        """The tables now."""
        ...


def normalise(entries: Iterable[tuple[int, int]], what: str) -> Pairs:
    """One entry per data VL with a weight; raise QosReadError for weight on VLs the model lacks."""
    weights: dict[int, int] = {}
    for vl, weight in entries:
        if not 0 <= weight <= 255:
            raise QosReadError(f"{what}: weight {weight} of VL {vl} is not 0..255")
        if vl >= VL_COUNT or vl < 0:
            if weight:
                raise QosReadError(f"{what}: VL {vl} has weight {weight}; the model has VLs 0-{VL_COUNT - 1}")
            continue
        weights[vl] = min(255, weights.get(vl, 0) + weight)
    return tuple(sorted(weights.items()))


def parse_opensm_conf(text: str, source: str = "opensm.conf") -> QosTables:
    """The generic QoS keys of an opensm.conf; both VL arbitration keys must be there."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        key, _, value = raw.split("#", 1)[0].strip().partition(" ")
        if key in ("qos_vlarb_high", "qos_vlarb_low", "qos_sl2vl"):
            values[key] = value.strip()
    missing = [k for k in ("qos_vlarb_high", "qos_vlarb_low") if not values.get(k)]
    if missing:
        raise QosReadError(f"{source}: no {' or '.join(missing)}")
    try:
        high = normalise(parse_vlarb(values["qos_vlarb_high"]), f"{source}: qos_vlarb_high")
        low = normalise(parse_vlarb(values["qos_vlarb_low"]), f"{source}: qos_vlarb_low")
        sl2vl = values.get("qos_sl2vl")
        sl_map = tuple(int(v, 0) for v in sl2vl.split(",")) if sl2vl else None
    except (ControlError, ValueError) as exc:
        raise QosReadError(f"{source}: {exc}") from None
    return QosTables(high, low, sl_map)


def parse_vlarb_tables(text: str) -> tuple[Pairs, Pairs]:
    """(high, low) from `smpquery vlarb` output, through the one vlarb parser, normalised for the model."""
    try:
        tables = parse_smpquery_vlarb(text)
    except VlarbParseError as exc:
        raise QosReadError(f"smpquery vlarb: {exc}") from None
    if not tables.low and not tables.high:
        raise QosReadError(f"smpquery vlarb printed no table: {text[:200]!r}")
    return normalise(tables.high, "vlarb high"), normalise(tables.low, "vlarb low")


def parse_sl2vl_table(text: str) -> tuple[int, ...]:
    """The first SL-to-VL row of `smpquery sl2vl` output (`ports: in  0, out  5: | 0| 1| ...`)."""
    for line in text.splitlines():
        if line.startswith("ports:"):
            return tuple(int(cell) for cell in _CELLS.findall(line.rpartition(":")[2] + "|"))
    raise QosReadError(f"smpquery sl2vl printed no table: {text[:200]!r}")


class OpenSMConf:
    """The tables OpenSM is configured with (the file it re-reads on SIGHUP)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> QosTables:
        """Parse the file now."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise QosReadError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        return parse_opensm_conf(text, str(self.path))


class Smpquery:
    """The tables programmed on one port, read with smpquery (`run` runs argv and returns stdout)."""

    def __init__(self, run: Run, lid: int, port: int, sl2vl: bool = True) -> None:
        self._run = run
        self.lid = lid
        self.port = port
        self.sl2vl = sl2vl

    def read(self) -> QosTables:
        """Query the port now."""
        high, low = parse_vlarb_tables(self._run(["smpquery", "vlarb", str(self.lid), str(self.port)]))
        sl_map = None
        if self.sl2vl:
            sl_map = parse_sl2vl_table(self._run(["smpquery", "sl2vl", str(self.lid), str(self.port)]))
        return QosTables(high, low, sl_map)


def _weights(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    return {vl: w for vl, w in pairs if w}


def apply_qos(model: ClusterModel, tables: QosTables) -> QosChange | None:
    """Set the model's tables to `tables` where they differ; None when nothing changed."""
    before = model.qos()
    weights_differ = _weights(before.vlarb_high) != _weights(tables.vlarb_high) or _weights(
        before.vlarb_low
    ) != _weights(tables.vlarb_low)
    sl2vl_differs = tables.sl2vl is not None and tuple(before.sl2vl) != tables.sl2vl
    if not (weights_differ or sl2vl_differs):
        return None
    problems = check_vlarb(tables.vlarb_high, "vlarb_high") + check_vlarb(tables.vlarb_low, "vlarb_low")
    if tables.sl2vl is not None:
        problems += check_sl2vl(tables.sl2vl, "sl2vl")
    if problems:
        raise QosReadError("the model refuses the fabric's tables: " + "; ".join(problems))
    if weights_differ:
        model.set_vl_weights(tables.vlarb_high, tables.vlarb_low)
    if sl2vl_differs and tables.sl2vl is not None:
        model.set_sl2vl(tables.sl2vl)
    return QosChange(before, model.qos())
