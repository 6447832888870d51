"""A seeded, deterministic, in-memory model of a whole GPU cluster: jobs, scheduler, fat-tree fabric, faults.

```python
from simulator.cluster import ClusterModel, day_night_workload, simple_spec

spec = simple_spec({"recsys": 32, "llm": 32}, oversubscription=2.0)
model = ClusterModel(spec, day_night_workload("recsys", "llm", 256, 256, seed=spec.seed))
model.advance(3600)                        # one simulated hour, in ticks of spec.tick_seconds
model.scheduler_view().pools["llm"]        # capacity, allocated, pending ...
model.fabric_view().ports                  # every port's counters and its cable's far end
model.job_metrics("recsys")                # iteration time, slowdown, share of the bottleneck link
model.set_vl_weights("", "0:32,1:224")     # as OpenSM's qos_vlarb_high / qos_vlarb_low
model.drain("node0033"); model.set_partition_nodes("recsys", "node[0001-0033]"); model.resume("node0033")
view = ClusterNodeView(model, "node0001")  # a real SimulatedNode; view.sync() before scraping it
```

Modules: `spec` (the frozen spec, from a dict or YAML), `topology` (ports, links, routes), `workload`
(job requests, seeded day/night generator), `trace` (jobs derived from a per-pool minute trace), `jobs`,
`scheduler` (FIFO + EASY backfill, node states, partitions), `sharing` (weighted max-min, the quota
policy's own `foundation.maxmin`), `effects` (what max-min leaves out: packet-granular arbitration, credit
stalls, head-of-line blocking; off unless the spec turns them on), `fabric`
(link state, rates, port counters), `model` (time, controls, faults), `views` (read side),
`materialize` (sync one `SimulatedNode` on demand), `hostlist` (Slurm and OpenSM argument formats),
`scenarios` (small ready-made clusters, e.g. two pools sharing an oversubscribed uplink).

## Assumptions

Time and cost
- The model advances in fixed ticks (`tick_seconds`, default 10 s; a shorter last tick when asked). Arrivals,
  starts and ends happen at tick boundaries; a job whose work runs out inside a tick ends at its end.
- Work per step is proportional to running jobs and used channels; the fabric is reshared only when a
  distributed job starts or ends, a link changes state, or a QoS control changes. No per-GPU objects exist
  in the hot loop; a node's GPU and port load is computed only when asked (`node_load`).

Nodes, pools and the scheduler
- Nodes have `gpus_per_node` GPUs and `ports_per_node` single-port HCAs (`mlx5_<rail>`). A job of more GPUs
  than a node has takes whole nodes (rounded up); a smaller job takes GPUs on one node (best fit).
- Each pool has a FIFO queue; the first job that does not fit gets an EASY reservation computed from the
  running jobs' remaining work at their current speed (estimates are exact: a job's time limit equals its
  work); later jobs backfill if they fit now and end before the reservation or stay off its nodes.
- Partitions may overlap as in Slurm. A node taken out of a partition keeps its jobs until they end; a
  drained node runs its jobs to the end (state draining, then drained) and takes no new ones.
- Pool capacity counts member nodes that are not down; allocated GPUs are those in use on member nodes
  by any pool, as sinfo counts them; running/pending GPUs are those of the pool's own jobs.

Fabric
- 2-level fat tree, one rail per HCA port (rail-optimised): see `topology`. Deterministic routing by
  destination (D-mod-k); a route avoids a down leaf-spine link by taking the next uplink; a down host link
  stalls every job with a ring step over it (no traffic, no progress, GPUs idle in the all-reduce).
- A distributed job of n nodes runs iterations of `compute_seconds` compute plus one ring all-reduce of
  `allreduce_bytes`: every node sends `2 (n-1)/n * allreduce_bytes / rails` per iteration to the next node of
  the ring on each rail. Fluid model: on an idle fabric a ring step averages `bytes / (compute + bytes/link)`
  (its demand); on a shared fabric it gets rate r and an iteration takes `bytes / r` (never less than alone).
- Sharing is weighted max-min per link: VLs by arbitration weight, unused share redistributed, weight-0 VLs
  only get leftovers; flows inside a VL share equally; a job's ring steps run in lock-step. The effective
  weight of a VL is its `qos_vlarb_high` plus its `qos_vlarb_low` entry; the high/low priority ordering and
  VLHighLimit are not modelled (ibsim does not implement VLHighLimit either). Traffic goes on the VL of its
  pool's SL (`pool -> priority class -> SL`, then `qos_sl2vl`).
- Counters: data in 4-byte words and packets of `mtu_bytes`, 64-bit (PortCountersExtended); PortXmitWait
  (32-bit, saturating) grows by `wait_ratio * seconds * link_rate / wait_tick_bytes` where the wait ratio is
  the share of offered data a channel could not send; a flow offers its full demand up to its bottleneck
  (back-pressure) and its granted rate after it. Per-VL wait likewise per VL. Symbol errors, link_downed
  and saturation only change through faults.
- GPU load from jobs: utilization is the job's intensity while computing and 0.15 while waiting on the
  all-reduce, weighted by the compute share of an iteration; idle GPUs show 0.

Faults: `inject_xid` (event only), `lose_gpu` (the job fails, the node drains), `restore_gpu`, `set_link`
(down/up), `flap_link`, `add_symbol_errors`, `saturate`.

Not modelled: congestion control (FECN/BECN), adaptive routing, packet loss, multi-job placement
optimisation, preemption, job time limits shorter than their work, node reboots.
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
