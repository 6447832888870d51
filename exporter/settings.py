"""Flags over an optional YAML file, the way every ibpool exporter takes its configuration.

Each exporter declares its options once (`Option`: flag, dotted YAML key, field, type, help); its argparse
flags (`dest` is the field name) and its YAML key map (`dotted.key -> (field, type)`) are both made from
them. `gather_settings` reads the file, lets flags given on the command line win, remembers where each
value came from (the file, or `flag`) and collects every problem instead of stopping at the first.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from exporter.http_server import parse_listen_address

LOG_LEVELS = ("debug", "info", "warning", "error")
YamlKeys = Mapping[str, tuple[str, type]]


@dataclass(frozen=True)
class Option:
    """One setting, as a flag and a YAML key: bool options get `--x/--no-x`, str ones no `type=`."""

    flag: str
    yaml_key: str
    field: str
    kind: type
    help: str | None = None
    aliases: tuple[str, ...] = ()


def yaml_keys(options: Iterable[Option]) -> dict[str, tuple[str, type]]:
    """The YAML key map (`dotted.key -> (field, type)`) of `options`."""
    return {o.yaml_key: (o.field, o.kind) for o in options}


def add_options(parser: argparse.ArgumentParser, options: Iterable[Option]) -> None:
    """One flag per option, `dest` its field and default None so the YAML file can fill it."""
    for o in options:
        kwargs: dict[str, Any] = {"dest": o.field, "help": o.help}
        if o.kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif o.kind is not str:
            kwargs["type"] = o.kind
        parser.add_argument(o.flag, *o.aliases, **kwargs)


def flatten_keys(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one mapping of dotted keys."""
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_keys(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def coerce_value(value: Any, kind: type, where: str, problems: list[str]) -> Any:
    """`value` as `kind` (bool, int, float, str or Path), or None with a problem recorded."""
    if kind is bool:
        if not isinstance(value, bool):
            problems.append(f"{where}: must be true or false, got {value!r}")
            return None
        return value
    if kind in (int, float):
        wrong = isinstance(value, bool) or not isinstance(value, (int, float))
        if wrong or (kind is int and isinstance(value, float)):
            problems.append(f"{where}: must be a number, got {value!r}")
            return None
        return kind(value)
    if not isinstance(value, str) or not value:
        problems.append(f"{where}: must be a non-empty string, got {value!r}")
        return None
    return Path(value) if kind is Path else value


def read_yaml_settings(
    path: Path,
    keys: YamlKeys,
    problems: list[str],
    normalise: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Field values from a YAML file; relative paths are taken from the file's folder."""
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
    flat = flatten_keys(raw)
    if normalise is not None:
        normalise(flat)
    values: dict[str, Any] = {}
    for key, value in flat.items():
        spec = keys.get(key)
        if spec is None:
            problems.append(f"{path}: {key}: unknown key")
            continue
        coerced = coerce_value(value, spec[1], f"{path}: {key}", problems)
        if coerced is None:
            continue
        if isinstance(coerced, Path) and not coerced.is_absolute():
            coerced = path.parent / coerced
        values[spec[0]] = coerced
    return values


def gather_settings(
    args: argparse.Namespace,
    keys: YamlKeys,
    flag_fields: Iterable[str],
    problems: list[str],
    normalise: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """(field values, where each came from): the YAML file of `args.config_file`, then the flags given."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if args.config_file is not None:
        values.update(read_yaml_settings(args.config_file, keys, problems, normalise))
        origin.update(dict.fromkeys(values, str(args.config_file)))
    for field_name in flag_fields:
        given = getattr(args, field_name)
        if given is not None:
            values[field_name] = given
            origin[field_name] = "flag"
    return values, origin


class WebSettings(Protocol):
    """The settings every exporter's web side has."""

    @property
    def listen_address(self) -> str: ...
    @property
    def telemetry_path(self) -> str: ...
    @property
    def web_config_file(self) -> Path | None: ...
    @property
    def log_level(self) -> str: ...


def reporter(origin: Mapping[str, str], problems: list[str]) -> Callable[[str, str], None]:
    """`bad(field, message)` that records a problem with where the field's value came from."""

    def bad(field_name: str, message: str) -> None:
        problems.append(f"{origin.get(field_name, 'default')}: {field_name}: {message}")

    return bad


def validate_web(cfg: WebSettings, bad: Callable[[str, str], None]) -> None:
    """Checks shared by every exporter: listen address, telemetry path, web config file, log level."""
    try:
        parse_listen_address(cfg.listen_address)
    except ValueError as exc:
        bad("listen_address", str(exc))
    if not cfg.telemetry_path.startswith("/") or cfg.telemetry_path in ("/", "/healthz"):
        bad("telemetry_path", "must be an absolute path other than / and /healthz")
    if cfg.web_config_file is not None and not cfg.web_config_file.is_file():
        bad("web_config_file", f"file not found: {cfg.web_config_file}")
    if cfg.log_level not in LOG_LEVELS:
        bad("log_level", f"must be one of {', '.join(LOG_LEVELS)}")


def web_options(default_listen: str) -> tuple[Option, ...]:
    """The `--web.*` and `--log.level` options every exporter shares."""
    return (
        Option("--web.listen-address", "web.listen_address", "listen_address", str,
               f"host:port to listen on ({default_listen})"),
        Option("--web.config.file", "web.config_file", "web_config_file", Path,
               "TLS / basic auth config (exporter-toolkit)"),
        Option("--web.telemetry-path", "web.telemetry_path", "telemetry_path", str,
               "path of the metrics page (/metrics)"),
        Option("--log.level", "log.level", "log_level", str, ", ".join(LOG_LEVELS)),
    )  # fmt: skip


# The YAML keys every exporter shares.
WEB_YAML_KEYS: dict[str, tuple[str, type]] = yaml_keys(web_options(""))


def all_yaml_keys(*groups: Iterable[Option]) -> dict[str, tuple[str, type]]:
    """An exporter's YAML key map: the shared web keys, then those of each group of options."""
    keys = dict(WEB_YAML_KEYS)
    for options in groups:
        keys.update(yaml_keys(options))
    return keys


def add_common_flags(
    parser: argparse.ArgumentParser, default_listen: str, options: Iterable[Option] = ()
) -> None:
    """`--config.file`, `--web.*`, `--log.level`, then `options`; None defaults, for the YAML file to fill."""
    parser.add_argument("--config.file", dest="config_file", type=Path, help="optional YAML config file")
    add_options(parser, web_options(default_listen))
    add_options(parser, options)
