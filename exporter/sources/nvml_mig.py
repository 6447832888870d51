"""The MIG devices of one GPU in MIG mode: listed on the slow cadence, their memory and activity each read.

A GPU instance's activity is GPM's graphics-engine activity sampled for that instance
(`nvmlGpmMigSampleGet`), which dcgm-exporter reports as DCGM_FI_PROF_GR_ENGINE_ACTIVE per instance; MIG
devices of one GPU instance share it. In MIG mode the parent GPU has no utilization samples (NVML answers
NOT_SUPPORTED, nvidia-smi shows N/A), so this is the only utilization there is. Every NVML call goes through
the source's counted `call`, so errors are counted and GPU_IS_LOST propagates like everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exporter.sources.gpu_snapshot import MigInstance, Total
from exporter.sources.nvml_gpm import GpmPair, free_sample, open_pair

Nvml = Any
Call = Callable[..., Any]
"""The source's counted call: `call(name, fn, *args)` returns fn's result, or None when it failed."""

_ACTIVITY = (("utilization", "NVML_GPM_METRIC_GRAPHICS_UTIL"),)


@dataclass(frozen=True)
class _MigDevice:
    handle: Any
    gpu_instance: int
    compute_instance: int
    uuid: str
    profile: str


def profile_of(name: str) -> str:
    """The profile at the end of a MIG device's name ("NVIDIA H200 MIG 3g.71gb" -> "3g.71gb")."""
    _, sep, profile = name.rpartition(" MIG ")
    return profile if sep else ""


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")


class MigDevices:
    """One GPU's MIG devices and a GPM sample pair per GPU instance."""

    def __init__(
        self, nvml: Nvml, call: Call, on_metric_error: Callable[[str, int], None], gpm: bool
    ) -> None:
        self._nvml = nvml
        self._call = call
        self._on_metric_error = on_metric_error
        self._use_gpm = gpm and hasattr(nvml, "nvmlGpmMigSampleGet")
        self._not_found: type[Exception] = nvml.NVMLError_NotFound
        self.devices: list[_MigDevice] = []
        self._gpm: dict[int, GpmPair] = {}

    def refresh(self, handle: Any) -> None:
        """List the MIG devices now (instances can be created and destroyed while the GPU runs)."""
        nvml, call = self._nvml, self._call
        count = call("nvmlDeviceGetMaxMigDeviceCount", nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
        devices: list[_MigDevice] = []
        for index in range(int(count)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
            except self._not_found:  # an empty slot
                continue
            except nvml.NVMLError_GpuIsLost:
                raise
            except nvml.NVMLError as exc:
                call("nvmlDeviceGetMigDeviceHandleByIndex", _raise, exc)
                continue
            gpu_instance = call("nvmlDeviceGetGpuInstanceId", nvml.nvmlDeviceGetGpuInstanceId, mig)
            compute_instance = call(
                "nvmlDeviceGetComputeInstanceId", nvml.nvmlDeviceGetComputeInstanceId, mig
            )
            if gpu_instance is None or compute_instance is None:
                continue
            uuid = call("nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, mig)
            name = call("nvmlDeviceGetName", nvml.nvmlDeviceGetName, mig)
            devices.append(
                _MigDevice(
                    mig, int(gpu_instance), int(compute_instance), _text(uuid), profile_of(_text(name))
                )
            )
        self.devices = devices
        self._sync_gpm({d.gpu_instance for d in devices})

    def _sync_gpm(self, instances: set[int]) -> None:
        for gone in set(self._gpm) - instances:
            self._free(self._gpm.pop(gone))
        if not self._use_gpm:
            return
        nvml, call = self._nvml, self._call
        for new in instances - set(self._gpm):
            pair = open_pair(
                nvml,
                lambda: call("nvmlGpmSampleAlloc", nvml.nvmlGpmSampleAlloc),
                lambda sample: free_sample(nvml, sample),
                _ACTIVITY,
            )
            if pair is not None:
                self._gpm[new] = pair

    def read(self, handle: Any, now: float) -> tuple[MigInstance, ...]:
        """Each MIG device's memory and its GPU instance's activity since the previous read."""
        nvml, call = self._nvml, self._call
        activity: dict[int, tuple[float, Total]] = {}
        for gpu_instance, pair in self._gpm.items():

            def sample_get(sample: Any, gi: int = gpu_instance) -> Any:
                return call("nvmlGpmMigSampleGet", nvml.nvmlGpmMigSampleGet, handle, gi, sample)

            got = pair.take(
                sample_get,
                lambda request: call("nvmlGpmMetricsGet", nvml.nvmlGpmMetricsGet, request),
                now,
                self._on_metric_error,
            )
            if "utilization" in got:
                activity[gpu_instance] = got["utilization"]
        out: list[MigInstance] = []
        for device in self.devices:
            memory = call("nvmlDeviceGetMemoryInfo", nvml.nvmlDeviceGetMemoryInfo, device.handle)
            ratio, total = activity.get(device.gpu_instance, (None, None))
            out.append(
                MigInstance(
                    device.gpu_instance,
                    device.compute_instance,
                    device.uuid,
                    device.profile,
                    int(memory.used) if memory is not None else None,
                    int(memory.total) if memory is not None else None,
                    ratio,
                    total,
                )
            )
        return tuple(out)

    def close(self) -> None:
        """Free every GPM sample; forget the devices."""
        for pair in self._gpm.values():
            self._free(pair)
        self._gpm.clear()
        self.devices = []

    def _free(self, pair: GpmPair) -> None:
        free_sample(self._nvml, pair.previous)
        free_sample(self._nvml, pair.current)


def _raise(exc: Exception) -> None:
    """Re-raise `exc` inside the source's counted call, so it is counted under the caller's name."""
    raise exc
