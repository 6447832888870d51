"""What NVML calls cost on a real GPU, so that the fake NVML can take as long as the driver does.

`H200_COSTS` holds the figures measured on an NVIDIA H200 with driver 580 (docs/nvml-h200.md): seconds per
call by function name, and per field inside `nvmlDeviceGetFieldValues` (the energy field alone costs
3.4 ms). `FakeNvml(costs=...)` sleeps that long in each call while holding the GPU's own lock, because
reads of one GPU from several threads do not overlap on the real driver; whether reads of *different* GPUs
overlap was not measurable on a 1-GPU machine, so `scope="driver"` models one lock for the whole driver.
Calls cheaper than the sleep granularity are accumulated and paid in bulk, so the average is right.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pynvml

_MS = 1e-3
MIN_SLEEP_SECONDS = 0.2e-3  # below this a sleep costs more than it waits: such calls are paid in bulk


@dataclass(frozen=True)
class CallCosts:
    """Seconds per NVML call (by function name) and per field id of a batched field read."""

    calls: Mapping[str, float]
    fields: Mapping[int, float]
    default_call: float
    default_field: float
    scope: Literal["gpu", "driver"] = "gpu"

    def call(self, name: str) -> float:
        """The cost of one call of `name` (field reads: use `field_values`)."""
        return self.calls.get(name, self.default_call)

    def field_values(self, field_ids: Iterable[Any]) -> float:
        """The cost of one `nvmlDeviceGetFieldValues` with these ids (ints or (id, scope) pairs)."""
        total = 0.0
        for requested in field_ids:
            field_id = requested[0] if isinstance(requested, tuple) else requested
            total += self.fields.get(int(field_id), self.default_field)
        return total


# Measured on an NVIDIA H200, driver 580.159.04 (docs/nvml-h200.md; p50 per call).
H200_COSTS = CallCosts(
    calls={
        "nvmlDeviceGetSamples": 2.75 * _MS,
        "nvmlGpmSampleGet": 0.20 * _MS,
        "nvmlGpmMigSampleGet": 0.20 * _MS,  # not measured (MIG was off): taken as nvmlGpmSampleGet
        "nvmlDeviceGetCurrPcieLinkWidth": 0.10 * _MS,
        "nvmlDeviceGetTotalEnergyConsumption": 3.3 * _MS,
        "nvmlDeviceGetPowerUsage": 0.03 * _MS,
        "nvmlDeviceGetUtilizationRates": 0.02 * _MS,
        "nvmlDeviceGetMemoryInfo": 0.006 * _MS,
        "nvmlDeviceGetRemappedRows": 0.002 * _MS,
        "nvmlDeviceGetViolationStatus": 0.78 * _MS,  # 0.65-0.91 by policy
        "nvmlDeviceGetClockInfo": 0.001 * _MS,
        "nvmlDeviceGetPcieThroughput": 21.0 * _MS,  # the driver samples the link for ~20 ms
        "nvmlDeviceGetMigMode": 0.16 * _MS,
    },
    fields={
        pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: 3.4 * _MS,
        pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: 0.5 * _MS,
        pynvml.NVML_FI_DEV_REMAPPED_COR: 0.007 * _MS,
        pynvml.NVML_FI_DEV_REMAPPED_UNC: 0.007 * _MS,
        pynvml.NVML_FI_DEV_REMAPPED_PENDING: 0.007 * _MS,
        pynvml.NVML_FI_DEV_REMAPPED_FAILURE: 0.007 * _MS,
    },
    default_call=0.02 * _MS,  # "every other call 0.01-0.03 each"
    default_field=0.075 * _MS,  # "each other field 0.06-0.09"
)


@dataclass
class CostMeter:
    """Pays call costs: sleeps while holding the GPU's (or the driver's) lock; tallies what was paid."""

    costs: CallCosts
    _locks: dict[int, threading.Lock] = field(default_factory=dict)
    _debt: dict[int, float] = field(default_factory=dict)
    _driver: threading.Lock = field(default_factory=threading.Lock)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    paid_seconds: float = 0.0  # total cost charged, for benchmarks

    def pay(self, gpu: int, seconds: float) -> None:
        """Take `seconds` on GPU `gpu` (sleeping, other calls on the same lock wait)."""
        if seconds <= 0:
            return
        with self._guard:
            self.paid_seconds += seconds
            lock = (
                self._driver
                if self.costs.scope == "driver"
                else self._locks.setdefault(gpu, threading.Lock())
            )
            owed = self._debt.get(gpu, 0.0) + seconds
            if owed < MIN_SLEEP_SECONDS:
                self._debt[gpu] = owed
                return
            self._debt[gpu] = 0.0
        with lock:
            time.sleep(owed)
