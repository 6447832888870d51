"""The `--real` cluster: 8 nodes of 8 GPUs on two leaves of 4 hosts (4:1 oversubscribed, one spine).

Pools interleave as in the default demo (`recsys` high priority: the first two hosts of each leaf;
`llm`: the other two), so multi-node jobs share the leaf uplinks. Demand and scripted events are the
default demo's scaled to a quarter: 24-GPU all-reduce bursts, and the GPU fault on an `llm` node.
"""

from __future__ import annotations

from demo.controls import LoggedModel
from demo.scenario import ScriptedEvent, demo_model, scripted
from demo.settings import Timings

NODES = 8
HOSTS_PER_LEAF = 4
BURST_GPUS = 24  # three nodes, so the bursts span both leaves (16-GPU bursts caused no congestion)
FAULT_NODE = "node0008"


def real_model(timings: Timings, seed: int = 1) -> LoggedModel:
    """The small model with the default demo's day/night workload scaled to its size."""
    return demo_model(timings, seed, nodes=NODES, hosts_per_leaf=HOSTS_PER_LEAF)


def real_scripted(timings: Timings) -> list[ScriptedEvent]:
    """The congestion episode (24-GPU bursts) and the GPU fault on an `llm` node."""
    return scripted(timings, fault_node=FAULT_NODE, burst_gpus=BURST_GPUS)
