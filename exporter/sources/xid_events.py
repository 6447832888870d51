"""XID watcher: counts NVML critical XID events per (GPU index, XID) on a daemon thread.

`start()` runs its own `nvmlInit` (NVML counts references), registers `nvmlEventTypeXidCriticalError` on
every GPU that supports it in one event set, and starts a thread that loops on
`nvmlEventSetWait_v2(set, timeout_ms)`; NVML_ERROR_TIMEOUT is the normal "nothing happened". GPUs that do
not support events, or cannot be reached at start, are skipped (and logged); a GPU lost at start is not
watched after it comes back (restart the exporter). Counts start at zero when the exporter starts, as the
catalog says.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from exporter.errors import SourceError
from exporter.sources.nvml_source import Nvml, NvmlErrorCounts, error_name, handle_key

log = logging.getLogger(__name__)

ERROR_BACKOFF_SECONDS = 1.0


class XidWatcher:
    """Counts XID events; `counts()` is safe to call from any thread."""

    def __init__(self, nvml: Nvml, errors: NvmlErrorCounts | None = None, timeout_ms: int = 500) -> None:
        self._nvml = nvml
        self.errors = errors if errors is not None else NvmlErrorCounts()
        self._timeout_ms = timeout_ms
        self._xid_mask = int(nvml.nvmlEventTypeXidCriticalError)
        self._error: type[Exception] = nvml.NVMLError
        self._timeout: type[Exception] = nvml.NVMLError_Timeout
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, int], int] = {}
        self._gpu_of: dict[int | None, int] = {}
        self._event_set: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._start_failure_logged = False

    @property
    def registered_gpus(self) -> tuple[int, ...]:
        """Indexes of the GPUs whose XID events are watched."""
        return tuple(sorted(self._gpu_of.values()))

    def start(self) -> None:
        """Register the GPUs and start the thread; raises SourceError when NVML is unavailable."""
        if self._thread is not None:
            return
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except self._error as exc:
            raise SourceError(f"NVML unavailable for XID events: {exc} ({type(exc).__name__})") from exc
        try:
            self._event_set = nvml.nvmlEventSetCreate()
            count = int(nvml.nvmlDeviceGetCount())
        except self._error as exc:
            self._event_set = None
            self._shutdown()
            raise SourceError(f"cannot create an NVML event set: {exc} ({type(exc).__name__})") from exc
        for index in range(count):
            self._register(index)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="nvml-xid-events", daemon=True)
        self._thread.start()
        log.info("watching XID events on GPUs %s", list(self.registered_gpus))

    def ensure_started(self) -> bool:
        """Start if never started; on failure log once and return False. True while the thread runs."""
        if self._thread is None:
            try:
                self.start()
            except SourceError as exc:
                if not self._start_failure_logged:
                    log.warning("XID watcher not started: %s", exc)
                    self._start_failure_logged = True
                return False
        return self.is_alive()

    def _register(self, index: int) -> None:
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            if not int(nvml.nvmlDeviceGetSupportedEventTypes(handle)) & self._xid_mask:
                log.info("GPU %d does not report XID events; skipped", index)
                return
            nvml.nvmlDeviceRegisterEvents(handle, self._xid_mask, self._event_set)
        except self._error as exc:
            code = int(getattr(exc, "value", -1))
            if code not in (nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_GPU_IS_LOST):
                self.errors.add("nvmlDeviceRegisterEvents", error_name(nvml, code))
            log.warning("XID events not watched on GPU %d: %s (%s)", index, exc, type(exc).__name__)
            return
        self._gpu_of[handle_key(handle)] = index

    def _run(self) -> None:
        wait = self._nvml.nvmlEventSetWait_v2
        while not self._stop.is_set():
            try:
                data = wait(self._event_set, self._timeout_ms)
            except self._timeout:
                continue
            except self._error as exc:
                code = int(getattr(exc, "value", -1))
                if self.errors.add("nvmlEventSetWait_v2", error_name(self._nvml, code)):
                    log.warning("nvmlEventSetWait_v2 failed: %s (%s)", exc, type(exc).__name__)
                self._stop.wait(ERROR_BACKOFF_SECONDS)
                continue
            self._record(data)

    def _record(self, data: Any) -> None:
        if not int(data.eventType) & self._xid_mask:
            return
        index = self._gpu_of.get(handle_key(data.device))
        xid = int(data.eventData)
        if index is None:
            log.warning("XID %d on an unknown device; not counted", xid)
            return
        with self._lock:
            key = (index, xid)
            self._counts[key] = self._counts.get(key, 0) + 1
        log.warning("XID %d on GPU %d", xid, index)

    def counts(self) -> dict[tuple[int, int], int]:
        """Events seen so far by (GPU index, XID)."""
        with self._lock:
            return dict(self._counts)

    def is_alive(self) -> bool:
        """True while the event thread runs (for /healthz)."""
        return self._thread is not None and self._thread.is_alive()

    def health_problem(self) -> str | None:
        """A reason for /healthz when the watcher was started but its thread has died, else None."""
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            return "XID event thread is not running"
        return None

    def stop(self, timeout: float | None = None) -> None:
        """End the thread (within about `timeout_ms`), then free the event set and nvmlShutdown."""
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout if timeout is not None else self._timeout_ms / 1000 + 2.0)
        if thread.is_alive():
            log.warning("XID event thread did not stop; leaving its event set allocated")
            return
        self._thread = None
        try:
            self._nvml.nvmlEventSetFree(self._event_set)
        except self._error as exc:
            log.warning("nvmlEventSetFree failed: %s", exc)
        self._event_set = None
        self._gpu_of.clear()
        self._shutdown()

    def _shutdown(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._error as exc:
            log.warning("nvmlShutdown failed: %s", exc)
