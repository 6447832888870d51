"""`ibpool simulate`: a simulated cluster seen only through the real exporters, on one HTTP port.

A `ClusterModel` runs in a background thread; its state leaves only through the real read side (a node
exporter per simulated node, the fabric and scheduler exporters' families) and changes come in the forms
the real systems take (opensm.conf lines, scontrol arguments, faults). Endpoints, flags, the Prometheus
scrape config and the limits: docs/simulator.md.
"""

from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.fabric_source import SimulatedFabric, sweep_result
from simulator.serve.runner import ClusterRunner
from simulator.serve.scheduler_source import SimulatedSlurm, cluster_state

__all__ = [
    "ClusterRunner",
    "ClusterServer",
    "ServerSettings",
    "SimulatedFabric",
    "SimulatedSlurm",
    "cluster_state",
    "sweep_result",
]
