"""The whole read side end to end: the simulated cluster, a real Prometheus with the rules of alerts/, every
dashboard query, and alerts that reach a real Alertmanager.

Both tests run one small cluster (`congested_model`: two pools whose 16-GPU jobs congest the shared leaf
uplinks, a pending job beside an idle node, faults on nodes outside the pools), scraped the way
alerts/README.md asks (`SCRAPE_CONFIG`). The dashboard test runs the clock at 1 simulated second per wall
second, so rates read as the model means them; the alert test freezes it and moves it with
POST /-/control/advance, so what the counters hold does not depend on how fast this machine is.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dashboards.build import as_dicts
from dashboards.promql import BUILTIN_VARIABLES, variables
from dashboards.queries import Query, all_queries
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty, shared_uplink_spec
from simulator.cluster.workload import JobRequest
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from tests.integration import alertmanager_server, prometheus_server
from tests.integration.alertmanager_server import ALERTMANAGER, Alert
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer
from tests.simulator.serve.helpers import post

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian: prometheus)"),
]

ALERTS_DIR = Path(__file__).resolve().parents[2] / "alerts"
RECORDING_RULES = ALERTS_DIR / "recording_rules.yml"
ALERT_RULES = ALERTS_DIR / "alert_rules.yml"
NODES = 8
TARGETS = NODES + 2  # every node, the fabric and the scheduler
SHORT_FOR = "2s"

# Scraped the way alerts/README.md asks: jobs named `ibpool-...`, each with the same `cluster` target label;
# node targets from http_sd with the `node` and `pool` target labels (what `ibpool targets` gives too) and
# `honor_labels` false (`ibpool_gpu_job_info`'s own `job` and `pool` become `exported_job` and
# `exported_pool`); no `node` target label on the scheduler job. Every simulated node answers on the same
# address, so `instance` is made unique per node (`ADDRESS/node`), as it is on real hosts where each node
# runs its own exporter: the rules join a port's series on (instance, device, port) and a GPU's on
# (instance, gpu), and with one shared `instance` those joins find eight matches and fail. Everything is
# scraped and evaluated every second.
SCRAPE_CONFIG = """
global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: ibpool-node
    http_sd_configs: [{{url: "http://127.0.0.1:{port}/targets", refresh_interval: 2s}}]
    relabel_configs:
      - {{source_labels: [__address__, node], separator: /, target_label: instance}}
      - {{target_label: cluster, replacement: sim}}
  - job_name: ibpool-fabric
    metrics_path: /fabric/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"], labels: {{cluster: sim}}}}]
  - job_name: ibpool-scheduler
    metrics_path: /scheduler/metrics
    static_configs: [{{targets: ["127.0.0.1:{port}"], labels: {{cluster: sim}}}}]
"""

# Where the faults go (all outside the pools, so the congested jobs keep running).
GPU_NODE = "node0004"  # XID 79 twice on GPU 1, GPU 2 lost; symbol errors on its HCA port
SATURATED_NODE = "node0007"  # the HCA port's PortXmitWait pinned at 2^32-1
FLAP_NODE = "node0008"  # link flapped (link_downed + 1 on both ends), then taken down


def congested_model() -> ClusterModel:
    """The cluster both tests run, at time 0: both chatty jobs running, one `hi` job pending.

    `shared_uplink_spec`, 8 nodes: pool `hi` (node0001, node0005) and pool `lo` (node0002, node0003,
    node0006). One communication-bound 16-GPU job per pool puts a ring step of each on the leaf uplinks
    leaf001/5 and leaf002/5, oversubscribed 4:1, so those uplinks and the four hosts' HCA ports wait 7/16
    (0.44) of the time; a second `hi` job waits for GPUs (8 pending) while `lo` has node0003 idle (8 idle
    GPUs). node0004, node0007 and node0008 are in no pool: the faults go there, away from the congested
    jobs. Load does not need a fast clock: the jobs run from time 0.

    Counters start at 0. (A node's sysfs tree is made at its first scrape and then follows the model's
    counters by deltas; the model's own PortXmitWait stops at 2^32-1, so a tree made after its port's
    counter had grown would stop short of 2^32-1 and never show as saturated.)
    """
    model = ClusterModel(shared_uplink_spec())
    model.submit(chatty("hi"))
    model.submit(chatty("lo"))
    model.advance(0)  # both start
    model.set_partition_nodes("lo", ["node0002", "node0003", "node0006"])
    model.submit(JobRequest("hi", 0.0, 8, 36_000.0, name="hi-waits"))
    model.advance(0)
    return model


@contextmanager
def running_cluster(workdir: Path, speed: float) -> Iterator[ClusterServer]:
    """The cluster of `congested_model` behind one port, its clock at `speed` (0: frozen)."""
    server = ClusterServer(
        congested_model(), ServerSettings(listen_address="127.0.0.1:0", speed=speed, workdir=workdir)
    )
    server.start()
    try:
        yield server
    finally:
        server.close()


def fault(cluster: ClusterServer, query: str) -> None:
    status, answer = post(cluster.port, f"/-/fault?{query}")
    assert status == 200 and answer["ok"], f"/-/fault?{query}: {answer}"


def advance(cluster: ClusterServer, seconds: float) -> None:
    status, answer = post(cluster.port, f"/-/control/advance?seconds={seconds:g}")
    assert status == 200 and answer["ok"], answer


def wait_for_two_scrapes_of_every_target(prom: PrometheusServer) -> None:
    prom.wait_for_targets(up=TARGETS)
    prom.wait_for_query("count_over_time(up[1m]) >= 2", lambda r: len(r) == TARGETS)


def assert_every_rule_evaluates(prom: PrometheusServer) -> None:
    """Every recording and alerting rule evaluated without error (e.g. no duplicate series in a join)."""
    broken = [
        f"{rule['name']}: {rule.get('lastError') or rule.get('health')}"
        for group in prom.rules()
        for rule in group["rules"]
        if rule.get("health") != "ok"
    ]
    assert not broken, broken


# ---- every dashboard query ------------------------------------------------------------------------------

# Queries expected to return nothing against this cluster, by (dashboard uid, panel or variable, refId),
# with the reason. Every other query must return data. The ALERTS, `up == 0` and collector entries may
# return data on a slow run; the others must stay empty (a stale entry fails the test).
NOT_PRODUCED_BY_THE_SIMULATION = "the recommender and the hooks export it; the simulated cluster does not"
NO_FAULT_FOR_IT = "the simulated cluster has no fault that moves this counter"
NOT_MODELLED_HERE = "the simulated GPUs are H200s without MIG (retired pages and MIG: tests/exporter)"
NOT_SERVED_BY_THE_CLUSTER = "process and scrape metrics come from each exporter's route, not the cluster's"
EXPECTED_EMPTY: dict[tuple[str, str, str], str] = {
    # Prometheus's ALERTS: the real rules' `for:` is 1 minute or more, so nothing fires during this test
    # (test_faults_fire_alerts_that_reach_alertmanager covers alerts with shortened `for:`).
    ("ibpool-fleet", "Firing alerts", "A"): "no alert fires within the test (every `for:` is >= 1m)",
    ("ibpool-fleet", "Top firing alerts", "A"): "no alert fires within the test",
    ("ibpool-fleet", "Firing alerts by name", "A"): "no alert fires within the test",
    # Every target is up by construction.
    ("ibpool-fleet", "Scrape targets down", "A"): "every scrape target is up",
    # The node exporters' collectors all work on the simulated nodes.
    ("ibpool-node", "Collectors failing", "A"): "no collector fails on a simulated node",
    # Node-side IB error counters the simulation never moves (it moves symbol errors and link downed only).
    ("ibpool-node", "Errors", "B"): NO_FAULT_FOR_IT,  # link error recovery
    ("ibpool-node", "Errors", "D"): NO_FAULT_FOR_IT,  # local link integrity
    ("ibpool-node", "Errors", "E"): NO_FAULT_FOR_IT,  # receive errors
    ("ibpool-node", "Errors", "F"): NO_FAULT_FOR_IT,  # remote physical errors
    ("ibpool-node", "Errors", "G"): NO_FAULT_FOR_IT,  # transmit discards
    ("ibpool-node", "Errors", "H"): NO_FAULT_FOR_IT,  # buffer overrun
    # The same on switch ports.
    ("ibpool-fabric", "Port errors", "B"): NO_FAULT_FOR_IT,
    ("ibpool-fabric", "Port errors", "D"): NO_FAULT_FOR_IT,
    ("ibpool-fabric", "Port errors", "E"): NO_FAULT_FOR_IT,
    ("ibpool-fabric", "Port errors", "F"): NO_FAULT_FOR_IT,
    ("ibpool-fabric", "Port errors", "G"): NO_FAULT_FOR_IT,
    ("ibpool-fabric", "Port errors", "H"): NO_FAULT_FOR_IT,
    # The simulated nodes' GPUs are H200s out of MIG mode: they remap rows instead of retiring pages.
    ("ibpool-node", "Retired pages", "A"): NOT_MODELLED_HERE,
    ("ibpool-node", "Retired pages", "B"): NOT_MODELLED_HERE,
    ("ibpool-node", "MIG instances", "A"): NOT_MODELLED_HERE,
    ("ibpool-node", "MIG utilization", "A"): NOT_MODELLED_HERE,
    ("ibpool-node", "MIG memory", "A"): NOT_MODELLED_HERE,
    ("ibpool-node", "MIG memory", "B"): NOT_MODELLED_HERE,
    # The cluster serves every node from one process at /nodes/<node>/metrics, without the process and
    # scrape metrics each `ibpool exporter`'s own metrics route adds (tests/integration/test_exporter_cli).
    ("ibpool-node", "Scrape duration", "A"): NOT_SERVED_BY_THE_CLUSTER,
    ("ibpool-node", "Scrape duration", "B"): NOT_SERVED_BY_THE_CLUSTER,
    ("ibpool-node", "CPU", "A"): NOT_SERVED_BY_THE_CLUSTER,
    ("ibpool-node", "Resident memory", "A"): NOT_SERVED_BY_THE_CLUSTER,
    ("ibpool-node", "Open files", "A"): NOT_SERVED_BY_THE_CLUSTER,
    ("ibpool-node", "Open files", "B"): NOT_SERVED_BY_THE_CLUSTER,
    ("ibpool-node", "Up since", "A"): NOT_SERVED_BY_THE_CLUSTER,
    # The Decisions dashboard and the change annotations read what the recommender and hooks export
    # (alerts/external/metrics.yaml); nothing exports them here yet.
    **{
        (uid, "Changes applied", "Changes applied"): NOT_PRODUCED_BY_THE_SIMULATION
        for uid in ("ibpool-fleet", "ibpool-pool", "ibpool-node", "ibpool-fabric", "ibpool-decisions")
    },
    ("ibpool-decisions", "target", "target"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Pending", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Approved", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Failed", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Oldest pending", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Proposals by state", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Changes applied and failed", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Changes by target (since the hooks started)", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
    # Live weights come from the simulated fabric; desired ones from `ibpool recommend`, not run here.
    ("ibpool-decisions", "Weights: live and desired", "B"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Weights now", "B"): NOT_PRODUCED_BY_THE_SIMULATION,
    ("ibpool-decisions", "Weights not yet applied (desired - live)", "A"): NOT_PRODUCED_BY_THE_SIMULATION,
}


def _key(q: Query) -> tuple[str, str, str]:
    return (q.dashboard_uid, q.title, q.ref_id)


def _name(q: Query) -> str:
    return "/".join(_key(q))


def _has_data(prom: PrometheusServer, q: Query, overrides: dict[str, str] | None = None) -> bool:
    """Whether the query returns anything (a variable: any value of its label). Errors raise."""
    result = prom.query(q.promql(overrides=overrides))
    if q.kind == "variable":
        return any(s["metric"].get(q.label) for s in result)
    return bool(result)


@dataclass
class Run:
    """The outcome of running every query once."""

    with_data: list[Query]
    empty: list[Query]


def run_all(prom: PrometheusServer, queries: list[Query], deadline: float) -> Run:
    """Run every query (variables as `.*`); re-run those that should have data until they do or `deadline`."""
    with_data: list[Query] = []
    pending = list(queries)
    while True:
        still: list[Query] = []
        for q in pending:
            (with_data if _has_data(prom, q) else still).append(q)
        missing = [q for q in still if _key(q) not in EXPECTED_EMPTY]
        if not missing or time.monotonic() > deadline:
            return Run(with_data, still)
        pending = still
        prom.wait_for_rule_evaluations(1, timeout=max(1.0, deadline - time.monotonic()))


def injected_faults(cluster: ClusterServer, prom: PrometheusServer) -> None:
    """Faults that give the health panels something to show; increases need a sample before them."""
    fault(cluster, f"kind=xid&node={GPU_NODE}&gpu=1&xid=79")
    fault(cluster, f"kind=lose_gpu&node={GPU_NODE}&gpu=2")
    fault(cluster, f"kind=symbol_errors&node={GPU_NODE}&count=5")
    fault(cluster, "kind=symbol_errors&port=leaf001/4&count=5")  # node0004's switch port
    fault(cluster, f"kind=saturate&node={SATURATED_NODE}")
    fault(cluster, "kind=saturate&port=leaf002/3")  # node0007's switch port
    fault(cluster, f"kind=flap&node={FLAP_NODE}")
    # The spine's counters go unread ("Ports not read", "Switches down"); the leaves' uplinks still read.
    fault(cluster, "kind=switch_down&switch=spine01")
    # A first XID creates its series at 1, which increase() cannot see: a second one makes it go up.
    prom.wait_for_query(f'ibpool_gpu_xid_errors_total{{node="{GPU_NODE}", gpu="1", xid="79"}} == 1')
    fault(cluster, f"kind=xid&node={GPU_NODE}&gpu=1&xid=79")
    fault(cluster, f"kind=link_down&node={FLAP_NODE}")  # after the flap: "Port state", "Ports not active"


def test_every_dashboard_query_runs_and_has_data_where_the_simulation_makes_it(tmp_path: Path) -> None:
    queries = all_queries()
    assert set(EXPECTED_EMPTY) <= {_key(q) for q in queries}, "the allowlist names queries that do not exist"
    workdir = tmp_path / "prometheus"
    workdir.mkdir()
    with (
        # 1 simulated second per wall second, so rates read back as the model means them: at speed N every
        # rate, the congestion ratio included, reads N times higher, and a port waiting 44 % of the time at
        # NDR fills its 32-bit PortXmitWait after 50/N s.
        running_cluster(tmp_path / "cluster", speed=1.0) as cluster,
        prometheus_server.running(
            SCRAPE_CONFIG.format(port=cluster.port), [RECORDING_RULES, ALERT_RULES], workdir=workdir
        ) as prom,
    ):
        wait_for_two_scrapes_of_every_target(prom)
        injected_faults(cluster, prom)
        prom.wait_for_rule_evaluations(2)
        assert_every_rule_evaluates(prom)

        run = run_all(prom, queries, deadline=time.monotonic() + 30)
        missing = [_name(q) for q in run.empty if _key(q) not in EXPECTED_EMPTY]
        assert not missing, f"queries without data: {missing}"
        # Entries that cannot have data here; one that has is stale (the others depend on timing).
        stale = [
            _name(q)
            for q in run.with_data
            if EXPECTED_EMPTY.get(_key(q))
            in (NOT_PRODUCED_BY_THE_SIMULATION, NO_FAULT_FOR_IT, NOT_MODELLED_HERE, NOT_SERVED_BY_THE_CLUSTER)
        ]
        assert not stale, f"these have data now: drop them from EXPECTED_EMPTY: {stale}"

        # Every value a variable offers selects series: pick each query's variables one at a time and
        # check that some listed value returns data (a `.*` would also match a label the series lack).
        values = {
            (q.dashboard_uid, q.title): sorted(
                {s["metric"][q.label] for s in prom.query(q.promql()) if s["metric"].get(q.label)}
            )
            for q in queries
            if q.kind == "variable"
        }
        unmatched = []
        for q in run.with_data:
            for var in _query_variables(q):
                options = values.get((q.dashboard_uid, var), [])
                if options and not any(_has_data(prom, q, {var: _regex(v)}) for v in options):
                    unmatched.append(f"{_name(q)} with ${var} in {options}")
        assert not unmatched, f"no listed value of the variable selects data: {unmatched}"

        # A drill-down link takes its value from a label (or table field): every series has it.
        unlabelled = [
            f"{_name(q)} lacks {label}"
            for q in run.with_data
            for label in drill_down_labels().get((q.dashboard_uid, q.title), ())
            if not all(s["metric"].get(label) for s in prom.query(q.promql()))
        ]
        assert not unlabelled, unlabelled


def _regex(value: str) -> str:
    """`value` as an exact regex inside a PromQL string (its backslashes escaped once more)."""
    return re.escape(value).replace("\\", "\\\\")


def drill_down_labels() -> dict[tuple[str, str], set[str]]:
    """(dashboard uid, panel title) -> the labels its data links read (series labels, table fields)."""
    out: dict[tuple[str, str], set[str]] = {}
    for uid, board in as_dicts().items():
        for panel in board["panels"]:
            for link in panel.get("fieldConfig", {}).get("defaults", {}).get("links", []):
                for label in re.findall(r"\$\{__(?:field\.labels|data\.fields)\.(\w+)\}", link["url"]):
                    out.setdefault((uid, panel["title"]), set()).add(label)
    return out


def _query_variables(q: Query) -> list[str]:
    """The dashboard variables `q` uses (not Grafana's built-ins)."""
    return sorted(v for v in variables(q.expr) if v not in BUILTIN_VARIABLES)


# ---- alerts to Alertmanager ---------------------------------------------------------------------------

_FOR_LINE = re.compile(r"^(\s+for:\s*)(\S+)\s*$", re.MULTILINE)


def shortened_alert_rules(target: Path) -> Path:
    """A copy of alert_rules.yml whose every `for:` is SHORT_FOR; nothing else changes.

    The real durations (minutes) are covered by the promtool tests in alerts/tests, which check every
    alert just before and just after its `for:`. Here the copy is rewritten line by line (only lines that
    are `for: <duration>`), and then checked to equal the original in everything but `for`.
    """
    original = ALERT_RULES.read_text(encoding="utf-8")
    text, count = _FOR_LINE.subn(lambda m: m.group(1) + SHORT_FOR, original)
    before, after = yaml.safe_load(original), yaml.safe_load(text)
    rules_before = [r for g in before["groups"] for r in g["rules"]]
    rules_after = [r for g in after["groups"] for r in g["rules"]]
    assert count == sum("for" in r for r in rules_before) > 0
    for old, new in zip(rules_before, rules_after, strict=True):
        assert {k: v for k, v in old.items() if k != "for"} == {k: v for k, v in new.items() if k != "for"}
        assert new.get("for", SHORT_FOR) == SHORT_FOR
    target.write_text(text, encoding="utf-8")
    return target


def _firing(prom: PrometheusServer, alertname: str, **labels: str) -> list[dict[str, str]]:
    matchers = "".join(f', {k}="{v}"' for k, v in labels.items())
    result = prom.query(f'ALERTS{{alertname="{alertname}", alertstate="firing"{matchers}}}')
    return [s["metric"] for s in result]


def _labels(alert: Alert) -> dict[str, str]:
    labels: dict[str, str] = alert["labels"]
    return labels


@pytest.mark.skipif(
    ALERTMANAGER is None, reason="alertmanager is not installed (Debian: prometheus-alertmanager)"
)
def test_faults_fire_alerts_that_reach_alertmanager(tmp_path: Path) -> None:
    """Congestion and GPU faults in the simulation -> Prometheus alerts -> Alertmanager -> our webhook.

    The clock is frozen (speed 0) and moved with POST /-/control/advance, so what the counters hold does
    not depend on how fast this machine runs. The congested ports first show their waiting in the ratio
    rules; then their 32-bit PortXmitWait fills and IbWaitCounterSaturated fires. IbPortCongested itself
    cannot fire here: the rules rate the counter over 5 minutes, and a counter that starts at zero holds
    2^32 ticks x 256 bytes / 50e9 bytes/s = 22 s of waiting, i.e. at most 7.3 % of a 5-minute window
    before it saturates, under the 10 % threshold (alerts/README.md: sustained congestion on NDR needs
    counters reset periodically). The promtool tests in alerts/tests cover IbPortCongested.
    """
    rules = shortened_alert_rules(tmp_path / "alert_rules_short_for.yml")
    workdir = tmp_path / "prometheus"
    workdir.mkdir()
    with (
        running_cluster(tmp_path / "cluster", speed=0.0) as cluster,
        alertmanager_server.running() as am,
        prometheus_server.running(
            SCRAPE_CONFIG.format(port=cluster.port)
            + f'alerting: {{alertmanagers: [{{static_configs: [{{targets: ["{am.address}"]}}]}}]}}\n',
            [RECORDING_RULES, rules],
            workdir=workdir,
        ) as prom,
    ):
        wait_for_two_scrapes_of_every_target(prom)
        fault(cluster, f"kind=xid&node={GPU_NODE}&gpu=1&xid=79")
        fault(cluster, f"kind=lose_gpu&node={GPU_NODE}&gpu=2")

        # Ten seconds of congestion: visible in the ratio rules of the hosts' ports and the uplinks.
        advance(cluster, 10)
        prom.wait_for_query('port:ibpool_infiniband_congestion:ratio_rate5m{node="node0001"} > 0')
        prom.wait_for_query(
            'fabric_port:ibpool_fabric_port_congestion:ratio_rate5m{node_desc="leaf001", port="5"} > 0'
        )

        # The GPU faults reach the webhook with the node and GPU they happened on.
        xid = am.webhook.wait_for_alert(alertname="GpuXidError", node=GPU_NODE, gpu="1", xid="79")
        assert _labels(xid)["severity"] == "critical" and _labels(xid)["uuid"]
        assert xid["annotations"]["runbook_url"].endswith("/alerts/runbooks/GpuXidError.md")
        assert f"on {GPU_NODE}" in xid["annotations"]["description"]
        lost = am.webhook.wait_for_alert(alertname="GpuFellOffBus", node=GPU_NODE, gpu="2")
        assert _labels(lost)["severity"] == "critical"

        # Pool hi has 8 GPUs pending while lo holds node0003 idle.
        imbalanced = am.webhook.wait_for_alert(alertname="GpuPoolImbalanced", pool="hi")
        assert _labels(imbalanced)["severity"] == "warning"

        # A minute more: the congested ports' wait counters fill up. They are reported as saturated, and
        # their congestion ratio disappears rather than reading 0 (idle).
        advance(cluster, 60)
        host = am.webhook.wait_for_alert(alertname="IbWaitCounterSaturated", node="node0001")
        assert (_labels(host)["device"], _labels(host)["port"]) == ("mlx5_0", "1")
        switch = am.webhook.wait_for_alert(alertname="IbWaitCounterSaturated", node_desc="leaf001", port="5")
        assert "node" not in _labels(switch) and _labels(switch)["node_guid"]
        assert not prom.query('port:ibpool_infiniband_congestion:ratio_rate5m{node="node0001"}')
        assert prom.query('port:ibpool_infiniband_congestion:ratio_rate5m{node="node0003"}')  # idle: 0

        assert_every_rule_evaluates(prom)

        # Prometheus and Alertmanager agree with what reached the webhook.
        expected = {
            "GpuXidError": {"node": GPU_NODE},
            "GpuFellOffBus": {"node": GPU_NODE},
            "GpuPoolImbalanced": {"pool": "hi"},
            "IbWaitCounterSaturated": {"node": "node0001"},
        }
        for name, labels in expected.items():
            assert _firing(prom, name, **labels), f"{name} {labels} is not firing in Prometheus"
        assert set(expected) <= {a["labels"]["alertname"] for a in am.alerts()}
        short = {
            _labels(a)["pool"] for a in am.webhook.alerts() if _labels(a)["alertname"] == "GpuPoolImbalanced"
        }
        assert short == {"hi"}, "lo holds the idle GPUs; only hi is short of them"
