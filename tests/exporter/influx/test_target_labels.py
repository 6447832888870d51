"""Target labels on pushed points: parsed and checked, defaults, and Prometheus' `exported_` renaming."""

from __future__ import annotations

import pytest

from exporter.config import SETTINGS
from exporter.influx import target_labels
from exporter.influx.config import push_settings
from exporter.influx.lineproto import LineEncoder
from foundation.errors import ConfigError
from foundation.exposition import MetricFamily, MetricSpec

JOB_INFO = MetricSpec("ibpool_gpu_job_info", "info", "h", ("gpu", "job", "pool"))
UP = MetricSpec("ibpool_gpu_up", "gauge", "h", ("gpu",))


def test_parse_keeps_order_and_reports_every_problem() -> None:
    labels, problems = target_labels.parse(" job=ibpool-node , cluster=gpu-a,instance=")
    assert labels == (("job", "ibpool-node"), ("cluster", "gpu-a"), ("instance", ""))
    assert problems == []
    _, problems = target_labels.parse("novalue,__name__=x,9a=b,job=a,job=b")
    assert len(problems) == 4
    assert "'novalue' is not name=value" in problems[0]
    assert "'__name__' is not a label name" in problems[1]
    assert "'9a' is not a label name" in problems[2]
    assert "'job' given twice" in problems[3]


def test_defaults_are_the_shipped_scrape_job_and_the_host_and_can_be_left_out() -> None:
    assert target_labels.with_defaults((), "gpu017") == (
        ("instance", "gpu017"),
        ("job", "ibpool-node"),
        ("node", "gpu017"),
    )
    given = (("cluster", "gpu-a"), ("instance", ""), ("job", "ibpool-exporter"))
    assert target_labels.with_defaults(given, "gpu017") == (
        ("cluster", "gpu-a"),
        ("job", "ibpool-exporter"),
        ("node", "gpu017"),
    )


def test_a_clashing_own_label_becomes_exported_as_prometheus_renames_it() -> None:
    target = (("job", "ibpool-node"), ("node", "n1"), ("pool", "hi"))
    own = [("gpu", "0"), ("job", "1234"), ("pool", "lo")]
    assert dict(target_labels.apply(own, target)) == {
        "gpu": "0",
        "exported_job": "1234",
        "exported_pool": "lo",
        "job": "ibpool-node",
        "node": "n1",
        "pool": "hi",
    }
    # the renamed name is taken too: prefixed again
    own = [("job", "1"), ("exported_job", "2")]
    assert dict(target_labels.apply(own, (("job", "j"),))) == {
        "exported_job": "2",
        "exported_exported_job": "1",
        "job": "j",
    }
    assert target_labels.apply(own, ()) == own


def test_the_encoder_adds_the_target_labels_to_every_line() -> None:
    info, up = MetricFamily(JOB_INFO), MetricFamily(UP)
    info.add_info(("0", "1234", "lo"))
    up.add(("0",), 1)
    encoder = LineEncoder(target=(("instance", "n1"), ("job", "ibpool-node"), ("node", "n1")))
    (chunk,), _ = encoder.encode([info, up], 5)
    assert chunk.payload.decode().splitlines() == [
        "ibpool_gpu_job_info,exported_job=1234,gpu=0,instance=n1,job=ibpool-node,node=n1,pool=lo value=1 5",
        "ibpool_gpu_up,gpu=0,instance=n1,job=ibpool-node,node=n1 value=1 5",
    ]


def test_the_flag_reaches_the_push_settings_over_the_defaults() -> None:
    cfg = SETTINGS.load(["--influx.url", "http://vm:8428", "--influx.labels", "cluster=gpu-a,instance="])
    settings = push_settings(cfg.influx)
    assert settings is not None
    host = target_labels.short_hostname()
    assert dict(settings.target_labels) == {"cluster": "gpu-a", "job": "ibpool-node", "node": host}
    with pytest.raises(ConfigError, match=r"influx\.labels: 'x' is not name=value"):
        SETTINGS.load(["--influx.url", "http://vm:8428", "--influx.labels", "x"])
