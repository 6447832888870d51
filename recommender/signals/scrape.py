"""One in-process scrape of the exporters: parse their text exposition into what the signals need."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from recommender.signals.raw import LinkInfo, add_route

MAX_32 = float((1 << 32) - 1)
Key = tuple[str, ...]


@dataclass
class Scrape:
    """Counters (by key, with the time they were read), gauges and labels from one round of scrapes."""

    counters: dict[Key, tuple[float, float]] = field(default_factory=dict)  # key -> (value, time)
    saturated: set[Key] = field(default_factory=set)
    rates: dict[Key, float] = field(default_factory=dict)  # port key -> signalling rate, bytes/s
    pool_gauges: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    pool_nodes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    node_state: dict[str, str] = field(default_factory=dict)
    gpu_util: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    links: list[LinkInfo] = field(default_factory=list)
    switches: set[str] = field(default_factory=set)
    routes: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)  # (guid, port) -> hosts
    routes_unreadable: bool = False
    descs: dict[str, str] = field(default_factory=dict)  # node_guid -> node_desc
    poll_timestamp: float | None = None
    sweep_timestamp: float | None = None
    scheduler_up: bool = False
    node_errors: dict[str, str] = field(default_factory=dict)


def samples(text: str, only: tuple[str, ...] = ()) -> Iterable[tuple[str, dict[str, str], float]]:
    """(sample name, labels, value) of an exposition; with `only`, just the metrics whose names start with
    one of those prefixes (the other lines are dropped before parsing: a node serves ~1,600 samples)."""
    if only:
        text = "\n".join(line for line in text.splitlines() if _wanted(line, only)) + "\n"
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name, sample.labels, float(sample.value)


def _wanted(line: str, prefixes: tuple[str, ...]) -> bool:
    if line.startswith("#"):
        words = line.split(None, 3)
        return len(words) > 2 and words[2].startswith(prefixes)
    return line.startswith(prefixes)


_NODE_METRICS = ("ibpool_gpu_utilization_ratio", "ibpool_infiniband_")
_POOL_GAUGES = {
    "ibpool_pool_capacity_gpus": "capacity",
    "ibpool_pool_allocated_gpus": "allocated",
    "ibpool_pool_pending_gpus": "pending",
}


def add_scheduler(scrape: Scrape, text: str) -> None:
    """The scheduler exporter's pools, memberships, node states and poll time."""
    for name, labels, value in samples(text):
        if name in _POOL_GAUGES:
            scrape.pool_gauges[labels["pool"]][_POOL_GAUGES[name]] = value
        elif name == "ibpool_pool_node_info" and value == 1:
            scrape.pool_nodes[labels["pool"]].add(labels["node"])
        elif name == "ibpool_node_state_info" and value == 1:
            scrape.node_state[labels["node"]] = labels["state"]
        elif name == "ibpool_scheduler_poll_timestamp_seconds":
            scrape.poll_timestamp = value
        elif name == "ibpool_scheduler_up":
            scrape.scheduler_up = value == 1


def add_fabric(scrape: Scrape, text: str, now: float) -> None:
    """The fabric exporter's switch-port counters, saturation flags, link topology, routes and sweep time."""
    for name, labels, value in samples(text):
        if name == "ibpool_fabric_sweep_timestamp_seconds":
            scrape.sweep_timestamp = value
            continue
        if name == "ibpool_fabric_switch_up":
            scrape.switches.add(labels["node_guid"])
            continue
        if name == "ibpool_fabric_link_info":
            scrape.links.append(
                LinkInfo(
                    labels["node_guid"],
                    labels["port"],
                    labels["node_desc"],
                    labels["remote_guid"],
                    labels["remote_port"],
                    labels["remote_desc"],
                )
            )
            continue
        if name == "ibpool_fabric_port_route_info":
            found = add_route(
                scrape.routes, labels["node_guid"], labels["port"], labels.get("destinations", "")
            )
            scrape.routes_unreadable |= not found
            continue
        if "node_guid" not in labels or "port" not in labels:
            continue
        port: Key = ("fabric", labels["node_guid"], labels["port"])
        scrape.descs[labels["node_guid"]] = labels.get("node_desc", "")
        _port_sample(scrape, port, name.removeprefix("ibpool_fabric_port_"), labels, value=value, now=now)
    if scrape.sweep_timestamp is not None:  # the counters are as of the end of the sweep
        stamp = scrape.sweep_timestamp
        for key, (value, _) in list(scrape.counters.items()):
            if key[0] == "fabric":
                scrape.counters[key] = (value, stamp)


def add_node(scrape: Scrape, node: str, text: str, now: float) -> None:
    """One node exporter's GPU utilization and HCA port counters."""
    for name, labels, value in samples(text, _NODE_METRICS):
        if name == "ibpool_gpu_utilization_ratio":
            scrape.gpu_util[node].append(value)
        elif name.startswith("ibpool_infiniband_") and "device" in labels and "port" in labels:
            port: Key = ("hca", node, labels["device"], labels["port"])
            _port_sample(scrape, port, name.removeprefix("ibpool_infiniband_"), labels, value=value, now=now)


def _port_sample(
    scrape: Scrape, port: Key, short: str, labels: dict[str, str], *, value: float, now: float
) -> None:
    if short in {"port_transmit_wait_total", "transmit_wait_total"}:
        scrape.counters[(*port, "wait")] = (value, now)
        if value >= MAX_32:
            scrape.saturated.add((*port, "wait"))
    elif short in ("port_data_transmitted_bytes_total", "data_transmitted_bytes_total"):
        scrape.counters[(*port, "data")] = (value, now)
    elif short == "vl_transmit_wait_total":
        scrape.counters[(*port, "vl", labels["vl"])] = (value, now)
        if value >= MAX_32:
            scrape.saturated.add((*port, "vl", labels["vl"]))
    elif short == "rate_bytes_per_second":
        scrape.rates[port] = value
    elif short in ("counter_saturated", "port_counter_saturated") and value == 1:
        counter = labels.get("counter")
        if counter == "port_xmit_wait":
            scrape.saturated.add((*port, "wait"))
        elif counter == "port_xmit_data":
            scrape.saturated.add((*port, "data"))
