"""Reading QoS tables (smpquery output, opensm.conf) and applying them to the model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from simulator.backends.errors import QosReadError
from simulator.backends.qos_read import (
    OpenSMConf,
    QosTables,
    Smpquery,
    apply_qos,
    normalise,
    parse_opensm_conf,
    parse_sl2vl_table,
    parse_vlarb_tables,
)
from simulator.cluster.model import ClusterModel
from simulator.cluster.scenarios import chatty, shared_uplink_spec

# Printed by smpquery 44 against ibsim 0.10 + OpenSM 3.3.23 after qos_vlarb_low 0:0,1:200,2:10,...
VLARB = """\
# VLArbitration tables: Lid 2 port 5 LowCap 8 HighCap 8
# Low priority VL Arbitration Table:
VL    : |0x0 |0x1 |0x2 |0x3 |0x4 |0x5 |0x6 |0x7 |
WEIGHT: |0x0 |0xC8|0xA |0x10|0x8 |0x4 |0x2 |0x1 |
# High priority VL Arbitration Table:
VL    : |0x0 |0x1 |0x2 |0x3 |0x4 |0x5 |0x6 |0x7 |
WEIGHT: |0x4 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
"""
SL2VL = """\
# SL2VL table: Lid 2
#                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|
ports: in  0, out  5: | 0| 2| 1| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|
ports: in  1, out  5: | 0| 2| 1| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|
"""
LOW = ((0, 0), (1, 200), (2, 10), (3, 16), (4, 8), (5, 4), (6, 2), (7, 1))
HIGH = ((0, 4), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0), (7, 0))


def test_smpquery_tables_parse_upper_case_hex() -> None:
    assert parse_vlarb_tables(VLARB) == (HIGH, LOW)
    assert parse_sl2vl_table(SL2VL) == (0, 2, 1, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7)
    with pytest.raises(QosReadError, match="smpquery vlarb: no 'LowCap N HighCap N' header"):
        parse_vlarb_tables("ibwarn: something\n")
    with pytest.raises(QosReadError, match="no table"):
        parse_vlarb_tables("# VLArbitration tables: Lid 2 port 5 LowCap 0 HighCap 0\n")
    with pytest.raises(QosReadError, match="no table"):
        parse_sl2vl_table("")


def test_smpquery_source_runs_both_queries() -> None:
    calls: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return VLARB if argv[1] == "vlarb" else SL2VL

    tables = Smpquery(run, lid=2, port=5).read()
    assert calls == [["smpquery", "vlarb", "2", "5"], ["smpquery", "sl2vl", "2", "5"]]
    assert tables == QosTables(HIGH, LOW, (0, 2, 1, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7))


def test_tables_are_normalised_for_the_model() -> None:
    assert normalise([(1, 200), (1, 100), (15, 0), (0, 3)], "t") == ((0, 3), (1, 255))
    with pytest.raises(QosReadError, match="VL 9 has weight 4"):
        normalise([(9, 4)], "t")
    with pytest.raises(QosReadError, match=r"not 0\.\.255"):
        normalise([(1, 300)], "t")


def test_opensm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "opensm.conf"
    conf.write_text(
        "log_file /x\nqos TRUE\nqos_vlarb_high 0:4\nqos_vlarb_low 0:0,1:0x40 # hex too\nqos_sl2vl 0,1,2\n"
    )
    assert OpenSMConf(conf).read() == QosTables(((0, 4),), ((0, 0), (1, 64)), (0, 1, 2))
    with pytest.raises(QosReadError, match="no qos_vlarb_high or qos_vlarb_low"):
        parse_opensm_conf("qos TRUE\n")
    with pytest.raises(QosReadError, match="is not VL:weight"):
        parse_opensm_conf("qos_vlarb_high 0:4\nqos_vlarb_low 1-64\n")
    with pytest.raises(QosReadError, match="cannot read"):
        OpenSMConf(tmp_path / "missing.conf").read()


def test_applied_tables_change_the_models_next_iteration_times() -> None:
    model = ClusterModel(shared_uplink_spec())  # hi on VL1, lo on VL0, 64:64
    hi, lo = model.submit(chatty("hi")), model.submit(chatty("lo"))
    before = {m.job: m.iteration_seconds for m in model.job_metrics()}
    change = apply_qos(model, QosTables(HIGH, LOW))  # VL0: 4 + 0, VL1: 0 + 200
    assert change is not None and change.after.vl_weights()[:2] == (4, 200)
    assert model.vl_weights()[:2] == (4, 200)
    after = {m.job: m.iteration_seconds for m in model.job_metrics()}
    assert after[hi] < before[hi] and after[lo] > before[lo]
    assert apply_qos(model, QosTables(HIGH, LOW)) is None  # already in force: no event, no reshare
    sl_change = apply_qos(model, QosTables(HIGH, LOW, (1, 0, 2, 3, 4, 5, 6, 7)))
    assert sl_change is not None and model.vl_of_pool("hi") == 0 and model.vl_of_pool("lo") == 1


def test_tables_the_model_refuses_change_nothing() -> None:
    model = ClusterModel(shared_uplink_spec())
    with pytest.raises(QosReadError, match="refuses"):
        apply_qos(model, QosTables(HIGH, LOW, (9,) * 16))
    assert model.vl_weights()[:2] == (64, 64)
