"""Flags over an optional YAML file: how every ibpool command takes its configuration.

A command declares its options once (`Option`: flag, dotted YAML key, field, type, help) and its frozen
config dataclass; `CommandSettings.load(argv)` builds the argparse flags and the YAML key map from the
options, reads the file (`--config.file`), lets flags given on the command line win, builds the config
and runs the command's checks, then raises one `ConfigError` listing every problem with where the value
came from (the file, `flag` or `default`). A field named `section.name` fills the nested dataclass
in the config's field `section` (for example `influx.url`).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import yaml

from foundation.errors import ConfigError
from foundation.http_server import parse_listen_address
from foundation.logs import LOG_LEVELS

YamlKeys = Mapping[str, tuple[str, type]]
Bad = Callable[[str, str], None]
"""`bad(field, message)`: records a problem with the field's value and where it came from."""

C = TypeVar("C")


@dataclass(frozen=True)
class Option:
    """One setting, as a flag and a YAML key: bool options get `--x/--no-x`, str ones no `type=`.

    `aliases` are accepted and shown in --help; `hidden` ones are accepted but not shown (old spellings
    kept for one release)."""

    flag: str
    yaml_key: str
    field: str
    kind: type
    help: str | None = None
    aliases: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()


def yaml_keys(options: Iterable[Option]) -> dict[str, tuple[str, type]]:
    """The YAML key map (`dotted.key -> (field, type)`) of `options`."""
    return {o.yaml_key: (o.field, o.kind) for o in options}


def add_options(parser: argparse.ArgumentParser, options: Iterable[Option]) -> None:
    """One flag per option, `dest` its field and default None so the YAML file can fill it."""
    for o in options:
        kwargs: dict[str, Any] = {"dest": o.field}
        if o.kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif o.kind is not str:
            kwargs["type"] = o.kind
        action = parser.add_argument(o.flag, *o.aliases, help=o.help, **kwargs)
        for old in o.hidden:
            add_hidden_alias(parser, old, action)


def add_hidden_alias(parser: argparse.ArgumentParser, old: str, action: argparse.Action) -> None:
    """Accept the old spelling `old` for `action` without showing it in --help (kept for one release)."""
    kwargs: dict[str, Any] = {"dest": action.dest, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
    if isinstance(action, argparse.BooleanOptionalAction):
        kwargs["action"] = argparse.BooleanOptionalAction
    elif action.nargs == 0:
        kwargs.update(action="store_const", const=action.const)
    else:
        kwargs.update(type=action.type, choices=action.choices)
    parser.add_argument(old, **kwargs)


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
    if getattr(args, "config_file", None) is not None:
        values.update(read_yaml_settings(args.config_file, keys, problems, normalise))
        origin.update(dict.fromkeys(values, str(args.config_file)))
    for field_name in flag_fields:
        given = getattr(args, field_name, None)
        if given is not None:
            values[field_name] = given
            origin[field_name] = "flag"
    return values, origin


def reporter(origin: Mapping[str, str], problems: list[str]) -> Bad:
    """`bad(field, message)` that records a problem with where the field's value came from."""

    def bad(field_name: str, message: str) -> None:
        problems.append(f"{origin.get(field_name, 'default')}: {field_name}: {message}")

    return bad


def build_config(cls: type[C], values: Mapping[str, Any]) -> C:
    """`cls(**values)`, where a `section.name` value fills the nested dataclass of field `section`."""
    flat = {k: v for k, v in values.items() if "." not in k}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if "." in key:
            section, _, name = key.partition(".")
            sections.setdefault(section, {})[name] = value
    if sections:
        hints = typing.get_type_hints(cls)
        defaults = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for section, given in sections.items():
            field = defaults[section]
            base = field.default if field.default is not dataclasses.MISSING else hints[section]()
            flat[section] = dataclasses.replace(base, **given)
    return cls(**flat)


class WebSettings(Protocol):
    """The settings every command that serves HTTP has."""

    @property
    def listen_address(self) -> str: ...
    @property
    def telemetry_path(self) -> str: ...
    @property
    def web_config_file(self) -> Path | None: ...
    @property
    def log_level(self) -> str: ...


def validate_web(cfg: WebSettings, bad: Bad) -> None:
    """Checks shared by every server: listen address, telemetry path, web config file, log level."""
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
    """The `--web.*` and `--log.level` options every server shares."""
    return (
        Option("--web.listen-address", "web.listen_address", "listen_address", str,
               f"host:port to listen on ({default_listen})"),
        Option("--web.config.file", "web.config_file", "web_config_file", Path,
               "TLS / basic auth config (exporter-toolkit)"),
        Option("--web.telemetry-path", "web.telemetry_path", "telemetry_path", str,
               "path of the metrics page (/metrics)"),
        LOG_LEVEL_OPTION,
    )  # fmt: skip


LOG_LEVEL_OPTION = Option("--log.level", "log.level", "log_level", str, ", ".join(LOG_LEVELS))


@dataclass(frozen=True)
class CommandSettings(Generic[C]):
    """How one command is configured: its options, its frozen config type and its checks.

    With `default_listen` set the command serves HTTP: it gets the `--web.*` options and their checks.
    `validate(cfg, bad)` reports the command's own problems; `normalise` may rewrite the flattened YAML
    keys before they are read (for YAML 1.1's `off` read as false, for instance). `config_hidden` are old
    spellings of `--config.file`, accepted but not shown.
    """

    prog: str
    description: str
    config_type: type[C]
    options: tuple[Option, ...]
    validate: Callable[[C, Bad], None]
    default_listen: str | None = None
    normalise: Callable[[dict[str, Any]], None] | None = None
    config_hidden: tuple[str, ...] = ()

    @property
    def all_options(self) -> tuple[Option, ...]:
        """The command's options, after the shared web and log options."""
        shared = web_options(self.default_listen) if self.default_listen is not None else (LOG_LEVEL_OPTION,)
        return (*shared, *self.options)

    @property
    def yaml_keys(self) -> dict[str, tuple[str, type]]:
        """YAML key -> (field, type) of every option."""
        return yaml_keys(self.all_options)

    def parser(self) -> argparse.ArgumentParser:
        """The command-line flags (every default is None so that the YAML file can fill it)."""
        p = argparse.ArgumentParser(prog=self.prog, description=self.description)
        config = p.add_argument(
            "--config.file", dest="config_file", type=Path, help="optional YAML config file"
        )
        for old in self.config_hidden:
            add_hidden_alias(p, old, config)
        add_options(p, self.all_options)
        return p

    def load(self, argv: list[str], args: argparse.Namespace | None = None) -> C:
        """Parse `argv` (or the already parsed `args`) and the YAML file into one frozen config; raise
        ConfigError listing every problem."""
        if args is None:
            args = self.parser().parse_args(argv)
        problems: list[str] = []
        keys = self.yaml_keys
        values, origin = gather_settings(
            args, keys, [field for field, _ in keys.values()], problems, self.normalise
        )
        cfg = build_config(self.config_type, values)
        bad = reporter(origin, problems)
        if self.default_listen is not None:
            validate_web(typing.cast(WebSettings, cfg), bad)
        elif getattr(cfg, "log_level", "info") not in LOG_LEVELS:
            bad("log_level", f"must be one of {', '.join(LOG_LEVELS)}")
        self.validate(cfg, bad)
        if problems:
            raise ConfigError(problems)
        return cfg
