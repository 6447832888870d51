"""The `ibpool apply` config file: state dir, approval policy file, OpenSM and Slurm sections.

At least one of `opensm` and `slurm`. Every problem is reported at once, as `FILE: key: message`. A full
example: docs/configuration.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from proposals.approval_config import DEFAULT_CONFIG, ApprovalConfig, load_approval_config
from proposals.errors import ApprovalConfigError
from scheduler_hooks.errors import HookConfigError
from scheduler_hooks.opensm import OpenSMConfig
from scheduler_hooks.slurm import SlurmConfig

KEYS = ("state_dir", "approval_config", "opensm", "slurm")


@dataclass(frozen=True)
class ApplyConfig:
    """A parsed apply config."""

    source: str
    state_dir: Path
    opensm: OpenSMConfig | None = None
    slurm: SlurmConfig | None = None
    approval: ApprovalConfig = DEFAULT_CONFIG
    approval_file: Path | None = None

    @property
    def sections(self) -> tuple[str, ...]:
        """The sides configured."""
        return tuple(name for name in ("opensm", "slurm") if getattr(self, name) is not None)


def load_apply_config(path: Path) -> ApplyConfig:
    """Read and check the file; HookConfigError lists every problem with the file and key."""
    source = str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HookConfigError([f"{source}: cannot read: {exc.strerror or exc}"]) from None
    except yaml.YAMLError as exc:
        raise HookConfigError([f"{source}: not valid YAML: {exc}"]) from None
    return parse_apply_config(raw, source)


def parse_apply_config(raw: object, source: str) -> ApplyConfig:
    """Check decoded YAML; HookConfigError lists every problem as `source: key: message`."""
    if not isinstance(raw, Mapping):
        raise HookConfigError([f"{source}: must be a mapping with keys {', '.join(KEYS)}"])
    problems = [f"{source}: {key}: unknown key" for key in sorted(set(map(str, raw)) - set(KEYS))]
    state_dir = _path(raw, "state_dir", source, problems, required=True)
    approval_file = _path(raw, "approval_config", source, problems)
    if raw.get("opensm") is None and raw.get("slurm") is None:
        problems.append(f"{source}: opensm, slurm: configure at least one of them")
    opensm = _opensm(raw.get("opensm"), state_dir, source, problems)
    slurm = _slurm(raw.get("slurm"), source, problems)
    approval = DEFAULT_CONFIG
    if approval_file is not None:
        try:
            approval = load_approval_config(approval_file)
        except ApprovalConfigError as exc:
            problems += [f"{source}: approval_config: {problem}" for problem in exc.problems]
    if problems or state_dir is None:
        raise HookConfigError(problems)
    return ApplyConfig(source, state_dir, opensm, slurm, approval, approval_file)


def _path(
    raw: Mapping[str, Any], key: str, source: str, problems: list[str], required: bool = False
) -> Path | None:
    value = raw.get(key)
    if value is None:
        if required:
            problems.append(f"{source}: {key}: missing")
        return None
    if not isinstance(value, str) or not value.startswith("/"):
        problems.append(f"{source}: {key}: must be an absolute path, got {value!r}")
        return None
    return Path(value)


def _opensm(raw: object, state_dir: Path | None, source: str, problems: list[str]) -> OpenSMConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{source}: opensm: must be a mapping")
        return None
    section = dict(raw)
    if "state_dir" not in section and state_dir is not None:
        section["state_dir"] = str(state_dir / "opensm")
    try:
        return OpenSMConfig.from_mapping(section, source)
    except HookConfigError as exc:
        problems += exc.problems
        return None


def _slurm(raw: object, source: str, problems: list[str]) -> SlurmConfig | None:
    if raw is None:
        return None
    try:
        return SlurmConfig.from_mapping(raw, f"{source}: slurm")
    except HookConfigError as exc:
        problems += exc.problems
        return None
