"""What lives in alerts/: rule files, promtool test files, runbooks, the external metrics list; and the
metric catalog the rules are checked against.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import yaml

from exporter import catalog
from exporter.collectors.infiniband import MIRRORED
from foundation.exposition import MetricSpec

ALERTS_DIR = Path(__file__).resolve().parents[2] / "alerts"
TESTS_DIR = ALERTS_DIR / "tests"
FIXTURES_DIR = TESTS_DIR / "fixtures"
RUNBOOKS_DIR = ALERTS_DIR / "runbooks"
EXTERNAL_METRICS = ALERTS_DIR / "external" / "metrics.yaml"
README = ALERTS_DIR / "README.md"

# Labels Prometheus attaches to scraped series: `job` and `instance`, and `node`, `pool` and `cluster` from
# the scrape configuration (the node targets of `ibpool targets`, alerts/README.md).
TARGET_LABELS = frozenset({"job", "instance", "node", "pool", "cluster"})
# Series Prometheus itself makes.
BUILTIN_METRICS: Mapping[str, frozenset[str]] = {"up": frozenset()}

_DURATION = re.compile(r"([0-9]+)(ms|[smhdwy])")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class AlertsLayoutError(ValueError):
    """A file in alerts/ does not have the shape this project uses."""


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration such as `90s`, `10m` or `1h30m`."""
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise AlertsLayoutError(f"not a duration: {text!r}")
    return total


def _mapping(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise AlertsLayoutError(f"{where}: expected a mapping, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _sequence(value: object, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AlertsLayoutError(f"{where}: expected a list, got {type(value).__name__}")
    return list(value)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise AlertsLayoutError(f"{where}: expected a scalar, got {type(value).__name__}")
    return str(value)


def _strings(value: object, where: str) -> dict[str, str]:
    return {k: _text(v, f"{where}.{k}") for k, v in _mapping(value or {}, where).items()}


def load_yaml(path: Path) -> dict[str, object]:
    """A YAML file whose top level is a mapping."""
    with path.open(encoding="utf-8") as handle:
        return _mapping(yaml.safe_load(handle), str(path))


# ---- rule files ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One recording or alerting rule."""

    path: Path
    group: str
    expr: str
    record: str | None = None
    alert: str | None = None
    for_seconds: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The recorded metric or the alert name."""
        return self.record or self.alert or ""

    def __str__(self) -> str:
        return f"{self.path.name}:{self.group}:{self.name}"


@dataclass(frozen=True)
class RuleFile:
    """A Prometheus rule file."""

    path: Path
    groups: tuple[str, ...]
    rules: tuple[Rule, ...]


def load_rule_file(path: Path) -> RuleFile:
    data = load_yaml(path)
    groups: list[str] = []
    rules: list[Rule] = []
    for i, raw_group in enumerate(_sequence(data.get("groups"), f"{path}: groups")):
        group = _mapping(raw_group, f"{path}: groups[{i}]")
        name = _text(group.get("name"), f"{path}: groups[{i}].name")
        groups.append(name)
        for j, raw_rule in enumerate(_sequence(group.get("rules"), f"{path}: {name}.rules")):
            where = f"{path}: {name}.rules[{j}]"
            rule = _mapping(raw_rule, where)
            rules.append(
                Rule(
                    path=path,
                    group=name,
                    expr=_text(rule.get("expr"), f"{where}.expr"),
                    record=_text(rule["record"], f"{where}.record") if "record" in rule else None,
                    alert=_text(rule["alert"], f"{where}.alert") if "alert" in rule else None,
                    for_seconds=parse_duration(_text(rule["for"], f"{where}.for")) if "for" in rule else 0.0,
                    labels=_strings(rule.get("labels"), f"{where}.labels"),
                    annotations=_strings(rule.get("annotations"), f"{where}.annotations"),
                )
            )
    return RuleFile(path, tuple(groups), tuple(rules))


def shipped_rule_files() -> list[RuleFile]:
    """The rule files an operator loads: every `alerts/*.yml`."""
    return [load_rule_file(p) for p in sorted(ALERTS_DIR.glob("*.yml"))]


def fixture_rule_files() -> list[RuleFile]:
    """Rule files only the promtool tests load."""
    return [load_rule_file(p) for p in sorted(FIXTURES_DIR.glob("*.yml"))]


def shipped_rules() -> list[Rule]:
    return [rule for rule_file in shipped_rule_files() for rule in rule_file.rules]


def alert_rules() -> list[Rule]:
    return [rule for rule in shipped_rules() if rule.alert is not None]


def recording_rules() -> list[Rule]:
    return [rule for rule in shipped_rules() if rule.record is not None]


# ---- promtool test files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpectedAlert:
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


@dataclass(frozen=True)
class AlertCheck:
    """An alert_rule_test entry: which alerts fire at eval_time."""

    eval_seconds: float
    alertname: str
    alerts: tuple[ExpectedAlert, ...]


@dataclass(frozen=True)
class ExpectedSample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class ExprCheck:
    """A promql_expr_test entry."""

    eval_seconds: float
    expr: str
    samples: tuple[ExpectedSample, ...]


@dataclass(frozen=True)
class InputSeries:
    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True)
class PromtoolGroup:
    """One entry of a test file's `tests:` list."""

    index: int
    series: tuple[InputSeries, ...]
    alert_checks: tuple[AlertCheck, ...]
    expr_checks: tuple[ExprCheck, ...]


@dataclass(frozen=True)
class PromtoolFile:
    path: Path
    rule_files: tuple[Path, ...]
    group_eval_order: tuple[str, ...]
    groups: tuple[PromtoolGroup, ...]


_SERIES = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(?:\{(.*)\})?\s*$", re.S)
_LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_series(text: str) -> tuple[str, dict[str, str]]:
    """`name{a="b", ...}` as promtool writes series and expected samples."""
    match = _SERIES.match(text)
    if match is None:
        raise AlertsLayoutError(f"not a series: {text!r}")
    labels = {m.group(1): m.group(2) for m in _LABEL_PAIR.finditer(match.group(2) or "")}
    return match.group(1) or "", labels


def load_test_file(path: Path) -> PromtoolFile:
    data = load_yaml(path)
    rule_files = tuple(
        (path.parent / _text(f, f"{path}: rule_files")).resolve()
        for f in _sequence(data.get("rule_files"), f"{path}: rule_files")
    )
    order = tuple(
        _text(g, f"{path}: group_eval_order") for g in _sequence(data.get("group_eval_order"), "order")
    )
    groups: list[PromtoolGroup] = []
    for i, raw in enumerate(_sequence(data.get("tests"), f"{path}: tests")):
        where = f"{path}: tests[{i}]"
        group = _mapping(raw, where)
        series = []
        for raw_series in _sequence(group.get("input_series"), f"{where}.input_series"):
            text = _text(_mapping(raw_series, f"{where}.input_series").get("series"), f"{where}.series")
            name, labels = parse_series(text)
            series.append(InputSeries(name, labels))
        alert_checks = []
        for raw_check in _sequence(group.get("alert_rule_test"), f"{where}.alert_rule_test"):
            check = _mapping(raw_check, f"{where}.alert_rule_test")
            expected = tuple(
                ExpectedAlert(
                    _strings(_mapping(a, where).get("exp_labels"), f"{where}.exp_labels"),
                    _strings(_mapping(a, where).get("exp_annotations"), f"{where}.exp_annotations"),
                )
                for a in _sequence(check.get("exp_alerts"), f"{where}.exp_alerts")
            )
            alert_checks.append(
                AlertCheck(
                    parse_duration(_text(check.get("eval_time"), f"{where}.eval_time")),
                    _text(check.get("alertname"), f"{where}.alertname"),
                    expected,
                )
            )
        expr_checks = []
        for raw_check in _sequence(group.get("promql_expr_test"), f"{where}.promql_expr_test"):
            check = _mapping(raw_check, f"{where}.promql_expr_test")
            samples = []
            for raw_sample in _sequence(check.get("exp_samples"), f"{where}.exp_samples"):
                sample = _mapping(raw_sample, f"{where}.exp_samples")
                name, labels = parse_series(_text(sample.get("labels"), f"{where}.labels"))
                samples.append(
                    ExpectedSample(name, labels, float(_text(sample.get("value"), f"{where}.value")))
                )
            expr_checks.append(
                ExprCheck(
                    parse_duration(_text(check.get("eval_time"), f"{where}.eval_time")),
                    _text(check.get("expr"), f"{where}.expr"),
                    tuple(samples),
                )
            )
        groups.append(PromtoolGroup(i, tuple(series), tuple(alert_checks), tuple(expr_checks)))
    return PromtoolFile(path, rule_files, order, tuple(groups))


def promtool_files() -> list[PromtoolFile]:
    """Every promtool test file, `alerts/tests/*.yml`."""
    return [load_test_file(p) for p in sorted(TESTS_DIR.glob("*.yml"))]


# ---- metric names ----------------------------------------------------------------------------------


def _specs(value: object) -> Iterator[MetricSpec]:
    if isinstance(value, MetricSpec):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _specs(item)
    elif isinstance(value, tuple | list | frozenset | set):
        for item in value:
            yield from _specs(item)


def node_exporter_labels() -> dict[str, frozenset[str]]:
    """node_exporter's infiniband families (rules read them beside node_exporter): name -> labels.

    They are the twins of the families ibpool mirrors, `node_infiniband_*` for `ibpool_infiniband_*`,
    with the same labels (tests/integration/test_node_exporter_parity.py checks it on the real program).
    """
    return {"node_" + spec.name.removeprefix("ibpool_"): frozenset(spec.labels) for spec in MIRRORED}


def catalog_specs(module: ModuleType = catalog) -> dict[str, MetricSpec]:
    """Every MetricSpec the catalog module defines, by name (dict and tuple values included)."""
    out: dict[str, MetricSpec] = {}
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        for spec in _specs(value):
            out[spec.name] = spec
    return out


@dataclass(frozen=True)
class ExternalMetric:
    name: str
    kind: str
    labels: tuple[str, ...]
    producer: str
    help: str


def external_metrics() -> dict[str, ExternalMetric]:
    """The metrics alerts/ reads that other parts of ibpool will export (alerts/external/metrics.yaml)."""
    data = load_yaml(EXTERNAL_METRICS)
    out: dict[str, ExternalMetric] = {}
    for i, raw in enumerate(_sequence(data.get("metrics"), f"{EXTERNAL_METRICS}: metrics")):
        where = f"{EXTERNAL_METRICS}: metrics[{i}]"
        entry = _mapping(raw, where)
        metric = ExternalMetric(
            name=_text(entry.get("name"), f"{where}.name"),
            kind=_text(entry.get("type"), f"{where}.type"),
            labels=tuple(_text(label, f"{where}.labels") for label in _sequence(entry.get("labels"), where)),
            producer=_text(entry.get("producer"), f"{where}.producer"),
            help=_text(entry.get("help"), f"{where}.help"),
        )
        out[metric.name] = metric
    return out
