"""Where the report's alerts link to, and how it writes changes: runbooks (a base URL, or relative files
that exist), Grafana panels that exist in the shipped dashboards, Prometheus queries; node lists as Slurm
hostlists with the moved nodes named."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import yaml

from foundation.hostlist import expand_hostlist
from postmortem.changes import describe, moves, node_change
from postmortem.links import PANELS, LinkSettings, grafana, panel_ids, prometheus, runbook
from postmortem.model import Alert

REPO = Path(__file__).resolve().parents[2]
PORT = Alert(
    "IbPortCongested",
    "critical",
    {"node_guid": "0x1", "node_desc": "leaf001", "port": "9"},
    3600.0,
    7200.0,
    3600.0,
    expr="x > 0.3",
)
GPU = Alert("GpuFellOffBus", "critical", {"node": "node0016", "gpu": "3"}, 3600.0, None, 600.0)


def test_runbooks_resolve_relative_to_the_report_or_under_a_base(tmp_path: Path) -> None:
    links = LinkSettings(report_dir=tmp_path / "deep" / "dir")
    (tmp_path / "deep" / "dir").mkdir(parents=True)
    url = runbook("IbPortCongested", links)
    assert url is not None and url.endswith("alerts/runbooks/IbPortCongested.md")
    assert ((tmp_path / "deep" / "dir") / urllib.parse.unquote(url)).resolve() == (
        REPO / "alerts" / "runbooks" / "IbPortCongested.md"
    )
    assert runbook("NoSuchAlert", links) is None  # no link to a file that is not there
    based = LinkSettings(report_dir=tmp_path, runbook_url="https://git.example.com/ibpool/alerts/runbooks/")
    assert (
        runbook("GpuFellOffBus", based) == "https://git.example.com/ibpool/alerts/runbooks/GpuFellOffBus.md"
    )


def test_every_alert_has_a_panel_that_exists() -> None:
    rules = yaml.safe_load((REPO / "alerts" / "alert_rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert set(PANELS) == alerts
    ids = panel_ids()
    for name, choices in PANELS.items():
        for uid, title in choices:
            assert (uid, title) in ids, (name, uid, title)


def test_grafana_and_prometheus_links_only_when_configured(tmp_path: Path) -> None:
    none = LinkSettings(report_dir=tmp_path)
    assert grafana(PORT, none, 9000.0) is None and prometheus(PORT, none, 9000.0) is None
    links = LinkSettings(
        report_dir=tmp_path, grafana_url="http://grafana:3000/", prometheus_url="http://prom:9090"
    )
    url = grafana(PORT, links, 9000.0)
    congestion = panel_ids()[("ibpool-fabric", "Congestion by switch and port")]
    assert url == (
        f"http://grafana:3000/d/ibpool-fabric?viewPanel={congestion}&from=1800000&to=9000000&var-switch=leaf001"
    )
    gpu_up = panel_ids()[("ibpool-node", "GPU up")]
    assert grafana(GPU, links, 9000.0) == (
        f"http://grafana:3000/d/ibpool-node?viewPanel={gpu_up}&from=1800000&to=10800000&var-node=node0016"
    )
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(prometheus(PORT, links, 9000.0) or "").query)
    assert query["g0.expr"] == ["x > 0.3"] and query["g0.range_input"] == ["120m"]
    assert prometheus(GPU, links, 9000.0) is None  # no expression known


def test_partition_changes_read_as_hostlists_with_the_moved_nodes() -> None:
    recsys = (
        "slurm.partition.recsys.nodes",
        "node0001,node0002,node0003,node0004",
        "node0001,node0002,node0003,node0004,node0013,node0014",
    )
    llm = ("slurm.partition.llm.nodes", "node0005,node0013,node0014", "node0005")
    part = node_change(*recsys)
    assert part is not None and part.added == ("node0013", "node0014") and part.removed == ()
    (move,) = moves([recsys, llm])
    assert move.describe() == "2 nodes node[0013-0014] llm -> recsys"
    assert expand_hostlist("node[0013-0014]") == list(move.nodes)
    text = describe([recsys, llm, ("opensm.vlarb_low", "0:64,1:64", "0:32,1:96")])
    assert text == "2 nodes node[0013-0014] llm -> recsys; opensm.vlarb_low 0:64,1:64 -> 0:32,1:96"
    assert node_change("opensm.vlarb_low", "a", "b") is None
