"""The recommender service exports the desired VL weights its QoS reader read, and only current ones."""

from __future__ import annotations

import time
from pathlib import Path

from foundation.exposition import render
from proposals.store import Store
from recommender.cycle import Recommender
from recommender.service import RecommenderCollector, Service
from recommender.signals.model import POOLS, QOS, Missing, Signals
from recommender.signals.qos import OpenSmQosFile, QosError

CONF = """\
qos TRUE
qos_vlarb_high 0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0
qos_vlarb_low 0:0,1:64,2:32,3:16,4:8,5:4,6:2,7:1
qos_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
"""
LOW = {0: 0, 1: 64, 2: 32, 3: 16, 4: 8, 5: 4, 6: 2, 7: 1}
HIGH = {0: 4, **dict.fromkeys(range(1, 8), 0)}


class QosOnlySource:
    """A signal source with no pool data: QoS from a real OpenSmQosFile reader, optionally stale."""

    name = "test"

    def __init__(self, conf: Path) -> None:
        self.reader = OpenSmQosFile(conf, {})
        self.stale = False
        self.broken = False

    def fetch(self) -> Signals:
        if self.broken:
            raise RuntimeError("source exploded")
        missing = [Missing(POOLS, "not in this test")]
        try:
            qos = self.reader.read()
        except QosError as exc:
            return Signals(time.time(), 60.0, self.name, qos=None, missing=(*missing, Missing(QOS, str(exc))))
        if self.stale:
            missing.append(Missing(QOS, "stale: 900 s old"))
        return Signals(time.time(), 60.0, self.name, qos=qos, missing=tuple(missing))

    def reset(self) -> None:
        """Nothing remembered."""


def _desired(service: Service) -> dict[tuple[str, int], float]:
    text = render(RecommenderCollector(service.db, service.stats, service.lock).collect())
    out: dict[tuple[str, int], float] = {}
    for line in text.splitlines():
        if line.startswith("ibpool_vl_weight{"):
            labels, value = line.split("} ")
            got = dict(item.split("=") for item in labels.removeprefix("ibpool_vl_weight{").split(","))
            assert set(got) == {"table", "vl", "source"} and got["source"] == '"desired"'
            out[(got["table"].strip('"'), int(got["vl"].strip('"')))] = float(value)
    return out


def _service(tmp_path: Path) -> tuple[Service, QosOnlySource]:
    conf = tmp_path / "opensm.conf"
    conf.write_text(CONF)
    source = QosOnlySource(conf)
    service = Service(lambda store: Recommender(source, store), str(tmp_path / "p.db"), 60.0, "127.0.0.1:0")
    return service, source


def test_desired_weights_follow_the_qos_file_and_vanish_when_unreadable(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    Store(service.db).close()  # as serve() does before the first scrape
    assert _desired(service) == {}  # before the first cycle
    service.cycle()
    expected = {**{("high", vl): w for vl, w in HIGH.items()}, **{("low", vl): w for vl, w in LOW.items()}}
    assert _desired(service) == expected

    (tmp_path / "opensm.conf").write_text(CONF.replace("1:64", "1:100").replace("0:4,", "0:8,"))
    service.cycle()
    assert _desired(service)[("low", 1)] == 100 and _desired(service)[("high", 0)] == 8

    (tmp_path / "opensm.conf").unlink()
    service.cycle()
    assert service.stats.last is not None and service.stats.last.ok
    assert _desired(service) == {}  # not read: no series, not the last values


def test_stale_qos_or_a_failed_cycle_drops_the_series(tmp_path: Path) -> None:
    service, source = _service(tmp_path)
    service.cycle()
    assert _desired(service)
    source.stale = True
    service.cycle()
    assert _desired(service) == {}
    source.stale = False
    service.cycle()
    assert _desired(service)
    source.broken = True
    service.cycle()
    assert service.stats.failed and _desired(service) == {}


def test_an_empty_high_table_is_all_zero(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    (tmp_path / "opensm.conf").write_text(CONF.replace("qos_vlarb_high 0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0", ""))
    service.cycle()
    assert _desired(service) == {}  # OpenSmQosFile needs both keys: QoS missing, so nothing exported
    (tmp_path / "opensm.conf").write_text(CONF.replace("0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0", "0:0"))
    service.cycle()
    assert {k: v for k, v in _desired(service).items() if k[0] == "high"} == {
        ("high", vl): 0 for vl in range(8)
    }
