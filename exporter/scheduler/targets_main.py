"""`ibpool targets`: the Prometheus file_sd list of node exporters from Slurm (exporter/scheduler/targets.py).

```
ibpool targets [--output.file FILE] [--targets.cluster NAME] [--targets.port 9470]
               [--targets.address name|addr|hostname] [--targets.pools a,b] [--targets.all-nodes]
               [--slurm.bin-dir DIR] [--slurm.conf FILE] [--slurm.timeout-seconds 10] [--slurm.gres-name gpu]
```
Without `--output.file` the list goes to stdout. Exit 0 when written, 1 when Slurm could not be read or
listed no node (an existing file is left as it was), 2 on a bad configuration. Run it every minute
(deploy/systemd/ibpool-targets.timer); Prometheus picks a changed file up by itself.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from exporter.errors import ExporterError
from exporter.scheduler.commands import resolve_program
from exporter.scheduler.errors import CommandError
from exporter.scheduler.targets import (
    ADDRESS_KINDS,
    AddressKind,
    parse_cluster_name,
    parse_nodes,
    render,
    sd_groups,
    write_atomically,
)
from foundation.commands import CommandRunner
from foundation.errors import ConfigError
from foundation.logs import configure_logging
from foundation.settings import Bad, CommandSettings, Option

log = logging.getLogger(__name__)

PROG = "ibpool targets"
_GRES_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@dataclass(frozen=True)
class TargetsConfig:
    """What `ibpool targets` lists and where it writes."""

    output_file: Path | None = None
    cluster: str | None = None
    port: int = 9470
    address: str = "name"
    pools: str | None = None
    all_nodes: bool = False
    slurm_bin_dir: Path | None = None
    slurm_conf: Path | None = None
    timeout_seconds: float = 10.0
    gres_name: str = "gpu"
    log_level: str = "info"

    @property
    def pool_names(self) -> tuple[str, ...]:
        """The partitions that count as pools (empty: all)."""
        return tuple(p for p in (self.pools or "").split(",") if p)


OPTIONS: tuple[Option, ...] = (
    Option("--output.file", "output.file", "output_file", Path,
           "write the file_sd JSON here, atomically (default: stdout)"),
    Option("--targets.cluster", "targets.cluster", "cluster", str,
           "`cluster` label (default: Slurm's ClusterName)"),
    Option("--targets.port", "targets.port", "port", int, "port of the node exporters (9470)"),
    Option("--targets.address", "targets.address", "address", str,
           "what to scrape: the node's name, its NodeAddr (addr) or its NodeHostName (hostname) (name)"),
    Option("--targets.pools", "targets.pools", "pools", str,
           "comma-separated partitions that are pools (default: every partition)"),
    Option("--targets.all-nodes", "targets.all_nodes", "all_nodes", bool,
           "also list nodes without GPU GRES (off)"),
    Option("--slurm.bin-dir", "slurm.bin_dir", "slurm_bin_dir", Path,
           "directory of sinfo and scontrol (PATH)"),
    Option("--slurm.conf", "slurm.conf", "slurm_conf", Path, "slurm.conf for the commands (sets SLURM_CONF)"),
    Option("--slurm.timeout-seconds", "slurm.timeout_seconds", "timeout_seconds", float,
           "timeout per command, then kill (10)"),
    Option("--slurm.gres-name", "slurm.gres_name", "gres_name", str, "GRES name that counts as a GPU (gpu)"),
)  # fmt: skip


def validate(cfg: TargetsConfig, bad: Bad) -> None:
    """Every problem with the settings, at once."""
    if cfg.cluster is not None and not _LABEL_VALUE.match(cfg.cluster):
        bad("cluster", "letters, digits, `_`, `.` and `-` only")
    if not 1 <= cfg.port <= 65535:
        bad("port", "must be between 1 and 65535")
    if cfg.address not in ADDRESS_KINDS:
        bad("address", f"must be one of {', '.join(ADDRESS_KINDS)}")
    if cfg.slurm_bin_dir is not None and not cfg.slurm_bin_dir.is_dir():
        bad("slurm_bin_dir", f"not a directory: {cfg.slurm_bin_dir}")
    if cfg.slurm_conf is not None and not cfg.slurm_conf.is_file():
        bad("slurm_conf", f"file not found: {cfg.slurm_conf}")
    if cfg.timeout_seconds <= 0:
        bad("timeout_seconds", "must be > 0")
    if not _GRES_NAME.match(cfg.gres_name):
        bad("gres_name", f"not a GRES name: {cfg.gres_name!r}")


SETTINGS = CommandSettings(
    prog=PROG,
    description="Prometheus file_sd targets (labels node, pool, cluster) for the node exporters, from Slurm.",
    config_type=TargetsConfig,
    options=OPTIONS,
    validate=validate,
)


def load_config(argv: list[str]) -> TargetsConfig:
    """Flags over the optional YAML file; ConfigError lists every problem."""
    return SETTINGS.load(argv)


class Slurm:
    """The two read-only Slurm commands, through the one command runner."""

    def __init__(self, cfg: TargetsConfig) -> None:
        env = dict(os.environ)
        if cfg.slurm_conf is not None:
            env["SLURM_CONF"] = str(cfg.slurm_conf)
        self._sinfo = resolve_program("sinfo", cfg.slurm_bin_dir)
        self._scontrol = resolve_program("scontrol", cfg.slurm_bin_dir)
        self._runner = CommandRunner(cfg.timeout_seconds, env=env)

    def _run(self, *argv: str) -> str:
        result = self._runner.run(argv)
        if not result.ok:
            raise CommandError(result.describe())
        return result.stdout

    def nodes_json(self) -> str:
        """`sinfo --json`."""
        return self._run(self._sinfo, "--json")

    def config_text(self) -> str:
        """`scontrol show config`."""
        return self._run(self._scontrol, "show", "config")


def build(cfg: TargetsConfig, slurm: Slurm) -> str:
    """The file_sd JSON for the cluster as Slurm has it now; ExporterError when Slurm cannot be read."""
    nodes = parse_nodes(slurm.nodes_json(), cfg.gres_name)
    cluster = cfg.cluster or parse_cluster_name(slurm.config_text())
    address = cast(AddressKind, cfg.address)  # validate() allows ADDRESS_KINDS only
    groups = sd_groups(
        nodes, cluster, cfg.port, address=address, pools=cfg.pool_names, all_nodes=cfg.all_nodes
    )
    if not groups:
        raise ExporterError(f"Slurm lists no node{'' if cfg.all_nodes else ' with GPUs'}: nothing to write")
    return render(groups)


def main(argv: list[str]) -> int:
    """`ibpool targets`: 0 written, 1 Slurm unreadable or empty (file untouched), 2 bad configuration."""
    try:
        cfg = load_config(argv)
    except ConfigError as exc:
        print(f"{PROG}: invalid configuration:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    configure_logging(cfg.log_level)
    try:
        text = build(cfg, Slurm(cfg))
    except ExporterError as exc:
        kept = f"; {cfg.output_file} left as it was" if cfg.output_file is not None else ""
        log.error("%s%s", exc, kept)
        return 1
    if cfg.output_file is None:
        sys.stdout.write(text)
        return 0
    try:
        write_atomically(cfg.output_file, text)
    except OSError as exc:
        log.error("cannot write %s: %s", cfg.output_file, exc)
        return 1
    log.info("wrote %s", cfg.output_file)
    return 0
