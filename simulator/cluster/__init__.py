"""A seeded, deterministic, in-memory model of a whole GPU cluster: jobs, scheduler, fat-tree fabric, faults.

`ClusterModel(spec, workload)` advances in fixed ticks; its views (`scheduler_view`, `fabric_view`,
`job_metrics`) are the read side and its controls (`set_vl_weights`, `set_partition_nodes`, `drain`, faults)
the write side. The modules, an example and every modelling assumption: docs/simulator.md.
"""

from simulator.cluster.errors import ClusterError, ControlError, FaultError, SpecError, TraceError
from simulator.cluster.materialize import ClusterNodeView, MaterializedNodes
from simulator.cluster.model import ClusterModel, GpuEvent, ModelEvent
from simulator.cluster.spec import (
    ClusterSpec,
    FabricSpec,
    PoolSpec,
    QosSpec,
    load_spec,
    simple_spec,
    spec_from_dict,
)
from simulator.cluster.trace import TraceWorkload, read_trace, spec_for_trace, trace_jobs
from simulator.cluster.views import (
    ChannelView,
    FabricView,
    HcaCounters,
    JobMetrics,
    NodeView,
    PoolView,
    PortView,
    SchedulerView,
)
from simulator.cluster.workload import GeneratedWorkload, JobRequest, PoolWorkload, day_night_workload

__all__ = [
    "ChannelView",
    "ClusterError",
    "ClusterModel",
    "ClusterNodeView",
    "ClusterSpec",
    "ControlError",
    "FabricSpec",
    "FabricView",
    "FaultError",
    "GeneratedWorkload",
    "GpuEvent",
    "HcaCounters",
    "JobMetrics",
    "JobRequest",
    "MaterializedNodes",
    "ModelEvent",
    "NodeView",
    "PoolSpec",
    "PoolView",
    "PoolWorkload",
    "PortView",
    "QosSpec",
    "SchedulerView",
    "SpecError",
    "TraceError",
    "TraceWorkload",
    "day_night_workload",
    "load_spec",
    "read_trace",
    "simple_spec",
    "spec_for_trace",
    "spec_from_dict",
    "trace_jobs",
]
