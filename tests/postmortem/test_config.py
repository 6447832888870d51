"""`ibpool postmortem`'s settings: flags over a YAML file, loaded once, every problem reported at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from foundation.errors import ConfigError
from postmortem.cli import main
from postmortem.config import OPTIONS, SETTINGS, PostmortemConfig, load, parser


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ibpool.db"
    path.write_bytes(b"")  # the checks only ask that it is a file; opening it is the report's job
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def problems(argv: list[str]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(argv)
    return caught.value.problems


def test_defaults_are_those_of_the_flags_before(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    cfg = load(["--run", str(run), "--out", "r.html"])
    assert cfg == PostmortemConfig(run=run, out=Path("r.html"))
    assert (cfg.margin, cfg.step, cfg.effect_window, cfg.top) == ("30m", "60s", "10m", 6)
    assert (cfg.influxdb_org, cfg.influxdb_bucket, cfg.title) == ("", "ibpool", "ibpool post-mortem")
    assert (cfg.margin_seconds, cfg.step_seconds, cfg.effect_window_seconds) == (1800.0, 60.0, 600.0)
    assert cfg.bounds is None and cfg.rules == ()


def test_a_yaml_file_gives_the_same_config_as_the_flags(tmp_path: Path, db: Path) -> None:
    token = write(tmp_path / "token", "secret\n")
    flags = [
        "--influxdb.url", "http://influx:8086", "--influxdb.org", "ops", "--influxdb.bucket", "b",
        "--influxdb.token-file", str(token), "--db", str(db), "--from", "2024-05-01T10:00:00+00:00",
        "--to", "1714561200", "--alert", "IbPortCongested", "--margin", "15m",
        "--out", str(tmp_path / "r.html"), "--top", "3", "--step", "30", "--effect-window", "5m",
        "--title", "May outage",
        "--runbook.url", "https://wiki/runbooks", "--grafana.url", "https://grafana",
        "--prometheus.link-url", "https://prom", "--log.level", "warning",
    ]  # fmt: skip
    config = write(
        tmp_path / "postmortem.yaml",
        f"""
influxdb: {{url: "http://influx:8086", org: ops, bucket: b, token_file: token}}
db: {db.name}
from: 2024-05-01T10:00:00Z    # YAML reads these two as a timestamp and a number
to: 1714561200
alert: IbPortCongested
margin: 15m
out: r.html
top: 3
step: 30
effect_window: 5m
title: May outage
runbook: {{url: "https://wiki/runbooks"}}
grafana: {{url: "https://grafana"}}
prometheus: {{link_url: "https://prom"}}
log: {{level: warning}}
""",
    )
    from_flags = load(flags)
    from_file = load(["--config.file", str(config)])
    assert from_file == from_flags  # relative paths in the file are taken from the file's folder
    assert from_file.bounds == (1714557600.0, 1714561200.0)
    assert from_file.step_seconds == 30.0
    assert load(["--config", str(config)]) == from_file  # `--config` is accepted for `--config.file`


def test_every_option_has_a_flag_and_a_yaml_key() -> None:
    dests = {a.dest for a in parser()._actions} - {"help", "config_file", "rules"}
    assert dests == {field for field, _ in SETTINGS.yaml_keys.values()}
    assert {f.name for f in dataclasses.fields(PostmortemConfig)} == dests | {"rules"}
    for option in OPTIONS:  # the rule docs/postmortem.md gives: no dashes, `-` written `_`, a dot a level
        assert option.yaml_key == option.flag.removeprefix("--").replace("-", "_"), option


def test_flags_given_win_over_the_file(tmp_path: Path, db: Path) -> None:
    config = write(
        tmp_path / "pm.yaml",
        f"prometheus: {{url: 'http://from-file:9090'}}\ndb: {db}\nmargin: 5m\nstep: 15s\nout: a.html\n",
    )
    cfg = load(["--config.file", str(config), "--margin", "1h", "--out", "b.html"])
    assert (cfg.prometheus_url, cfg.db, cfg.step) == ("http://from-file:9090", db, "15s")
    assert (cfg.margin, cfg.out) == ("1h", Path("b.html"))


def test_rules_stay_a_repeatable_flag(tmp_path: Path, db: Path) -> None:
    argv = ["--prometheus.url", "http://p", "--db", str(db), "--out", "r.html"]
    cfg = load([*argv, "--rules", "a.yml", "--rules", "dir"])
    assert cfg.rules == (Path("a.yml"), Path("dir"))
    config = write(tmp_path / "pm.yaml", "rules: [a.yml]\n")
    assert problems([*argv, "--config.file", str(config)]) == [f"{config}: rules: unknown key"]


def test_two_bad_values_are_reported_together_with_their_origin(tmp_path: Path, db: Path) -> None:
    config = write(tmp_path / "pm.yaml", f"prometheus: {{url: 'http://p'}}\ndb: {db}\nstep: soon\n")
    found = problems(["--config.file", str(config), "--margin", "5x", "--out", "r.html"])
    assert found == [
        "flag: margin: --margin: not a duration (like 30m): '5x'",
        f"{config}: step: --step: not a duration (like 30m): 'soon'",
    ]


def test_options_that_depend_on_each_other_are_checked_after_loading(tmp_path: Path, db: Path) -> None:
    config = write(tmp_path / "pm.yaml", "prometheus: {url: 'http://p'}\n")
    found = problems(["--config.file", str(config), "--run", str(tmp_path), "--db", str(db)])
    assert found == [
        f"{config}: prometheus_url: --run reads its own store; --prometheus.url is not for it",
        "flag: db: --run reads its own store; --db is not for it",
        "default: out: give --out FILE (the HTML file to write)",
    ]
    store = ["--out", "r.html"]
    assert problems(["--prometheus.url", "http://p", "--influxdb.url", "http://i", *store]) == [
        "flag: influxdb_url: one store at a time: --prometheus.url or --influxdb.url",
        "default: db: a store needs --db (the proposal store with the audit log)",
    ]
    missing = tmp_path / "none.db"
    window = ["--from", "2024-05-01T12:00:00Z", "--to", "2024-05-01T11:00:00Z", "--step", "0s"]
    assert problems(["--influxdb.url", "http://i", "--db", str(missing), *window, *store]) == [
        f"flag: db: no proposal store at {missing}",
        "flag: end: --to must be after --from",
        "flag: step: --step: must be a finite duration above 0: '0s'",
    ]
    assert problems(["--run", str(tmp_path), "--from", "yesterday", *store]) == [
        "flag: start: --from and --to go together",
        "flag: start: --from: not a time (RFC 3339 or Unix seconds): 'yesterday'",
    ]
    token = tmp_path / "no-token"
    influx = ["--influxdb.url", "http://i", "--influxdb.token-file", str(token), "--db", str(db)]
    assert problems([*influx, *store]) == [f"flag: influxdb_token_file: file not found: {token}"]


def test_main_lists_every_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    config = write(tmp_path / "pm.yaml", "margin: [30m]\nstore: x\n")
    argv = ["--config.file", str(config), "--run", str(tmp_path / "nope"), "--step=-1m", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "ibpool postmortem: invalid configuration:",
        f"  - {config}: margin: must be a non-empty string, got ['30m']",
        f"  - {config}: store: unknown key",
        f"  - flag: run: no run directory at {tmp_path / 'nope'}",
        "  - flag: step: --step: negative duration: '-1m'",
    ]
    assert not out.exists()
    assert main(["--top", "many"]) == 2  # a flag of the wrong type is argparse's usage error
