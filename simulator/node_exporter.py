"""`ibpool exporter --simulate`: the real node exporter over a simulated node (8 GPUs, 8 NDR ports).

The exporter's own config plus a `simulate` section; the simulated NVML object, sysfs tree, ticker and
fault route are handed to the exporter as its hardware (`exporter.wiring.Hardware`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace

from exporter import config as exporter_config
from exporter.config import ExporterConfig
from exporter.main import serve
from exporter.wiring import Hardware
from foundation.http_server import Request, Response
from foundation.service import run_service
from foundation.settings import Bad, CommandSettings, Option
from simulator.node import FaultError, SimulatedNode, SimulationTicker, StandaloneWorkload
from simulator.nvml_costs import H200_COSTS, CallCosts

# What each simulated NVML call costs in real time (--simulate.nvml-costs).
# "h200-serial" models a driver that never overlaps reads of different GPUs (not measurable on one GPU).
NVML_COSTS: dict[str, CallCosts | None] = {
    "none": None,
    "h200": H200_COSTS,
    "h200-serial": replace(H200_COSTS, scope="driver"),
}


@dataclass(frozen=True)
class Simulation:
    """The simulated node's size, seed and time step."""

    enabled: bool = False
    gpus: int = 8
    ports: int = 8
    seed: int = 1
    step_seconds: float = 1.0
    nvml_costs: str = "none"


@dataclass(frozen=True)
class SimulatedExporterConfig(ExporterConfig):
    """The exporter's config and the simulation's."""

    simulate: Simulation = field(default_factory=Simulation)


OPTIONS: tuple[Option, ...] = (
    Option("--simulate", "simulate.enabled", "simulate.enabled", bool,
           "serve a simulated node (8 GPUs, 8 NDR ports) instead of the hardware"),
    Option("--simulate.gpus", "simulate.gpus", "simulate.gpus", int, "GPUs of the simulated node (8)"),
    Option("--simulate.ports", "simulate.ports", "simulate.ports", int, "IB ports of the simulated node (8)"),
    Option("--simulate.seed", "simulate.seed", "simulate.seed", int, "seed of its workload (1)"),
    Option("--simulate.step-seconds", "simulate.step_seconds", "simulate.step_seconds", float,
           "seconds between simulation steps (1)"),
    Option("--simulate.nvml-costs", "simulate.nvml_costs", "simulate.nvml_costs", str,
           "none, h200 (each NVML call takes as long as on an H200, docs/nvml-h200.md) or h200-serial (and "
           "no two GPUs are read at once)"),
)  # fmt: skip


def validate(cfg: SimulatedExporterConfig, bad: Bad) -> None:
    """The exporter's checks and the simulation's."""
    exporter_config.validate(cfg, bad)
    if not 1 <= cfg.simulate.gpus <= 64:
        bad("simulate.gpus", "must be between 1 and 64")
    if not 1 <= cfg.simulate.ports <= 64:
        bad("simulate.ports", "must be between 1 and 64")
    if cfg.simulate.step_seconds <= 0:
        bad("simulate.step_seconds", "must be > 0")
    if cfg.simulate.nvml_costs not in NVML_COSTS:
        bad("simulate.nvml_costs", f"must be one of {', '.join(NVML_COSTS)}")


SETTINGS = CommandSettings(
    prog="ibpool exporter",
    description="Node exporter over a simulated node (8 GPUs behind an NVML fake, 8 ports in a sysfs tree).",
    config_type=SimulatedExporterConfig,
    options=(*exporter_config.OPTIONS, *OPTIONS),
    validate=validate,
    default_listen=exporter_config.DEFAULT_LISTEN,
)


def simulated_hardware(sim: Simulation) -> Hardware:
    """A simulated node, ticking, with its fault route: the hardware the exporter reads."""
    node = SimulatedNode(gpus=sim.gpus, ports=sim.ports, seed=sim.seed, nvml_costs=NVML_COSTS[sim.nvml_costs])
    workload = StandaloneWorkload(sim.gpus, sim.ports, sim.seed)
    ticker = SimulationTicker(node, workload, sim.step_seconds)
    ticker.start()

    def fault(request: Request) -> Response:
        def arg(name: str) -> int | None:
            values = request.query.get(name)
            return int(values[0]) if values and values[0].lstrip("-").isdigit() else None

        kind = (request.query.get("kind") or [""])[0]
        try:
            done = node.fault(kind, gpu=arg("gpu"), port=arg("port"), value=arg("value") or 1)
        except FaultError as exc:
            return Response(400, f"{exc}\n".encode())
        return Response(200, json.dumps({"done": done}).encode() + b"\n", "application/json")

    return Hardware(
        node.nvml,
        node.sysfs_root,
        verbs=False,
        routes=[("POST", "/-/simulate/fault", fault)],
        closers=[node.close, ticker.stop],
    )


def _serve(cfg: SimulatedExporterConfig, stop: threading.Event) -> int:
    return serve(cfg, stop, lambda _: simulated_hardware(cfg.simulate))


def main(argv: list[str]) -> int:
    """`ibpool exporter --simulate ...`; exit 2 on an invalid configuration."""
    return run_service("ibpool exporter", argv, SETTINGS.load, _serve)
