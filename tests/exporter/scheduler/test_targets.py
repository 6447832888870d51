"""`ibpool targets` over captured `sinfo --json` output: groups, labels, addresses, failures.

The real Slurm run is tests/integration/test_targets.py; here fake clients (fake_slurm.py) print captures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.scheduler.errors import ParseError
from exporter.scheduler.targets import NodeTarget, parse_cluster_name, parse_nodes, render, sd_groups
from exporter.scheduler.targets_main import load_config, main
from foundation.errors import ConfigError
from tests.exporter.scheduler.fake_slurm import FakeSlurm, read

SCONTROL_CONFIG = (
    "Configuration data as of 2026-01-01T00:00:00\nClusterName             = gpu-a\nSlurmctldPort = 6817\n"
)


def test_nodes_with_their_addresses_partitions_and_gpus() -> None:
    nodes = parse_nodes(read("gres", "sinfo.json"))
    assert [n.name for n in nodes] == [f"node{i}" for i in range(1, 9)]
    assert nodes[0] == NodeTarget("node1", "127.0.0.1", "localhost", ("training",), 8)
    assert nodes[7].partitions == ("inference",)


def test_one_group_per_gpu_node_with_node_pool_and_cluster() -> None:
    groups = sd_groups(parse_nodes(read("gres", "sinfo.json")), "gpu-a", 9470)
    assert groups[0] == {
        "targets": ["node1:9470"],
        "labels": {"node": "node1", "instance": "node1", "pool": "training", "cluster": "gpu-a"},
    }
    assert [g["labels"]["pool"] for g in groups] == ["training"] * 4 + ["inference"] * 4  # type: ignore[index]
    assert json.loads(render(groups)) == groups


def test_address_kinds_overlapping_and_filtered_pools() -> None:
    nodes = [
        NodeTarget("n2", "10.0.0.2", "n2.example", ("b", "a", "all"), 4),
        NodeTarget("n1", "fe80::1", "n1.example", ("all",), 4),
        NodeTarget("cpu1", "10.0.1.1", "cpu1.example", ("cpu",), 0),
    ]
    by_addr = sd_groups(nodes, "c", 9100, address="addr")
    assert [g["targets"] for g in by_addr] == [["[fe80::1]:9100"], ["10.0.0.2:9100"]], "sorted; no cpu1"
    assert by_addr[1]["labels"] == {"node": "n2", "instance": "n2", "pool": "a,all,b", "cluster": "c"}
    pools = sd_groups(nodes, "c", 9100, address="hostname", pools=("a", "b"), all_nodes=True)
    assert [(g["targets"], g["labels"]["pool"]) for g in pools] == [  # type: ignore[index]
        (["cpu1.example:9100"], ""),
        (["n1.example:9100"], ""),
        (["n2.example:9100"], "a,b"),
    ]


def test_nodes_without_gres_are_listed_only_when_asked() -> None:
    nodes = parse_nodes(read("whole_nodes", "sinfo.json"))
    assert sd_groups(nodes, "c", 9470) == []
    assert len(sd_groups(nodes, "c", 9470, all_nodes=True)) == 4


def test_cluster_name_from_scontrol_show_config() -> None:
    assert parse_cluster_name(SCONTROL_CONFIG) == "gpu-a"
    with pytest.raises(ParseError):
        parse_cluster_name("SlurmctldPort = 6817\n")


def test_bad_settings_are_reported_together() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(["--targets.port", "0", "--targets.address", "ip", "--targets.cluster", "a b"])
    assert len(caught.value.problems) == 3


def _fake(tmp_path: Path) -> FakeSlurm:
    slurm = FakeSlurm(tmp_path)
    slurm.write_program("scontrol", 'printf "ClusterName = gpu-a\\n"\n')
    return slurm


def test_main_writes_the_file_and_keeps_it_when_slurm_fails(tmp_path: Path) -> None:
    slurm = _fake(tmp_path)
    out = tmp_path / "nodes.json"
    argv = ["--slurm.bin-dir", str(slurm.bin_dir), "--slurm.conf", str(slurm.conf), "--output.file", str(out)]
    assert main(argv) == 0
    written = out.read_text()
    groups = json.loads(written)
    assert len(groups) == 8 and groups[0]["labels"]["cluster"] == "gpu-a"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    slurm.use("down")  # sinfo answers with an `errors` list: the file is left as it was
    assert main(argv) == 1
    assert out.read_text() == written
    slurm.use("whole_nodes")  # no GPU node: nothing to write, the old list stays
    assert main(argv) == 1
    assert out.read_text() == written
    assert main([*argv, "--targets.all-nodes", "--targets.cluster", "lab"]) == 0
    assert {g["labels"]["cluster"] for g in json.loads(out.read_text())} == {"lab"}


def test_main_prints_to_stdout_without_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slurm = _fake(tmp_path)
    assert main(["--slurm.bin-dir", str(slurm.bin_dir), "--slurm.conf", str(slurm.conf)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 8
    assert main(["--targets.port", "70000"]) == 2
