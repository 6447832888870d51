"""The embedded source parses only the node metrics it reads."""

from __future__ import annotations

from recommender.signals.scrape import Scrape, add_node, samples

TEXT = """# HELP ibpool_gpu_utilization_ratio Utilization.
# TYPE ibpool_gpu_utilization_ratio gauge
ibpool_gpu_utilization_ratio{gpu="0",uuid="u"} 0.5
# HELP ibpool_gpu_nvlink_errors_total NVLink errors.
# TYPE ibpool_gpu_nvlink_errors_total counter
ibpool_gpu_nvlink_errors_total{gpu="0",link="1",type="crc",uuid="u"} 3
# HELP ibpool_infiniband_port_transmit_wait_total Wait.
# TYPE ibpool_infiniband_port_transmit_wait_total counter
ibpool_infiniband_port_transmit_wait_total{device="mlx5_0",port="1"} 42
"""


def test_only_the_wanted_prefixes_are_parsed() -> None:
    names = [name for name, _, _ in samples(TEXT, ("ibpool_gpu_utilization", "ibpool_infiniband_"))]
    assert names == ["ibpool_gpu_utilization_ratio", "ibpool_infiniband_port_transmit_wait_total"]
    assert len(list(samples(TEXT))) == 3


def test_a_node_scrape_keeps_utilization_and_port_counters() -> None:
    scrape = Scrape()
    add_node(scrape, "node1", TEXT, now=10.0)
    assert scrape.gpu_util["node1"] == [0.5]
    assert scrape.counters[("hca", "node1", "mlx5_0", "1", "wait")] == (42.0, 10.0)
