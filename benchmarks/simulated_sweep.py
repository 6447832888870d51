"""The simulated cluster server's fabric sweep: what one sweep of the model costs, families and page included.

Times `SimulatedFabric.sweep` (the model's `FabricView` as the real exporter's `SweepResult`, forwarding
tables included), `build_families` and `render` on the `small` (32 nodes) and `large` (1,024 nodes) presets
after 14 simulated hours, as the cluster server runs them. Prints the median over --sweeps steady sweeps
(links unchanged: the tables come from the cache) and the first sweep after a link changes state (the
model's routing runs again), with the number of route series served.

    .venv/bin/python -m benchmarks.simulated_sweep [--sweeps 7] [--sizes 32,1024]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from exporter.fabric.families import build_families
from exporter.fabric.names import NameMap
from foundation.exposition import render
from simulator.cluster.model import ClusterModel
from simulator.cluster.spec import VL_COUNT
from simulator.serve.fabric_source import SimulatedFabric
from simulator.serve.presets import generated_workload, preset_spec


def timed(fabric: SimulatedFabric) -> tuple[float, float, float, int]:
    """(sweep, families, render) seconds of one sweep, and the route series on its page."""
    start = time.perf_counter()
    result = fabric.sweep()
    swept = time.perf_counter()
    families = build_families(result, NameMap(), vl_count=VL_COUNT)
    built = time.perf_counter()
    text = render(families)
    rendered = time.perf_counter()
    routes = text.count("\nibpool_fabric_port_route_info{")
    return swept - start, built - swept, rendered - built, routes


def line(label: str, figures: list[tuple[float, float, float, int]]) -> str:
    """One row: median milliseconds per part and in all."""
    sweep = statistics.median(f[0] for f in figures) * 1000
    build = statistics.median(f[1] for f in figures) * 1000
    page = statistics.median(f[2] for f in figures) * 1000
    total = statistics.median(sum(f[:3]) for f in figures) * 1000
    return (
        f"  {label:<28} sweep {sweep:8.1f} ms  families {build:7.1f} ms  render {page:7.1f} ms  "
        f"total {total:8.1f} ms  route series {figures[-1][3]}"
    )


def main(argv: list[str]) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sweeps", type=int, default=7, help="steady sweeps timed per size")
    parser.add_argument("--sizes", default="32,1024", help="cluster sizes (nodes of the preset)")
    args = parser.parse_args(argv)
    for nodes in (int(n) for n in args.sizes.split(",")):
        spec = preset_spec("small", nodes=nodes)
        model = ClusterModel(spec, generated_workload(spec))
        model.advance(14 * 3600)
        fabric = SimulatedFabric(model.fabric_view, topology=model.topology)
        topo = model.topology
        sizes = f"{len(topo.switch_guids)} switches, {len(topo.ports)} ports, {len(topo.links)} links"
        print(f"{nodes} nodes: {sizes}")
        first = [timed(fabric)]
        steady = [timed(fabric) for _ in range(args.sweeps)]
        print(line("first sweep", first))
        print(line("steady (links unchanged)", steady))
        changed = []
        for _ in range(args.sweeps):
            link = model.uplink(0, 0)
            model.set_link(link, not model.fabric.link_up[link])
            changed.append(timed(fabric))
        print(line("after a link changes state", changed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
