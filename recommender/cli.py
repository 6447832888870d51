"""`ibpool recommend`: one cycle (`--once`) or a schedule with metrics; flags over an optional YAML file.

    ibpool recommend --once [--prometheus.url URL | --embedded.targets URL] [--db PATH] [--policy FILE]
                            [--json]
    ibpool recommend [--config.file FILE] [--interval SECONDS] [--web.listen-address HOST:PORT]
    ibpool recommend --fabric-scenario          # print the shared-uplink fabric scenario's figures

Without a Prometheus URL the embedded source scrapes the exporters (default: the simulated cluster on
127.0.0.1:9479). The hysteresis memory is kept beside the store (`<db>.recommender-state.json`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from exporter.errors import ConfigError
from exporter.settings import gather_settings, reporter
from proposals.approval_config import ApprovalConfig, load_approval_config
from proposals.errors import ApprovalConfigError, StoreError
from proposals.store import Store
from recommender.cycle import CycleResult, Recommender, state_path_for
from recommender.policies.quota import QuotaParams, QuotaPolicy
from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from recommender.signals.prometheus import PrometheusSettings, PrometheusSource
from recommender.signals.qos import OpenSmQosFile, QosReader, SimulatorQos
from recommender.signals.source import SignalSource

log = logging.getLogger(__name__)

DEFAULT_DB = Path("/var/lib/ibpool/ibpool.db")
DEFAULT_TARGETS = "http://127.0.0.1:9479/targets"
YAML_KEYS: dict[str, tuple[str, type]] = {
    "prometheus.url": ("prometheus_url", str),
    "embedded.targets": ("embedded_targets", str),
    "embedded.fabric": ("embedded_fabric", str),
    "embedded.scheduler": ("embedded_scheduler", str),
    "embedded.window_seconds": ("window_seconds", float),
    "qos.file": ("qos_file", Path),
    "qos.url": ("qos_url", str),
    "db": ("db", Path),
    "policy": ("policy", Path),
    "interval_seconds": ("interval_seconds", float),
    "max_age_seconds": ("max_age_seconds", float),
    "web.listen_address": ("listen_address", str),
    "log.level": ("log_level", str),
}


@dataclass(frozen=True)
class RecommendConfig:
    """Parsed configuration (frozen)."""

    prometheus_url: str | None = None
    embedded_targets: str = DEFAULT_TARGETS
    embedded_fabric: str | None = None
    embedded_scheduler: str | None = None
    window_seconds: float = 5.0
    qos_file: Path | None = None
    qos_url: str | None = None
    db: Path = DEFAULT_DB
    policy: Path | None = None
    interval_seconds: float = 60.0
    max_age_seconds: float = 120.0
    listen_address: str = ":9481"
    log_level: str = "info"
    priorities: dict[str, int] = field(default_factory=dict)
    pool_sl: dict[str, int] = field(default_factory=dict)


def parser() -> argparse.ArgumentParser:
    """The flags (a flag given wins over the YAML file)."""
    p = argparse.ArgumentParser(prog="ibpool recommend", description=__doc__.splitlines()[0])
    p.add_argument("--once", action="store_true", help="run one cycle, print it, exit")
    p.add_argument("--json", action="store_true", help="with --once: print the cycle as JSON")
    p.add_argument("--fabric-scenario", action="store_true", help="print the fabric scenario's figures")
    p.add_argument("--config.file", dest="config_file", type=Path, default=None)
    p.add_argument("--prometheus.url", dest="prometheus_url", default=None)
    p.add_argument("--embedded.targets", dest="embedded_targets", default=None)
    p.add_argument("--embedded.fabric", dest="embedded_fabric", default=None)
    p.add_argument("--embedded.scheduler", dest="embedded_scheduler", default=None)
    p.add_argument("--embedded.window-seconds", dest="window_seconds", type=float, default=None)
    p.add_argument("--qos.file", dest="qos_file", type=Path, default=None, help="opensm.conf (QoS tables)")
    p.add_argument("--qos.url", dest="qos_url", default=None, help="the simulated cluster's /-/model")
    p.add_argument("--db", dest="db", type=Path, default=None, help="proposal store ($IBPOOL_DB)")
    p.add_argument("--policy", dest="policy", type=Path, default=None, help="approval policy file")
    p.add_argument("--interval", dest="interval_seconds", type=float, default=None)
    p.add_argument("--max-age", dest="max_age_seconds", type=float, default=None)
    p.add_argument("--web.listen-address", dest="listen_address", default=None)
    p.add_argument("--log.level", dest="log_level", default=None)
    p.add_argument("--priority", action="append", default=[], metavar="POOL=RANK", help="pool priority rank")
    p.add_argument("--pool-sl", action="append", default=[], metavar="POOL=SL", help="with --qos.file")
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
    problems: list[str] = []
    flag_fields = [f.name for f in fields(RecommendConfig) if f.name not in ("priorities", "pool_sl")]
    values, origin = gather_settings(args, YAML_KEYS, flag_fields, problems)
    if "db" not in values and os.environ.get("IBPOOL_DB"):
        values["db"] = Path(os.environ["IBPOOL_DB"])
    values["priorities"] = _pairs(args.priority, "--priority", problems)
    values["pool_sl"] = _pairs(args.pool_sl, "--pool-sl", problems)
    cfg = RecommendConfig(**values)
    bad = reporter(origin, problems)
    if cfg.interval_seconds <= 0:
        bad("interval_seconds", "must be > 0")
    if cfg.window_seconds <= 0:
        bad("window_seconds", "must be > 0")
    if cfg.policy is not None and not cfg.policy.is_file():
        bad("policy", f"file not found: {cfg.policy}")
    if problems:
        raise ConfigError(problems)
    return cfg


def build_source(cfg: RecommendConfig) -> SignalSource:
    """Prometheus when a URL is given, else the embedded scrape."""
    qos: QosReader | None = None
    if cfg.qos_file is not None:
        qos = OpenSmQosFile(cfg.qos_file, cfg.pool_sl)
    elif cfg.qos_url is not None:
        qos = SimulatorQos(cfg.qos_url)
    if cfg.prometheus_url:
        return PrometheusSource(PrometheusSettings(cfg.prometheus_url, cfg.max_age_seconds), qos)
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
    from ibpool.cli import configure_logging

    args = parser().parse_args(argv)
    if args.fabric_scenario:
        from recommender.fabric_scenario import main as scenario_main

        return scenario_main()
    try:
        cfg = load(args)
        approval = load_approval_config(cfg.policy) if cfg.policy is not None else None
    except (ConfigError, ApprovalConfigError) as exc:
        print("ibpool recommend: invalid configuration:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
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
    import signal

    from recommender.service import Service

    stop = threading.Event()

    def on_signal(signum: int, _: Any) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    service = Service(
        lambda store: build_recommender(cfg, store, approval),
        str(cfg.db),
        cfg.interval_seconds,
        cfg.listen_address,
    )
    return service.serve(stop)
