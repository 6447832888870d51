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
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from exporter.errors import ExporterError
from exporter.scheduler.commands import SlurmCommands
from exporter.scheduler.config import SLURM_CLIENT_OPTIONS, validate_slurm_client
from exporter.scheduler.targets import (
    ADDRESS_KINDS,
    AddressKind,
    parse_cluster_name,
    parse_nodes,
    render,
    sd_groups,
    write_atomically,
)
from foundation.errors import ConfigError
from foundation.logs import configure_logging
from foundation.service import config_failed
from foundation.settings import Bad, CommandSettings, Option

log = logging.getLogger(__name__)

PROG = "ibpool targets"
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
    *SLURM_CLIENT_OPTIONS,
)  # fmt: skip


def validate(cfg: TargetsConfig, bad: Bad) -> None:
    """Every problem with the settings, at once."""
    if cfg.cluster is not None and not _LABEL_VALUE.match(cfg.cluster):
        bad("cluster", "letters, digits, `_`, `.` and `-` only")
    if not 1 <= cfg.port <= 65535:
        bad("port", "must be between 1 and 65535")
    if cfg.address not in ADDRESS_KINDS:
        bad("address", f"must be one of {', '.join(ADDRESS_KINDS)}")
    validate_slurm_client(cfg, bad)


SETTINGS = CommandSettings(
    prog=PROG,
    description="Prometheus file_sd targets (labels node, pool, cluster) for the node exporters, from Slurm.",
    config_type=TargetsConfig,
    options=OPTIONS,
    validate=validate,
)


load_config = SETTINGS.load


def build(cfg: TargetsConfig, slurm: SlurmCommands) -> str:
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
        return config_failed(PROG, exc.problems)
    configure_logging(cfg.log_level)
    try:
        text = build(cfg, SlurmCommands.resolve(cfg.slurm_bin_dir, cfg.slurm_conf, cfg.timeout_seconds))
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
