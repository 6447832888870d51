"""Fabric sweep time on a 2-level fat tree in ibsim: 24 switches x 36 ports (864 switch ports), 288 HCAs.

16 leaves (18 HCAs, 2 cables to each of 8 spines), 8 spines; OpenSM assigns LIDs. Each sweep runs what
the exporter runs: ibnetdiscover (+ iblinkinfo on its cache), `perfquery -l` and `perfquery -x -l` per
switch, and the per-VL transmit waits of every switch port. Prints, per VL mode, the median sweep time
over --sweeps sweeps (after one warm-up), ports per second, where the time goes (summed command time
per program) and the cost of building and rendering the families. Target: under 1 s for `batch`.
The timed sweeps read no forwarding tables (they are read every 300 s); `--routes` adds `batch` sweeps
that read every switch's table (`ibroute`) each time: what a sweep costs when the tables are due.

    .venv/bin/python -m benchmarks.fabric_sweep [--sweeps 7] [--concurrency 4] [--modes batch,off,perfquery]
                                                [--hca-ports] [--routes]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from exporter.fabric.commands import DiagCommands, DiagOptions
from exporter.fabric.families import build_families
from exporter.fabric.model import SweepResult
from exporter.fabric.names import NameMap
from exporter.fabric.sweep import VL_MODES, Sweeper, SweepSettings, VlMode
from foundation.commands import CommandResult, CommandRunner, scratch_parent
from foundation.exposition import render
from simulator.backends.ibsim_fabric import FatTree, IbsimFabric, missing_programs

TREE = FatTree(leaves=16, spines=8, hcas_per_leaf=18, ports=36, links_per_pair=2)


class TimedRunner(CommandRunner):
    """A CommandRunner that sums the wall time of the commands it ran, per program."""

    def __init__(self, timeout_seconds: float, cwd: Path, env: dict[str, str]) -> None:
        super().__init__(timeout_seconds, cwd=cwd, env=env)
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)

    def run(self, argv: Sequence[str]) -> CommandResult:
        result = super().run(argv)
        name = "pma_helper" if any(a.endswith("pma_helper.py") for a in argv) else Path(argv[0]).name
        self.seconds[name] += result.seconds
        self.count[name] += 1
        return result


def _check(result: SweepResult) -> str:
    readings = result.readings.values()
    ports = sum(len(r.ports) for r in readings)
    complete = sum(1 for r in readings for p in r.ports if r.port_complete(p))
    up = sum(1 for r in readings if r.up)
    return f"{up}/{len(result.readings)} nodes up, {complete}/{ports} ports complete"


def run_mode(
    fabric: IbsimFabric, mode: VlMode, sweeps: int, concurrency: int, hca_ports: bool, *, routes: bool = False
) -> None:
    """Warm up, sweep `sweeps` times, print the figures for `mode` (with `routes`, reading every switch's
    forwarding table in every sweep)."""
    with tempfile.TemporaryDirectory(prefix="ibpool-fabric-bench-", dir=scratch_parent()) as scratch:
        runner = TimedRunner(60.0, Path(scratch), fabric.env)
        settings = SweepSettings(
            concurrency=concurrency,
            vl_counters=mode,
            hca_ports=hca_ports,
            routes_interval_seconds=1e-9 if routes else 300.0,
        )
        sweeper = Sweeper(DiagCommands(DiagOptions()), runner, settings, Path(scratch))
        try:
            result = sweeper.sweep()  # warm-up (page cache, first umad2sim trees)
            runner.seconds.clear()
            runner.count.clear()
            durations: list[float] = []
            for _ in range(sweeps):
                result = sweeper.sweep()
                durations.append(result.duration_seconds)
        finally:
            sweeper.close()
    started = time.perf_counter()
    text = render(build_families(result, NameMap(), hca_ports))
    build_render = time.perf_counter() - started
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    median = statistics.median(durations)
    label = f"{mode} +routes" if routes else mode
    ports = sum(len(r.ports) for r in result.readings.values())
    print(
        f"vl={label:<9} sweep median {median:.3f} s (min {min(durations):.3f}, max {max(durations):.3f}, "
        f"{sweeps} sweeps) -> {ports / median:,.0f} ports/s; {_check(result)}"
    )
    per_program = ", ".join(
        f"{name} {runner.count[name] // sweeps}x {runner.seconds[name] / sweeps:.3f} s"
        for name in sorted(runner.seconds, key=lambda n: -runner.seconds[n])
    )
    print(f"    command time per sweep (summed over {concurrency} workers): {per_program}")
    print(f"    build + render of the last sweep: {build_render * 1e3:.1f} ms for {samples:,} samples")


def main(argv: list[str] | None = None) -> int:
    """Start the fabric, run every requested mode, stop OpenSM then ibsim."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sweeps", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--modes", default="batch,off", help=f"comma-separated of {', '.join(VL_MODES)}")
    parser.add_argument("--hca-ports", action="store_true", help="also read the 288 HCA ports")
    parser.add_argument("--routes", action="store_true", help="also time sweeps that read every LFT")
    args = parser.parse_args(argv)
    modes = [m for m in VL_MODES if m in args.modes.split(",")]
    unknown = [m for m in args.modes.split(",") if m and m not in VL_MODES]
    missing = missing_programs()
    if unknown or missing:
        print(f"fabric_sweep: unknown modes {unknown} / not installed: {missing}")
        return 2
    with tempfile.TemporaryDirectory(prefix="ibpool-fabric-sim-") as workdir:
        started = time.perf_counter()
        with IbsimFabric(Path(workdir), TREE) as fabric:
            fabric.start_opensm(timeout=120)
            up = time.perf_counter() - started
            print(
                f"fabric: {len(TREE.switch_names)} switches x {TREE.ports} ports = {TREE.switch_ports} "
                f"switch ports, {len(TREE.hca_names)} HCAs; ibsim + OpenSM up in {up:.2f} s; "
                f"concurrency {args.concurrency}"
            )
            for mode in modes:
                sweeps = args.sweeps if mode != "perfquery" else 1
                run_mode(fabric, mode, sweeps, args.concurrency, args.hca_ports)
            if args.routes:
                run_mode(fabric, "batch", args.sweeps, args.concurrency, args.hca_ports, routes=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
