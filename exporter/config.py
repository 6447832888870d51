"""Exporter configuration: Prometheus-style flags over an optional YAML file, parsed once, frozen.

Precedence: built-in defaults < YAML file (`--config.file`) < flags given on the command line.
Every problem is reported at once, each with its file (or `flag`) and key.

```yaml
web:
  listen_address: ":9470"
  config_file: web.yml          # TLS and basic auth (exporter-toolkit format)
  telemetry_path: /metrics
collectors:
  gpu: {enabled: true, deadline_seconds: 2.0}
  infiniband: {enabled: true, sysfs_root: /sys}
  verbs: {enabled: true}
  jobs: {enabled: true, directory: /run/ibpool/jobs}
health:
  max_age_seconds: 300
simulate:
  enabled: false
  gpus: 8
  ports: 8
  seed: 1
  step_seconds: 1.0
```
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from exporter.errors import ConfigError
from exporter.http_server import parse_listen_address

DEFAULT_LISTEN = ":9470"


@dataclass(frozen=True)
class ExporterConfig:
    """Everything the exporter needs to start."""

    listen_address: str = DEFAULT_LISTEN
    web_config_file: Path | None = None
    telemetry_path: str = "/metrics"
    gpu: bool = True
    gpu_deadline_seconds: float = 2.0
    infiniband: bool = True
    sysfs_root: Path = Path("/sys")
    verbs: bool = True
    jobs: bool = True
    jobs_directory: Path = Path("/run/ibpool/jobs")
    health_max_age_seconds: float = 300.0
    simulate: bool = False
    simulate_gpus: int = 8
    simulate_ports: int = 8
    simulate_seed: int = 1
    simulate_step_seconds: float = 1.0
    log_level: str = "info"


# key in the YAML file -> (field, type); nested keys are dotted.
_YAML_KEYS: dict[str, tuple[str, type]] = {
    "web.listen_address": ("listen_address", str),
    "web.config_file": ("web_config_file", Path),
    "web.telemetry_path": ("telemetry_path", str),
    "collectors.gpu.enabled": ("gpu", bool),
    "collectors.gpu.deadline_seconds": ("gpu_deadline_seconds", float),
    "collectors.infiniband.enabled": ("infiniband", bool),
    "collectors.infiniband.sysfs_root": ("sysfs_root", Path),
    "collectors.verbs.enabled": ("verbs", bool),
    "collectors.jobs.enabled": ("jobs", bool),
    "collectors.jobs.directory": ("jobs_directory", Path),
    "health.max_age_seconds": ("health_max_age_seconds", float),
    "simulate.enabled": ("simulate", bool),
    "simulate.gpus": ("simulate_gpus", int),
    "simulate.ports": ("simulate_ports", int),
    "simulate.seed": ("simulate_seed", int),
    "simulate.step_seconds": ("simulate_step_seconds", float),
    "log.level": ("log_level", str),
}
_FLAGS: dict[str, str] = {  # argparse dest -> field
    "listen_address": "listen_address",
    "web_config_file": "web_config_file",
    "telemetry_path": "telemetry_path",
    "gpu": "gpu",
    "gpu_deadline_seconds": "gpu_deadline_seconds",
    "infiniband": "infiniband",
    "sysfs_root": "sysfs_root",
    "verbs": "verbs",
    "jobs": "jobs",
    "jobs_directory": "jobs_directory",
    "health_max_age_seconds": "health_max_age_seconds",
    "simulate": "simulate",
    "simulate_gpus": "simulate_gpus",
    "simulate_ports": "simulate_ports",
    "simulate_seed": "simulate_seed",
    "simulate_step_seconds": "simulate_step_seconds",
    "log_level": "log_level",
}
LOG_LEVELS = ("debug", "info", "warning", "error")


def build_parser(prog: str = "ibpool exporter") -> argparse.ArgumentParser:
    """The exporter's command-line flags (every default is None so the YAML file can fill it)."""
    p = argparse.ArgumentParser(prog=prog, description="Node exporter for NVIDIA GPUs and InfiniBand ports.")
    add = p.add_argument
    add("--config.file", dest="config_file", type=Path, help="optional YAML config file")
    add("--web.listen-address", dest="listen_address", help=f"host:port to listen on ({DEFAULT_LISTEN})")
    add(
        "--web.config.file",
        dest="web_config_file",
        type=Path,
        help="TLS / basic auth config (exporter-toolkit)",
    )
    add("--web.telemetry-path", dest="telemetry_path", help="path of the metrics page (/metrics)")
    add("--collector.gpu", dest="gpu", action=argparse.BooleanOptionalAction, help="NVML GPU metrics")
    add("--gpu.deadline-seconds", dest="gpu_deadline_seconds", type=float, help="NVML deadline per scrape")
    add(
        "--collector.infiniband",
        dest="infiniband",
        action=argparse.BooleanOptionalAction,
        help="InfiniBand port metrics from sysfs",
    )
    add("--sysfs-root", "--path.sysfs", dest="sysfs_root", type=Path, help="sysfs mount point (/sys)")
    add(
        "--collector.verbs",
        dest="verbs",
        action=argparse.BooleanOptionalAction,
        help="MTU from verbs (pyverbs), when it imports and finds devices",
    )
    add("--collector.jobs", dest="jobs", action=argparse.BooleanOptionalAction, help="GPU-to-job attribution")
    add("--jobs.directory", dest="jobs_directory", type=Path, help="job mapping directory (/run/ibpool/jobs)")
    add(
        "--health.max-age-seconds",
        dest="health_max_age_seconds",
        type=float,
        help="/healthz collects again when the last collection is older than this",
    )
    add(
        "--simulate",
        dest="simulate",
        action=argparse.BooleanOptionalAction,
        help="serve a simulated node (8 GPUs, 8 NDR ports) instead of the hardware",
    )
    add("--simulate.gpus", dest="simulate_gpus", type=int)
    add("--simulate.ports", dest="simulate_ports", type=int)
    add("--simulate.seed", dest="simulate_seed", type=int)
    add("--simulate.step-seconds", dest="simulate_step_seconds", type=float)
    add("--log.level", dest="log_level", help="debug, info, warning or error")
    return p


def _flatten(raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _coerce(value: Any, kind: type, where: str, problems: list[str]) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            problems.append(f"{where}: must be true or false, got {value!r}")
        return value
    if kind in (int, float):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and isinstance(value, float))
        ):
            problems.append(f"{where}: must be a number, got {value!r}")
            return None
        return kind(value)
    if not isinstance(value, str) or not value:
        problems.append(f"{where}: must be a non-empty string, got {value!r}")
        return None
    return Path(value) if kind is Path else value


def _read_yaml(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        problems.append(f"{path}: cannot read: {exc.strerror or exc}")
        return {}
    except yaml.YAMLError as exc:
        problems.append(f"{path}: not valid YAML: {exc}")
        return {}
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{path}: must be a mapping at the top level")
        return {}
    values: dict[str, Any] = {}
    for key, value in _flatten(raw).items():
        spec = _YAML_KEYS.get(key)
        if spec is None:
            problems.append(f"{path}: {key}: unknown key")
            continue
        coerced = _coerce(value, spec[1], f"{path}: {key}", problems)
        if coerced is not None:
            values[spec[0]] = (
                Path(path.parent, coerced) if spec[1] is Path and not coerced.is_absolute() else coerced
            )
    return values


def _validate(cfg: ExporterConfig, origin: dict[str, str], problems: list[str]) -> None:
    def bad(field_name: str, message: str) -> None:
        problems.append(f"{origin.get(field_name, 'default')}: {field_name}: {message}")

    try:
        parse_listen_address(cfg.listen_address)
    except ValueError as exc:
        bad("listen_address", str(exc))
    if not cfg.telemetry_path.startswith("/") or cfg.telemetry_path in ("/", "/healthz"):
        bad("telemetry_path", "must be an absolute path other than / and /healthz")
    if cfg.gpu_deadline_seconds <= 0:
        bad("gpu_deadline_seconds", "must be > 0")
    if cfg.health_max_age_seconds <= 0:
        bad("health_max_age_seconds", "must be > 0")
    if cfg.log_level not in LOG_LEVELS:
        bad("log_level", f"must be one of {', '.join(LOG_LEVELS)}")
    if cfg.web_config_file is not None and not cfg.web_config_file.is_file():
        bad("web_config_file", f"file not found: {cfg.web_config_file}")
    if not cfg.simulate and cfg.infiniband and not cfg.sysfs_root.is_dir():
        bad("sysfs_root", f"not a directory: {cfg.sysfs_root}")
    if not 1 <= cfg.simulate_gpus <= 64:
        bad("simulate_gpus", "must be between 1 and 64")
    if not 1 <= cfg.simulate_ports <= 64:
        bad("simulate_ports", "must be between 1 and 64")
    if cfg.simulate_step_seconds <= 0:
        bad("simulate_step_seconds", "must be > 0")


def load_config(argv: list[str]) -> ExporterConfig:
    """Parse flags and the optional YAML file into one frozen config; raise ConfigError with all problems."""
    args = build_parser().parse_args(argv)
    problems: list[str] = []
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if args.config_file is not None:
        values.update(_read_yaml(args.config_file, problems))
        origin.update(dict.fromkeys(values, str(args.config_file)))
    for dest, field_name in _FLAGS.items():
        given = getattr(args, dest)
        if given is not None:
            values[field_name] = given
            origin[field_name] = "flag"
    cfg = ExporterConfig(**values)
    _validate(cfg, origin, problems)
    if problems:
        raise ConfigError(problems)
    return cfg
