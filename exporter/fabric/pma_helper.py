"""Read PortVLXmitWaitCounters of many ports in one process and print them as perfquery does.

    python3 -S -I pma_helper.py [--ca CA] [--port N] [--timeout-ms MS] LID:PORTS [LID:PORTS ...]

PORTS is `1,2,5` or `1-36`. The same PMA Get as `perfquery --vlxmitcounters` (which takes one process per
port), through libibmad over one umad port. A target whose port does not answer is abandoned and named on
stderr (exit status 1). Only reads, never sets or resets. Standard library only, so it starts fast with
`-S -I`; the umad2sim preload and IBSIM_SOCKNAME come from the environment. Why and what it prints:
docs/fabric-exporter.md.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence

IB_PERFORMANCE_CLASS = 0x04
PORT_VL_XMIT_WAIT_COUNTERS = 0x1C
VL_COUNT = 16
_BUFFER_BYTES = 1024
_LIBRARIES = ("libibmad.so.5", "libibmad.so")


class _DrPath(ctypes.Structure):
    _fields_ = (
        ("cnt", ctypes.c_int),
        ("p", ctypes.c_uint8 * 64),
        ("drslid", ctypes.c_uint16),
        ("drdlid", ctypes.c_uint16),
    )


class PortId(ctypes.Structure):
    """libibmad's ib_portid_t (LID-routed when `lid` is set)."""

    _fields_ = (
        ("lid", ctypes.c_int),
        ("drpath", _DrPath),
        ("grh_present", ctypes.c_int),
        ("gid", ctypes.c_uint8 * 16),
        ("qp", ctypes.c_uint32),
        ("qkey", ctypes.c_uint32),
        ("sl", ctypes.c_uint8),
        ("pkey_idx", ctypes.c_uint),
    )


def parse_target(text: str) -> tuple[int, list[int]]:
    """`4:1-3,7` -> (4, [1, 2, 3, 7]); ValueError when malformed."""
    lid_text, sep, ports_text = text.partition(":")
    if not sep or not lid_text.isdigit() or not ports_text:
        raise ValueError(f"expected LID:PORTS, got {text!r}")
    ports: list[int] = []
    for part in ports_text.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"bad port list in {text!r}")
        ports += range(int(low), int(high) + 1) if dash else [int(low)]
    if not ports or int(lid_text) == 0 or min(ports) < 0 or max(ports) > 255:
        raise ValueError(f"bad LID or port in {text!r}")
    return int(lid_text), ports


def decode_vl_wait(data: bytes) -> tuple[int, int, list[int]]:
    """PortSelect, CounterSelect and the 16 big-endian 16-bit PortVLXmitWait counters of the data."""
    waits = [int.from_bytes(data[4 + 2 * vl : 6 + 2 * vl], "big") for vl in range(VL_COUNT)]
    return data[1], int.from_bytes(data[2:4], "big"), waits


def format_block(lid: int, port: int, select: int, counter_select: int, waits: Sequence[int]) -> str:
    """The block exactly as `perfquery --vlxmitcounters` prints it."""
    lines = [
        f"# PortVLXmitWaitCounters counters: Lid {lid} port {port}",
        _field("PortSelect", str(select)),
        _field("CounterSelect", f"0x{counter_select:04x}"),
    ]
    lines += [_field(f"PortVLXmitWait{vl}", str(value)) for vl, value in enumerate(waits)]
    return "\n".join(lines) + "\n"


def _field(name: str, value: str) -> str:
    return f"{name}:".ljust(33, ".") + value


class Pma:
    """A libibmad port opened for the performance-management class."""

    def __init__(self, ca: str | None, port: int) -> None:
        self._lib = _load()
        classes = (ctypes.c_int * 1)(IB_PERFORMANCE_CLASS)
        handle = self._lib.mad_rpc_open_port(ca.encode() if ca else None, port, classes, 1)
        if not handle:
            raise OSError(f"cannot open umad port {ca or '(default)'}:{port}")
        self._handle = handle
        self._buffer = ctypes.create_string_buffer(_BUFFER_BYTES)

    def vl_wait(self, lid: int, port: int, timeout_ms: int) -> bytes | None:
        """The attribute's data for `port` at `lid`, or None when it does not answer."""
        ctypes.memset(self._buffer, 0, _BUFFER_BYTES)
        dest = PortId(lid=lid)
        got = self._lib.pma_query_via(
            self._buffer, ctypes.byref(dest), port, timeout_ms, PORT_VL_XMIT_WAIT_COUNTERS, self._handle
        )
        return bytes(self._buffer.raw[:64]) if got else None

    def close(self) -> None:
        """Close the umad port."""
        self._lib.mad_rpc_close_port(self._handle)


def _load() -> ctypes.CDLL:
    for name in _LIBRARIES:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.mad_rpc_open_port.restype = ctypes.c_void_p
        lib.mad_rpc_open_port.argtypes = (
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
        )
        lib.pma_query_via.restype = ctypes.c_void_p
        lib.pma_query_via.argtypes = (
            ctypes.c_void_p,
            ctypes.POINTER(PortId),
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
        )
        lib.mad_rpc_close_port.argtypes = (ctypes.c_void_p,)
        return lib
    raise OSError("libibmad is not installed (Debian: libibmad5)")


def _options(argv: list[str]) -> tuple[str | None, int, int, list[str]]:
    ca: str | None = None
    port, timeout_ms = 0, 0
    targets: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("--ca", "--port", "--timeout-ms"):
            value = next(args, None)
            if value is None:
                raise ValueError(f"{arg} needs a value")
            if arg == "--ca":
                ca = value
            elif not value.isdigit():
                raise ValueError(f"{arg} needs a number")
            elif arg == "--port":
                port = int(value)
            else:
                timeout_ms = int(value)
        else:
            targets.append(arg)
    if not targets:
        raise ValueError("no LID:PORTS target given")
    return ca, port, timeout_ms, targets


def main(argv: list[str]) -> int:
    """Query every target; 0 when all answered, 1 when one did not, 2 on bad usage, 3 without libibmad."""
    try:
        ca, port, timeout_ms, texts = _options(argv)
        targets = [parse_target(text) for text in texts]
    except ValueError as exc:
        print(f"pma_helper: {exc}", file=sys.stderr)
        return 2
    try:
        pma = Pma(ca, port)
    except OSError as exc:
        print(f"pma_helper: {exc}", file=sys.stderr)
        return 3
    status = 0
    try:
        for lid, ports in targets:
            for number in ports:
                data = pma.vl_wait(lid, number, timeout_ms)
                if data is None:
                    print(f"pma_helper: Lid {lid} port {number}: no answer", file=sys.stderr)
                    status = 1
                    break
                sys.stdout.write(format_block(lid, number, *decode_vl_wait(data)))
            sys.stdout.flush()
    finally:
        pma.close()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
