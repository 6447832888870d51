"""GPM (GPU performance monitoring, Hopper+) sample pairs: ratios between this read's sample and the last.

A `GpmPair` holds two sample buffers and a reusable metrics request. `take(sample_get)` records a sample
(through the caller's function, so errors are counted where the caller counts them) and returns the
metrics between it and the previous one, plus a running total (ratio x seconds, seconds) per metric so
that a consumer can average over any window. Ratios are absent on the first sample.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

Nvml = Any


class GpmPair:
    """Two GPM sample buffers and the running totals of their metrics; see the module docstring."""

    def __init__(self, nvml: Nvml, previous: Any, current: Any, metrics: Sequence[tuple[str, str]]) -> None:
        self.previous = previous
        self.current = current
        self.keys = [key for key, _ in metrics]
        self.have_previous = False
        self.sampled_at = 0.0
        self.totals: dict[str, list[float]] = {key: [0.0, 0.0] for key in self.keys}
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(metrics)
        for i, (_, metric) in enumerate(metrics):
            request.metrics[i].metricId = getattr(nvml, metric)
        self.request = request

    def take(
        self,
        sample_get: Callable[[Any], Any],
        metrics_get: Callable[[Any], Any],
        now: float,
        on_metric_error: Callable[[str, int], None],
    ) -> dict[str, tuple[float, tuple[float, float]]]:
        """Sample now; {key: (ratio 0-1, running total)} for the metrics NVML answered (empty first)."""
        if sample_get(self.current) is None:
            self.have_previous = False
            return {}
        out: dict[str, tuple[float, tuple[float, float]]] = {}
        if self.have_previous:
            request = self.request
            request.sample1 = self.previous
            request.sample2 = self.current
            elapsed = max(0.0, now - self.sampled_at)
            if metrics_get(request) is not None:
                for n, key in enumerate(self.keys):
                    metric = request.metrics[n]
                    if metric.nvmlReturn != 0:
                        on_metric_error(key, int(metric.nvmlReturn))
                        continue
                    ratio = metric.value / 100.0
                    total = self.totals[key]
                    total[0] += ratio * elapsed
                    total[1] += elapsed
                    out[key] = (ratio, (total[0], total[1]))
        self.previous, self.current = self.current, self.previous
        self.have_previous = True
        self.sampled_at = now
        return out


def open_pair(
    nvml: Nvml, alloc: Callable[[], Any], free: Callable[[Any], None], metrics: Sequence[tuple[str, str]]
) -> GpmPair | None:
    """A pair of freshly allocated samples (None, with nothing leaked, when an allocation fails)."""
    previous = alloc()
    current = alloc()
    if previous is None or current is None:
        for sample in (previous, current):
            if sample is not None:
                free(sample)
        return None
    return GpmPair(nvml, previous, current, metrics)


def free_sample(nvml: Nvml, sample: Any) -> None:
    """Free one sample; a failure is only logged (nothing else can be done with it)."""
    try:
        nvml.nvmlGpmSampleFree(sample)
    except nvml.NVMLError as exc:
        log.debug("nvmlGpmSampleFree failed: %s", exc)
