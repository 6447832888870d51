"""`ibpool simulate`: a simulated cluster seen only through the real exporters, on one HTTP port.

A `ClusterModel` (simulator.cluster) runs in a background thread at `--speed` simulated seconds per wall
second. Its state leaves only through the real read side: one node exporter per simulated node (the node
exporter's GPU, InfiniBand and jobs collectors over a materialized `SimulatedNode`), the fabric exporter
(`build_families` over the `SweepResult` that `fabric_source` builds from the fabric view) and the
scheduler exporter (its poller, pool rules and collectors over the `ClusterState` that
`scheduler_source` builds from the scheduler view). Changes come in the forms the real systems take.

```
ibpool simulate [--preset small|large] [--nodes N] | [--spec FILE]  [--trace FILE [--trace-minutes N]]
                [--seed N] [--start-hour H] [--speed 60] [--warmup SECONDS] [--max-materialized 64]
                [--sweep-interval 1] [--poll-interval 1] [--fabric.hca-ports] [--advertise-address HOST:PORT]
                [--workdir DIR] [--web.listen-address :9479] [--web.config.file FILE] [--log.level info]
```

Endpoints (GET unless marked):

- `/targets`: Prometheus http_sd / file_sd JSON, one group per node with labels `node`, `pool` and
  `__metrics_path__`; `?pool=a,b` and `?limit=N` filter.
- `/nodes/<node>/metrics`: that node's node exporter (materialized on first scrape, synced just before).
- `/fabric/metrics`: the fabric exporter (every switch port; HCA ports too with `--fabric.hca-ports`).
- `/scheduler/metrics`: the scheduler exporter (pools, node states, `ibpool_scheduler_up`).
- `/healthz`: 200 `{"status": "ok"}`, or 503 with reasons (clock thread, fabric sweeps, scheduler polls).
- `/-/model`: JSON of model time, speed, job counts, QoS tables, pools, recent events, materialized nodes.
- POST `/-/control/vl-weights`: opensm.conf lines `qos_vlarb_high 0:4,1:0`, `qos_vlarb_low 0:0,1:64`,
  optionally `qos_sl2vl 0,1,...` (or `?high=&low=&sl2vl=`); a table not given is kept.
- POST `/-/control/partition`: `PartitionName=P Nodes=node[0001-0016]`, the full new list (scontrol).
- POST `/-/control/drain`, `/-/control/resume`: `NodeName=LIST [Reason="..."]` (or `?node=&reason=`).
- POST `/-/control/advance?seconds=N`: advance the model N simulated seconds now (for `--speed 0`).
- POST `/-/fault?kind=K&...`: `xid` (node, gpu, xid), `lose_gpu`, `restore_gpu` (node, gpu);
  `link_down`, `link_up`, `flap`, `symbol_errors` (count), `saturate` (counter) on node and rail or
  `port=DESC/N`; `switch_down`, `switch_up` (switch); `scheduler_down`, `scheduler_up`.

Controls answer 200 `{"ok": true, "result": ..., "time": ...}` or 400 `{"ok": false, "error": ...}` and
change nothing when refused. After every control, fault or advance the fabric is swept and the scheduler
polled again, so the next scrape shows the change.

One Prometheus job scrapes every node through this port:

```yaml
- job_name: ibpool-sim-nodes
  honor_labels: true            # keeps ibpool_gpu_job_info's own `pool` (the job's pool)
  http_sd_configs: [{url: "http://127.0.0.1:9479/targets", refresh_interval: 30s}]
- job_name: ibpool-sim-fabric
  metrics_path: /fabric/metrics
  static_configs: [{targets: ["127.0.0.1:9479"]}]
- job_name: ibpool-sim-scheduler
  metrics_path: /scheduler/metrics
  static_configs: [{targets: ["127.0.0.1:9479"]}]
```

Costs and limits: a node is materialized (a sysfs tree on disk, an NVML fake, an XID thread) on its first
scrape; at most `--max-materialized` at once, least recently scraped closed first (its counters restart
when it comes back). For a large model scrape a subset (`/targets?pool=...&limit=...`). Fabric sweeps
and scheduler polls read the whole model under its lock every interval. Switches never fail in the model:
`switch_down` only stops a switch's counter reads, as a hung management agent would.
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
