"""The node's wiring of the GPU collector: sampled in the background by default, one sampler per process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from exporter.collectors.gpu import GpuCollector
from exporter.config import ExporterConfig
from exporter.sources.gpu_sampler import GpuSampler, ReadOnScrape
from exporter.wiring import Hardware, build_node
from simulator.fake_nvml import FakeNvml


def _gpu(collectors: Sequence[object]) -> GpuCollector:
    return next(c for c in collectors if isinstance(c, GpuCollector))


def test_the_influx_push_shares_the_prometheus_collector_s_sampler(tmp_path: Path) -> None:
    fake = FakeNvml(gpu_count=2)
    node = build_node(ExporterConfig(infiniband=False, jobs=False), Hardware(fake, tmp_path))
    main = _gpu(node.collectors)
    assert isinstance(main.readings, GpuSampler)
    assert main.readings.settings.interval_seconds == 1.0 and main.readings.settings.deadline_seconds == 2.0
    assert node.fresh_collectors is not None
    pushed = _gpu(node.fresh_collectors()[0])
    assert pushed.readings is main.readings  # one read per GPU, two averaging windows
    pushed.close()  # the push's collector does not stop the sampler it shares
    assert main.health_problem() is None and main.health_problem in node.health_checks
    main.close()


def test_an_interval_of_0_reads_at_each_scrape_with_its_own_collectors(tmp_path: Path) -> None:
    fake = FakeNvml(gpu_count=2)
    cfg = ExporterConfig(infiniband=False, jobs=False, gpu_sample_interval_seconds=0.0)
    node = build_node(cfg, Hardware(fake, tmp_path))
    main = _gpu(node.collectors)
    assert isinstance(main.readings, ReadOnScrape)
    assert node.fresh_collectors is not None
    assert _gpu(node.fresh_collectors()[0]).readings is not main.readings
