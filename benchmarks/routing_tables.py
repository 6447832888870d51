"""The simulated cluster's routing: what the forwarding tables cost to make from the model's routes.

Times `routing.leaving` (per switch port, the destinations routed out of it) and the two views made from
it, `forwarding` (the quota backtest's) and `switch_tables` (the cluster server's), on the `small` preset's
fat tree (8 hosts per leaf, 2:1) at each size: with every link up, with one leaf uplink down, with
every uplink of one spine down, with one host cable down and with every host cable of one leaf down.
Prints the median over --repeat runs and the number of (port, destination) entries, which must not change
with the implementation.

    .venv/bin/python -m benchmarks.routing_tables [--repeat 5] [--sizes 32,1024]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

from simulator.cluster.routing import forwarding, leaving, switch_tables
from simulator.cluster.topology import Topology
from simulator.serve.presets import preset_spec


def median_ms(run: Callable[[], object], repeat: int) -> float:
    """The median wall time of `run`, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def link_states(topology: Topology) -> dict[str, list[bool]]:
    """The link states timed: all up, one leaf uplink down, every uplink of the first spine down, one host
    cable down, every host cable of the first leaf down (a leaf no traffic leaves)."""
    all_up = [True] * len(topology.links)
    one_down = list(all_up)
    spine_down = list(all_up)
    if topology.leaves > 1:
        one_down[topology.uplink[0][0]] = False
        for row in topology.uplink:
            for u in range(0, topology.uplinks, topology.spines):
                spine_down[row[u]] = False
    host_down = list(all_up)
    host_down[topology.host_link[0][0]] = False
    leaf_hosts_down = list(all_up)
    for node in range(min(topology.hosts_per_leaf, len(topology.host_link))):
        leaf_hosts_down[topology.host_link[node][0]] = False
    return {
        "all links up": all_up,
        "one uplink down": one_down,
        "a spine's uplinks down": spine_down,
        "one host link down": host_down,
        "a leaf's host links down": leaf_hosts_down,
    }


def main(argv: list[str]) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs timed per case")
    parser.add_argument("--sizes", default="32,1024", help="cluster sizes (nodes of the preset)")
    args = parser.parse_args(argv)
    for nodes in (int(n) for n in args.sizes.split(",")):
        topology = Topology(preset_spec("small", nodes=nodes))
        print(
            f"{nodes} nodes: {topology.leaves} leaves, {topology.spines} spines, "
            f"{topology.uplinks} uplinks per leaf, {len(topology.links)} links"
        )
        for label, up in link_states(topology).items():
            entries = sum(len(d) for d in leaving(topology, up).values())
            times = (
                median_ms(partial(leaving, topology, up), args.repeat),
                median_ms(partial(forwarding, topology, up), args.repeat),
                median_ms(partial(switch_tables, topology, up), args.repeat),
            )
            print(
                f"  {label:<26} leaving {times[0]:8.1f} ms  forwarding {times[1]:8.1f} ms  "
                f"switch_tables {times[2]:8.1f} ms  entries {entries}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
