"""Checks on the fabric and the poll that runs them until they all hold or the time is up.

Each check names one probe (`smpquery vlarb|sl2vl|pkeys LID PORT`, or `saquery -p` between two LIDs) and
how to turn its answer into the canonical value to compare. A round runs every distinct probe of the
checks still failing once (several at a time), then sleeps `interval`; checks that hold are not asked
again.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler_hooks.opensm import parse
from scheduler_hooks.opensm.fabric import FabricReader, PortRef, membership
from scheduler_hooks.opensm.model import Mismatch, VerifyResult
from scheduler_hooks.opensm.targets import Kind, Target, format_sl2vl, format_vlarb

log = logging.getLogger(__name__)

Probe = tuple[str, PortRef, PortRef | None]


@dataclass(frozen=True)
class Check:
    """One expected value at one place."""

    target: str
    where: str
    expected: str
    probe: Probe
    extract: Callable[[object], str]


def _run_probe(reader: FabricReader, probe: Probe) -> object:
    op, ref, other = probe
    if op == "vlarb":
        return reader.vlarb(ref)
    if op == "sl2vl":
        return reader.sl2vl(ref)
    if op == "pkeys":
        return reader.pkeys(ref)
    assert other is not None
    return reader.path_sl(ref, other)


def _vlarb_table(high: bool) -> Callable[[object], str]:
    def extract(answer: object) -> str:
        assert isinstance(answer, parse.VlarbTables)
        return format_vlarb(answer.high if high else answer.low)

    return extract


def sl2vl_value(rows: Sequence[tuple[int, int, tuple[int, ...]]]) -> str:
    """The one SL-to-VL map all rows of a port show, or `rows differ: ...`."""
    tables = sorted({format_sl2vl(vls) for _, _, vls in rows})
    return tables[0] if len(tables) == 1 else "rows differ: " + " | ".join(tables)


def _sl2vl_table(answer: object) -> str:
    assert isinstance(answer, list)
    return sl2vl_value(answer)


def _path_sl(answer: object) -> str:
    return "no path" if answer is None else str(answer)


def _pkey_membership(pkey: int) -> Callable[[object], str]:
    def extract(answer: object) -> str:
        assert isinstance(answer, list)
        return membership(answer, pkey)

    return extract


def table_checks(target: Target, expected: str, ports: Sequence[PortRef]) -> list[Check]:
    """The VL arbitration table or SL-to-VL map on every port in `ports`."""
    if target.kind is Kind.SL2VL:
        return [Check(target.name, str(p), expected, ("sl2vl", p, None), _sl2vl_table) for p in ports]
    extract = _vlarb_table(target.kind is Kind.VLARB_HIGH)
    return [Check(target.name, str(p), expected, ("vlarb", p, None), extract) for p in ports]


def path_pairs(ports: Sequence[PortRef], limit: int) -> list[tuple[PortRef, PortRef]]:
    """Up to `limit` ordered pairs of distinct ports, the first ports paired first."""
    return list(itertools.islice(itertools.permutations(ports, 2), limit))


def path_checks(target: Target, sl: str, pairs: Sequence[tuple[PortRef, PortRef]]) -> list[Check]:
    """`saquery -p` from each pair's first port to its second gives SL `sl`."""
    return [Check(target.name, f"{a} -> {b}", sl, ("path", a, b), _path_sl) for a, b in pairs]


def pkey_checks(target: Target, pkey: int, expected: dict[PortRef, str]) -> list[Check]:
    """Each port holds partition `pkey` as full, limited, or not at all (`none`)."""
    extract = _pkey_membership(pkey)
    return [
        Check(target.name, f"{port} pkey 0x{pkey:04x}", want, ("pkeys", port, None), extract)
        for port, want in sorted(expected.items())
    ]


def poll(
    reader: FabricReader,
    checks: Sequence[Check],
    timeout: float,
    interval: float,
    log_errors: Callable[[], str | None] | None = None,
) -> VerifyResult:
    """Run the checks until all hold or `timeout` seconds pass; the mismatches left, if any.

    `log_errors` (OpenSM's log since the signal) ends the poll at once when it reports an error.
    """
    start = time.monotonic()
    pending = list(checks)
    rounds = 0
    mismatches: list[Mismatch] = []
    while True:
        rounds += 1
        error = log_errors() if log_errors is not None else None
        if error is not None:
            mismatches = [Mismatch("opensm", "OpenSM log", "no configuration error", error)]
            result = VerifyResult(False, tuple(mismatches), len(checks), rounds, time.monotonic() - start)
            log.warning("verification: %s", result.describe())
            return result
        probes = list(dict.fromkeys(c.probe for c in pending))
        answers = dict(zip(probes, reader.each(probes, lambda p: _run_probe(reader, p)), strict=True))
        mismatches = []
        still: list[Check] = []
        for check in pending:
            answer = answers[check.probe]
            actual = f"error: {answer}" if isinstance(answer, Exception) else check.extract(answer)
            if actual != check.expected:
                still.append(check)
                mismatches.append(Mismatch(check.target, check.where, check.expected, actual))
        pending = still
        elapsed = time.monotonic() - start
        if not pending or elapsed + interval > timeout:
            break
        time.sleep(interval)
    result = VerifyResult(not pending, tuple(mismatches), len(checks), rounds, time.monotonic() - start)
    log.info("verification: %s", result.describe())
    return result
