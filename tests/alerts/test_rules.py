"""The rules in alerts/: promtool accepts and passes them, they follow the house style (architecture §3),
every alert is tested just before and just after its `for:`, and every metric they read exists.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from exporter import catalog
from tests.alerts.promql import selectors
from tests.alerts.rulefiles import (
    ALERTS_DIR,
    BUILTIN_METRICS,
    EXTERNAL_METRICS,
    README,
    RUNBOOKS_DIR,
    TARGET_LABELS,
    TESTS_DIR,
    PromtoolFile,
    Rule,
    alert_rules,
    catalog_specs,
    external_metrics,
    fixture_rule_files,
    load_rule_file,
    node_exporter_labels,
    promtool_files,
    recording_rules,
    shipped_rule_files,
    shipped_rules,
)

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian package `prometheus`, 2.42 or newer)"
)

SEVERITIES = frozenset({"critical", "warning", "info"})
CAMEL_CASE = re.compile(r"^(?:[A-Z][a-z0-9]+)+$")
RECORDING_NAME = re.compile(r"^[a-z][a-z0-9_]*:ibpool_[a-z0-9_]+:[a-z0-9_]+$")
RUNBOOK_SECTIONS = ("## Meaning", "## Likely causes", "## How to confirm", "## What to do")

ALERTS = alert_rules()
RECORDS = recording_rules()
ALERT_NAMES = sorted({rule.name for rule in ALERTS})
PROMTOOL_FILES = promtool_files()


def _run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, check=False, cwd=ALERTS_DIR, timeout=300
    )


# ---- promtool ----------------------------------------------------------------------------------------


@needs_promtool
def test_promtool_check_rules_accepts_every_rule_file() -> None:
    paths = [str(f.path) for f in shipped_rule_files() + fixture_rule_files()]
    assert len(paths) >= 2
    result = _run_promtool("check", "rules", *paths)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize("path", [f.path for f in PROMTOOL_FILES], ids=lambda p: p.name)
def test_promtool_unit_tests_pass(path: Path) -> None:
    result = _run_promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_layout() -> None:
    """Rule files at the top of alerts/, promtool tests in alerts/tests/, nothing else looking like either."""
    assert [f.path.name for f in shipped_rule_files()] == ["alert_rules.yml", "recording_rules.yml"]
    assert PROMTOOL_FILES, f"no promtool test files in {TESTS_DIR}"
    assert not list(ALERTS_DIR.glob("*.yaml")), "rule files are *.yml; *.yaml would be mistaken for one"
    assert EXTERNAL_METRICS.is_file()


@pytest.mark.parametrize("test_file", PROMTOOL_FILES, ids=lambda f: f.path.name)
def test_group_eval_order_names_every_group(test_file: PromtoolFile) -> None:
    """promtool evaluates groups in random order otherwise, so a rule reading a recording rule would flap."""
    groups = [g for path in test_file.rule_files for g in load_rule_file(path).groups]
    assert sorted(test_file.group_eval_order) == sorted(groups), test_file.path.name
    recording_first = [
        g for path in test_file.rule_files for g in load_rule_file(path).groups if "alerts" not in g
    ]
    assert list(test_file.group_eval_order[: len(recording_first)]) == recording_first


# ---- house style ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ALERTS, ids=str)
def test_alert_house_style(rule: Rule) -> None:
    assert rule.alert is not None
    assert CAMEL_CASE.match(rule.alert), f"{rule.alert} is not CamelCase"
    assert set(rule.labels) == {"severity"}, "the only static label is severity; the rest come from series"
    assert rule.labels["severity"] in SEVERITIES
    assert set(rule.annotations) >= {"summary", "description", "runbook_url"}
    assert rule.annotations["summary"].strip()
    assert "{{" not in rule.annotations["summary"], "summary must be static"
    assert "{{" in rule.annotations["description"], "description must be templated"
    assert rule.for_seconds >= 60, (
        "every alert has a `for:` of a minute or more, so it can be tested before it"
    )


@pytest.mark.parametrize("rule", ALERTS, ids=str)
def test_runbook_url_points_at_the_runbook_file(rule: Rule) -> None:
    url = rule.annotations["runbook_url"]
    suffix = f"alerts/runbooks/{rule.alert}.md"
    assert re.match(r"^https?://\S+/$", url.removesuffix(suffix)), f"{url} must end in {suffix}"
    assert (RUNBOOKS_DIR / f"{rule.alert}.md").is_file()


def test_runbook_urls_share_one_base() -> None:
    bases = {
        rule.annotations["runbook_url"].removesuffix(f"alerts/runbooks/{rule.alert}.md") for rule in ALERTS
    }
    assert len(bases) == 1, bases


def test_each_alert_and_severity_is_one_rule() -> None:
    keys = [(rule.alert, rule.labels["severity"]) for rule in ALERTS]
    assert len(keys) == len(set(keys)), "promtool's lint rejects two rules with the same name and labels"


@pytest.mark.parametrize("name", ALERT_NAMES)
def test_runbook_has_every_section(name: str) -> None:
    text = (RUNBOOKS_DIR / f"{name}.md").read_text(encoding="utf-8")
    assert text.startswith(f"# {name}\n")
    missing = [s for s in RUNBOOK_SECTIONS if f"\n{s}\n" not in text]
    assert not missing, f"{name}.md lacks {missing}"


def test_no_runbook_without_an_alert() -> None:
    assert sorted(p.stem for p in RUNBOOKS_DIR.glob("*.md")) == ALERT_NAMES


def test_issue_alerts_all_exist() -> None:
    wanted = {
        "IbPortCongested",
        "RocePortCongested",
        "IbWaitCounterSaturated",
        "IbLinkErrorsIncreasing",
        "IbLinkDowned",
        "IbLinkDegraded",
        "IbPortDown",
        "GpuXidError",
        "GpuFellOffBus",
        "GpuEccUncorrectable",
        "GpuThermalThrottling",
        "GpuPoolImbalanced",
        "GpuPoolLowUtilization",
        "IbpoolExporterDown",
        "IbpoolCollectorFailing",
        "IbpoolFabricSweepStale",
        "IbpoolProposalPendingTooLong",
        "IbpoolChangeApplyFailed",
    }
    assert wanted <= set(ALERT_NAMES), wanted - set(ALERT_NAMES)
    severities = {rule.labels["severity"] for rule in ALERTS if rule.alert == "IbPortCongested"}
    assert severities == {"warning", "critical"}


def test_readme_lists_every_alert_and_recording_rule() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [name for name in ALERT_NAMES + [r.name for r in RECORDS] if f"`{name}`" not in text]
    assert not missing, f"alerts/README.md does not mention {missing}"


# ---- recording rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RECORDS, ids=str)
def test_recording_rule_name_is_level_metric_operation(rule: Rule) -> None:
    assert RECORDING_NAME.match(rule.name), f"{rule.name} is not level:ibpool_metric:operation"


def test_recording_rule_names_are_unique() -> None:
    names = [rule.name for rule in RECORDS]
    assert len(names) == len(set(names))


def test_every_recording_rule_has_a_promql_expr_test() -> None:
    tested = {
        s.name
        for test_file in PROMTOOL_FILES
        for group in test_file.groups
        for check in group.expr_checks
        for s in selectors(check.expr)
    }
    missing = sorted({rule.name for rule in RECORDS} - tested)
    assert not missing, f"no promql_expr_test reads {missing}"


# ---- every alert tested just before and just after its `for:` ---------------------------------------------


def _boundary_tested(name: str, severity: str, for_seconds: float) -> bool:
    """A test group has ALERTS_FOR_STATE = t0 for the alert at t0 + for - 1m, where it is not yet firing,
    and a check at t0 + for + 1m where it is."""
    for test_file in PROMTOOL_FILES:
        for group in test_file.groups:
            firing: dict[float, bool] = {}
            for alert_check in group.alert_checks:
                if alert_check.alertname == name:
                    fires = any(a.labels.get("severity") == severity for a in alert_check.alerts)
                    firing[alert_check.eval_seconds] = firing.get(alert_check.eval_seconds, False) or fires
            for check in group.expr_checks:
                for sample in check.samples:
                    if sample.name != "ALERTS_FOR_STATE" or sample.labels.get("alertname") != name:
                        continue
                    if sample.labels.get("severity") != severity:
                        continue
                    before = sample.value + for_seconds - 60
                    after = sample.value + for_seconds + 60
                    if check.eval_seconds == before and firing.get(before) is False and firing.get(after):
                        return True
    return False


@pytest.mark.parametrize("rule", ALERTS, ids=lambda r: f"{r.alert}-{r.labels['severity']}")
def test_alert_tested_just_before_and_after_its_for(rule: Rule) -> None:
    assert rule.alert is not None
    assert _boundary_tested(rule.alert, rule.labels["severity"], rule.for_seconds), (
        f"{rule.alert} ({rule.labels['severity']}, for {rule.for_seconds:.0f}s): no test group checks "
        "ALERTS_FOR_STATE = t0 and the alert silent at t0 + for - 1m and firing at t0 + for + 1m"
    )


# ---- metric names and labels -------------------------------------------------------------------------


def _known_labels() -> dict[str, frozenset[str]]:
    """Metric name -> the label names its series may carry, for every metric that is not a recording rule."""
    known = {name: frozenset(spec.labels) | TARGET_LABELS for name, spec in catalog_specs().items()}
    for name, metric in external_metrics().items():
        known[name] = frozenset(metric.labels) | TARGET_LABELS
    for name, labels in BUILTIN_METRICS.items():
        known[name] = labels | TARGET_LABELS
    for name, labels in node_exporter_labels().items():
        known[name] = labels | TARGET_LABELS
    return known


def test_catalog_is_read() -> None:
    specs = catalog_specs()
    assert "ibpool_infiniband_port_transmit_wait_total" in specs  # from the IB_COUNTERS dict
    assert "ibpool_pool_pending_gpus" in specs
    assert all(spec.kind != "counter" or name.endswith("_total") for name, spec in specs.items())


def test_every_metric_a_rule_reads_exists() -> None:
    known = set(_known_labels()) | {rule.name for rule in RECORDS}
    rules = shipped_rules() + [r for f in fixture_rule_files() for r in f.rules]
    unknown = [(str(rule), s.name) for rule in rules for s in selectors(rule.expr) if s.name not in known]
    assert not unknown, f"metrics in no catalog, recording rule or alerts/external/metrics.yaml: {unknown}"


def test_label_matchers_name_labels_the_metric_has() -> None:
    known = _known_labels()
    wrong = [
        (str(rule), s.name, m.label)
        for rule in shipped_rules()
        for s in selectors(rule.expr)
        if s.name in known
        for m in s.matchers
        if m.label not in known[s.name]
    ]
    assert not wrong, wrong


def test_saturation_matchers_name_32_bit_counters() -> None:
    """`counter` on the saturation flags is a sysfs counter name the exporter flags."""
    flags = {catalog.IB_COUNTER_SATURATED.name, catalog.FABRIC_COUNTER_SATURATED.name}
    values = [
        m.value
        for rule in shipped_rules()
        for s in selectors(rule.expr)
        if s.name in flags
        for m in s.matchers
        if m.label == "counter"
    ]
    assert values
    assert set(values) <= catalog.IB_32BIT_COUNTERS


@pytest.mark.parametrize("test_file", PROMTOOL_FILES, ids=lambda f: f.path.name)
def test_input_series_look_like_real_ones(test_file: PromtoolFile) -> None:
    """Series use real metric names and carry every label the catalog gives them.

    A label the exporter writes that clashes with a target label arrives as `exported_<label>`.
    """
    known = _known_labels()
    specs = catalog_specs()
    problems: list[str] = []
    for group in test_file.groups:
        for series in group.series:
            if series.name not in known:
                problems.append(f"tests[{group.index}]: unknown metric {series.name}")
                continue
            exported = {f"exported_{label}" for label in known[series.name] & TARGET_LABELS}
            extra = set(series.labels) - known[series.name] - exported
            if extra:
                problems.append(f"tests[{group.index}]: {series.name} has unknown labels {sorted(extra)}")
            spec = specs.get(series.name)
            if spec is not None:
                have = {label.removeprefix("exported_") for label in series.labels}
                missing = set(spec.labels) - have
                if missing:
                    problems.append(f"tests[{group.index}]: {series.name} lacks {sorted(missing)}")
    assert not problems, problems


def test_external_metrics_are_well_formed_and_not_in_the_catalog() -> None:
    specs = catalog_specs()
    metrics = external_metrics()
    assert metrics
    for name, metric in metrics.items():
        assert name not in specs, f"{name} is in exporter/catalog.py now: delete it from {EXTERNAL_METRICS}"
        assert name.startswith("ibpool_")
        assert metric.kind in {"gauge", "counter", "info"}
        assert (metric.kind == "counter") == name.endswith("_total")
        assert metric.producer in {"recommender", "scheduler_hooks"}
        assert metric.help.strip()
