"""`ibpool recommend`: one cycle (`--once`) or a schedule with metrics; flags over an optional YAML file.

    ibpool recommend --once (--prometheus.url URL | --embedded.targets URL) [--db PATH] [--policy FILE]
                            [--json]
    ibpool recommend [--config.file FILE] [--recommend.interval-seconds S] [--web.listen-address HOST:PORT]

The embedded source scrapes the exporters listed by an http_sd targets URL. The hysteresis memory is kept
beside the store (`<db>.recommender-state.json`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from foundation.errors import ConfigError
from foundation.logs import configure_logging
from foundation.service import config_failed, until_signal, web_config_of
from foundation.settings import Bad, CommandSettings, Option
from proposals.approval_config import ApprovalConfig, load_approval_config
from proposals.errors import ApprovalConfigError, StoreError
from proposals.store import Store
from recommender.cycle import CycleResult, Recommender, state_path_for
from recommender.policies.quota import QuotaParams, QuotaPolicy
from recommender.service import Service
from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from recommender.signals.prometheus import PrometheusSettings, PrometheusSource
from recommender.signals.qos import OpenSmQosFile, QosReader
from recommender.signals.source import SignalSource

log = logging.getLogger(__name__)

DEFAULT_DB = Path("/var/lib/ibpool/ibpool.db")
DEFAULT_LISTEN = ":9473"  # after the node (9470), fabric (9471) and scheduler (9472) exporters


@dataclass(frozen=True)
class RecommendConfig:
    """Parsed configuration (frozen)."""

    prometheus_url: str | None = None
    embedded_targets: str | None = None
    embedded_fabric: str | None = None
    embedded_scheduler: str | None = None
    window_seconds: float = 5.0
    qos_file: Path | None = None
    db: Path = DEFAULT_DB
    policy: Path | None = None
    interval_seconds: float = 60.0
    max_age_seconds: float = 120.0
    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    log_level: str = "info"
    priorities: dict[str, int] = field(default_factory=dict)
    pool_sl: dict[str, int] = field(default_factory=dict)


OPTIONS: tuple[Option, ...] = (
    Option("--prometheus.url", "prometheus.url", "prometheus_url", str,
           "read the signals from this Prometheus (or any PromQL endpoint)"),
    Option("--embedded.targets", "embedded.targets", "embedded_targets", str,
           "or scrape the exporters listed by this http_sd targets URL"),
    Option("--embedded.fabric", "embedded.fabric", "embedded_fabric", str,
           "fabric exporter metrics URL (default: /fabric/metrics on the targets host)"),
    Option("--embedded.scheduler", "embedded.scheduler", "embedded_scheduler", str,
           "scheduler exporter metrics URL (default: /scheduler/metrics on the targets host)"),
    Option("--embedded.window-seconds", "embedded.window_seconds", "window_seconds", float,
           "seconds between the two scrapes of the first cycle (5)"),
    Option("--qos.file", "qos.file", "qos_file", Path, "opensm.conf holding the QoS tables in force"),
    Option("--db", "db", "db", Path, "proposal store ($IBPOOL_DB, else /var/lib/ibpool/ibpool.db)"),
    Option("--policy", "policy", "policy", Path, "auto-approval policy file"),
    Option("--recommend.interval-seconds", "interval_seconds", "interval_seconds", float,
           "seconds between cycles (60)", hidden=("--interval",)),
    Option("--signals.max-age-seconds", "max_age_seconds", "max_age_seconds", float,
           "signals older than this many seconds count as missing (120)", hidden=("--max-age",)),
)  # fmt: skip


def validate(cfg: RecommendConfig, bad: Bad) -> None:
    """The recommender's own checks (the web ones are shared)."""
    if cfg.interval_seconds <= 0:
        bad("interval_seconds", "must be > 0")
    if cfg.window_seconds <= 0:
        bad("window_seconds", "must be > 0")
    if cfg.max_age_seconds <= 0:
        bad("max_age_seconds", "must be > 0")
    if cfg.policy is not None and not cfg.policy.is_file():
        bad("policy", f"file not found: {cfg.policy}")
    if not cfg.prometheus_url and not cfg.embedded_targets:
        bad(
            "prometheus_url", "give a Prometheus URL (--prometheus.url) or a targets URL (--embedded.targets)"
        )


SETTINGS = CommandSettings(
    prog="ibpool recommend",
    description="Propose pool moves and VL-weight changes from the time series.",
    config_type=RecommendConfig,
    options=OPTIONS,
    validate=validate,
    default_listen=DEFAULT_LISTEN,
)


def parser() -> argparse.ArgumentParser:
    """The flags (a flag given wins over the YAML file)."""
    p = SETTINGS.parser()
    p.add_argument("--once", action="store_true", help="run one cycle, print it, exit")
    p.add_argument("--json", action="store_true", help="with --once: print the cycle as JSON")
    p.add_argument("--priority", action="append", default=[], metavar="POOL=RANK", help="pool priority rank")
    p.add_argument(
        "--pool-sl", action="append", default=[], metavar="POOL=SL", help="a pool's SL (with --qos.file)"
    )
    return p


def _pairs(items: list[str], what: str, problems: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            problems.append(f"flag: {what}: {item!r} is not NAME=INTEGER")
            continue
        out[name] = int(value)
    return out


def load(args: argparse.Namespace) -> RecommendConfig:
    """Flags over YAML; ConfigError lists every problem."""
    if args.db is None and os.environ.get("IBPOOL_DB"):
        args.db = Path(os.environ["IBPOOL_DB"])
    problems: list[str] = []
    try:
        cfg = SETTINGS.load([], args)
    except ConfigError as exc:
        problems.extend(exc.problems)
        cfg = RecommendConfig()
    priorities = _pairs(args.priority, "--priority", problems)
    pool_sl = _pairs(args.pool_sl, "--pool-sl", problems)
    if problems:
        raise ConfigError(problems)
    return dataclasses.replace(cfg, priorities=priorities, pool_sl=pool_sl)


def build_source(cfg: RecommendConfig) -> SignalSource:
    """Prometheus when a URL is given, else the embedded scrape."""
    qos: QosReader | None = OpenSmQosFile(cfg.qos_file, cfg.pool_sl) if cfg.qos_file is not None else None
    if cfg.prometheus_url:
        return PrometheusSource(PrometheusSettings(cfg.prometheus_url, cfg.max_age_seconds), qos)
    assert cfg.embedded_targets is not None  # validate() requires one of the two URLs
    settings = EmbeddedSettings(
        cfg.embedded_targets,
        cfg.embedded_fabric,
        cfg.embedded_scheduler,
        window_seconds=cfg.window_seconds,
        max_age_seconds=cfg.max_age_seconds,
    )
    return EmbeddedSource(settings, qos)


def build_recommender(
    cfg: RecommendConfig,
    store: Store,
    approval: ApprovalConfig | None,
    progress: Callable[[str], None] | None = None,
) -> Recommender:
    """A Recommender over the configured source and policies (`progress`: told each step of a cycle)."""
    quota = QuotaPolicy(QuotaParams(priorities=dict(cfg.priorities)))
    return Recommender(
        build_source(cfg),
        store,
        quota=quota,
        approval=approval,
        state_path=state_path_for(cfg.db),
        progress=progress,
    )


def _progress(message: str) -> None:
    print(f"ibpool recommend: {message}", file=sys.stderr, flush=True)


def print_result(result: CycleResult, as_json: bool) -> None:
    """Human or JSON summary of one cycle."""
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return
    print(f"cycle on {result.source} signals in {result.duration_seconds:.3f} s")
    for item in result.missing:
        print(f"  missing signal {item.signal}: {item.reason} (no proposal from the policies that need it)")
    for sub in result.submitted:
        state = "new" if sub.created else "already stored"
        print(f"  proposed {sub.proposal.kind} {sub.id[:12]} ({state}) by {sub.proposal.policy}")
        for change in sub.proposal.changes:
            print(f"    {change.target}: {change.before} -> {change.after}")
        print(f"    expected: {sub.proposal.expected_effect}")
        for e in sub.proposal.evidence:
            print(f"    evidence [{e.window}] {e.query} = {e.value:g} (threshold {e.threshold:g})")
    if result.skipped_duplicates:
        print(f"  {result.skipped_duplicates} proposal(s) equal to one still pending: not submitted again")
    for decision in result.decisions:
        print(f"  auto-approval {decision.proposal_id[:12]}: {'approved' if decision.approved else 'left'}")
    if not result.submitted and not result.missing:
        print("  nothing to propose")


def main(argv: list[str]) -> int:
    """`ibpool recommend` entry point: 0 ok, 1 runtime error, 2 bad configuration."""
    args = parser().parse_args(argv)
    try:
        cfg = load(args)
        approval = load_approval_config(cfg.policy) if cfg.policy is not None else None
    except (ConfigError, ApprovalConfigError) as exc:
        return config_failed("ibpool recommend", exc.problems)
    configure_logging(cfg.log_level if not args.once else "warning")
    try:
        if args.once:
            cfg.db.parent.mkdir(parents=True, exist_ok=True)
            with Store(cfg.db) as store:
                result = build_recommender(cfg, store, approval, None if args.json else _progress).run_once()
            print_result(result, args.json)
            return 0
        return _serve(cfg, approval)
    except (StoreError, OSError) as exc:
        print(f"ibpool recommend: {exc}", file=sys.stderr)
        return 1


def _serve(cfg: RecommendConfig, approval: ApprovalConfig | None) -> int:
    service = Service(
        lambda store: build_recommender(cfg, store, approval),
        str(cfg.db),
        cfg.interval_seconds,
        cfg.listen_address,
        web=web_config_of(cfg),
        telemetry_path=cfg.telemetry_path,
    )
    return until_signal(service.serve)
