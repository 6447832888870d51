"""The node targets as Prometheus service discovery JSON (the http_sd and file_sd format).

One group per node: `{"targets": ["HOST:PORT"], "labels": {"node": N, "pool": P, "__metrics_path__":
"/nodes/N/metrics"}}`, so one scrape job scrapes every node of the cluster through one port. `pool` is
the node's partition now (several joined with `,`; empty when it is in none); Prometheus picks up a move
at its next discovery refresh. Filters: `pools` keeps nodes in any of those pools, `limit` the first N.

`ibpool_gpu_job_info` has a `pool` label of its own (the job's pool): scrape with `honor_labels: true`
so that it keeps it, or Prometheus renames it `exported_pool` in favour of the target label.
"""

from __future__ import annotations

from collections.abc import Collection

from simulator.cluster.views import SchedulerView


def node_metrics_path(node: str) -> str:
    """Where one node's exporter answers."""
    return f"/nodes/{node}/metrics"


def sd_groups(
    view: SchedulerView, address: str, pools: Collection[str] = (), limit: int | None = None
) -> list[dict[str, object]]:
    """Service discovery groups for the nodes of `view`, in node order."""
    groups: list[dict[str, object]] = []
    for name, node in view.nodes.items():
        if pools and not set(node.pools) & set(pools):
            continue
        if limit is not None and len(groups) >= limit:
            break
        labels = {
            "node": name,
            "pool": ",".join(node.pools),
            "instance": f"{address}/{name}",  # one port serves every node: keep their series apart
            "__metrics_path__": node_metrics_path(name),
        }
        groups.append({"targets": [address], "labels": labels})
    return groups
