"""Optional verbs source: active and maximum MTU per (device, port) through pyverbs.

pyverbs is imported lazily when the source is built. Its absence, or a host with no RDMA device
(`get_device_list()` raises `PyverbsRDMAError`), is normal: the source is unavailable, says so once at
info level, and the collector leaves the MTU metrics out. MTUs change only when a port renegotiates, so
they are queried at most every `refresh_seconds` (one ioctl per port).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

# ibv_mtu enum (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5) -> bytes
MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}


@dataclass(frozen=True, slots=True)
class PortMtu:
    """MTUs of one port, in bytes (None when the enum value is unknown)."""

    active_bytes: int | None
    max_bytes: int | None


class VerbsContext(Protocol):
    """The part of `pyverbs.device.Context` the source uses."""

    def query_device(self) -> Any:
        """Device attributes; `.phys_port_cnt` is read."""
        ...

    def query_port(self, port_num: int) -> Any:
        """Port attributes; `.active_mtu` and `.max_mtu` (ibv_mtu enum values) are read."""
        ...

    def close(self) -> None:
        """Release the context."""
        ...


class VerbsBackend(Protocol):
    """Lists RDMA devices and opens them (pyverbs, or a fake in tests)."""

    def device_names(self) -> list[str]:
        """Names of the RDMA devices present."""
        ...

    def open(self, name: str) -> VerbsContext:
        """A context for the named device."""
        ...


class PyverbsBackend:
    """The real backend; raises ImportError when pyverbs is absent."""

    def __init__(self) -> None:
        import pyverbs.device  # noqa: PLC0415 (optional: absent on most hosts; see the docstring)

        self._device = pyverbs.device

    def device_names(self) -> list[str]:
        """Names from `get_device_list()` (raises PyverbsRDMAError when there is none)."""
        names: list[str] = []
        for dev in self._device.get_device_list():
            name = dev.name
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return names

    def open(self, name: str) -> VerbsContext:
        """`Context(name=...)`."""
        context: VerbsContext = self._device.Context(name=name)
        return context


class VerbsMtuSource:
    """Active and max MTU of every RDMA port, refreshed at most every `refresh_seconds`.

    `backend`: None builds a PyverbsBackend (lazily importing pyverbs); a factory that raises ImportError
    or any Exception from listing devices makes the source unavailable.
    """

    def __init__(
        self,
        backend: Callable[[], VerbsBackend] | None = None,
        refresh_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._refresh = refresh_seconds
        self._clock = clock
        self._contexts: dict[str, VerbsContext] = {}
        self._mtus: dict[tuple[str, int], PortMtu] = {}
        self._next = float("-inf")
        self._warned: set[str] = set()
        self._backend = self._probe(backend or PyverbsBackend)

    @property
    def available(self) -> bool:
        """Whether verbs answered at start (pyverbs importable and at least one RDMA device)."""
        return self._backend is not None

    def mtus(self) -> dict[tuple[str, int], PortMtu]:
        """MTUs by (device, port); empty when unavailable."""
        if self._backend is None:
            return {}
        now = self._clock()
        if now >= self._next:
            self._next = now + self._refresh
            self._mtus = self._query_all(self._backend)
        return self._mtus

    def close(self) -> None:
        """Close every context."""
        for name in list(self._contexts):
            self._forget(name)

    def _probe(self, factory: Callable[[], VerbsBackend]) -> VerbsBackend | None:
        try:
            backend = factory()
            names = backend.device_names()
        except ImportError as exc:
            log.info("pyverbs is not importable (%s): no MTU metrics", exc)
            return None
        except Exception as exc:  # pyverbs raises PyverbsRDMAError when there is no RDMA device
            log.info("no RDMA device through verbs (%s): no MTU metrics", exc)
            return None
        if not names:
            log.info("verbs lists no RDMA device: no MTU metrics")
            return None
        return backend

    def _query_all(self, backend: VerbsBackend) -> dict[tuple[str, int], PortMtu]:
        try:
            names = backend.device_names()
        except Exception as exc:  # the last device went away
            self._warn_once("list", f"cannot list RDMA devices: {exc}")
            names = []
        for gone in [n for n in self._contexts if n not in names]:
            self._forget(gone)
        result: dict[tuple[str, int], PortMtu] = {}
        for name in names:
            try:
                result.update(self._query_device(backend, name))
            except Exception as exc:  # a device that vanished or refuses: skip it this time
                self._warn_once(name, f"verbs query of {name} failed: {exc}")
                self._forget(name)
        return result

    def _query_device(self, backend: VerbsBackend, name: str) -> dict[tuple[str, int], PortMtu]:
        context = self._contexts.get(name)
        if context is None:
            context = self._contexts[name] = backend.open(name)
        ports = int(context.query_device().phys_port_cnt)
        result: dict[tuple[str, int], PortMtu] = {}
        for port in range(1, ports + 1):
            attr = context.query_port(port)
            active, largest = MTU_BYTES.get(int(attr.active_mtu)), MTU_BYTES.get(int(attr.max_mtu))
            result[(name, port)] = PortMtu(active, largest)
        return result

    def _forget(self, name: str) -> None:
        context = self._contexts.pop(name, None)
        if context is None:
            return
        try:
            context.close()
        except Exception as exc:  # closing a context of a vanished device may fail; nothing to do
            log.debug("closing verbs context %s: %s", name, exc)

    def _warn_once(self, key: str, message: str) -> None:
        if key in self._warned:
            log.debug("%s", message)
        else:
            self._warned.add(key)
            log.warning("%s", message)
