"""The Slurm adapter's settings: one frozen object, every fault reported at once."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from scheduler_hooks.errors import HookConfigError

_PATHS = ("slurm_conf", "bin_dir")
_FLAGS = ("persist", "allow_empty_partitions")
_SECONDS = ("poll_interval_seconds", "drain_deadline_seconds", "command_timeout_seconds")
GIVE_UP, REQUEUE = "give_up", "requeue"
ON_DRAIN_DEADLINE = (GIVE_UP, REQUEUE)
ALLOW, AS_DRAIN = "allow", "as_drain"
RECLAIMS = (ALLOW, AS_DRAIN)


@dataclass(frozen=True)
class SlurmConfig:
    """Where Slurm is, whether slurm.conf is kept in step, and how long to wait for what.

    `slurm_conf` is exported as SLURM_CONF to every command and is the file `persist` rewrites (the
    previous version is kept beside it with `backup_suffix`). `bin_dir` holds scontrol, sinfo and squeue
    (None: PATH). Running jobs on a drained node get `drain_deadline_seconds` to end, polled every
    `poll_interval_seconds`; at the deadline the move gives up (`on_drain_deadline: give_up`: nodes
    resumed, nothing changed) or requeues the jobs still running on the leaving nodes (`requeue`:
    `scontrol requeue`, their work since the last checkpoint lost) and completes once they have left,
    within `command_timeout_seconds`. Every command is killed after `command_timeout_seconds`.

    A proposal's reclaim (the nodes it takes back by requeueing their jobs) is carried out only with
    `reclaims: allow`: the jobs still running on those nodes are requeued as soon as they are drained,
    whatever `on_drain_deadline` says. With `as_drain` (default: killing work is opted into) they drain
    like any other node, and the record says the reclaim was applied as a drain.
    """

    slurm_conf: Path
    bin_dir: Path | None = None
    persist: bool = False
    backup_suffix: str = ".ibpool-prev"
    poll_interval_seconds: float = 1.0
    drain_deadline_seconds: float = 3600.0
    command_timeout_seconds: float = 30.0
    allow_empty_partitions: bool = False
    on_drain_deadline: str = GIVE_UP
    reclaims: str = AS_DRAIN

    def __post_init__(self) -> None:
        problems = _problems({f.name: getattr(self, f.name) for f in fields(self)})
        if problems:
            raise HookConfigError(problems)

    def requeued_at_once(self, reclaimed: Sequence[str]) -> list[str]:
        """Of a proposal's reclaimed nodes, those whose jobs are requeued as soon as they are drained: all
        of them with `reclaims: allow`, none with `as_drain`."""
        return list(reclaimed) if self.reclaims == ALLOW else []

    @property
    def backup_path(self) -> Path:
        """Where the previous slurm.conf is kept."""
        return self.slurm_conf.with_name(self.slurm_conf.name + self.backup_suffix)

    @classmethod
    def from_mapping(cls, raw: object, where: str = "slurm") -> SlurmConfig:
        """Build from a decoded YAML mapping; HookConfigError names every bad key as `where.key`."""
        if not isinstance(raw, Mapping):
            raise HookConfigError([f"{where}: must be a mapping"])
        known = {field.name for field in fields(cls)}
        problems = [f"{where}.{key}: unknown key" for key in sorted(set(map(str, raw)) - known)]
        if "slurm_conf" not in raw:
            problems.append(f"{where}.slurm_conf: missing")
        values: dict[str, object] = {}
        for key, value in raw.items():
            if key not in known:
                continue
            if key in _PATHS:
                if value is None and key == "bin_dir":
                    values[key] = None
                elif isinstance(value, str) and value:
                    values[key] = Path(value)
                else:
                    problems.append(f"{where}.{key}: must be a path, got {value!r}")
            elif key in _FLAGS and not isinstance(value, bool):
                problems.append(f"{where}.{key}: must be true or false, got {value!r}")
            elif key in _SECONDS and (isinstance(value, bool) or not isinstance(value, int | float)):
                problems.append(f"{where}.{key}: must be a number of seconds, got {value!r}")
            else:
                values[key] = value
        # The values that have the right type are checked too, whatever else is wrong: one run shows all.
        problems += [f"{where}.{problem}" for problem in _problems(values)]
        if problems:
            raise HookConfigError(problems)
        return cls(**values)  # type: ignore[arg-type]


def _problems(values: Mapping[str, object]) -> list[str]:
    """The problems of the settings present in `values` (each already of its field's type)."""
    problems: list[str] = []
    for key in _PATHS:
        path = values.get(key)
        if isinstance(path, Path) and (not str(path) or not path.is_absolute()):
            problems.append(f"{key}: must be an absolute path, got {str(path)!r}")
    action = values.get("on_drain_deadline")
    if action is not None and action not in ON_DRAIN_DEADLINE:
        problems.append(f"on_drain_deadline: must be one of {', '.join(ON_DRAIN_DEADLINE)}, got {action!r}")
    reclaims = values.get("reclaims")
    if reclaims is not None and reclaims not in RECLAIMS:
        problems.append(
            f"reclaims: must be one of {', '.join(RECLAIMS)} (allow: requeue the jobs on a proposal's "
            f"reclaimed nodes at once), got {reclaims!r}"
        )
    suffix = values.get("backup_suffix")
    if suffix is not None and (not isinstance(suffix, str) or not suffix or "/" in suffix):
        problems.append(f"backup_suffix: must be a non-empty file-name suffix, got {suffix!r}")
    for key in _SECONDS:
        value = values.get(key)
        if not isinstance(value, int | float):
            continue
        if key == "drain_deadline_seconds":
            if not math.isfinite(value) or value < 0:
                problems.append(f"{key}: must be a number of seconds >= 0 (0: do not wait), got {value!r}")
        elif not math.isfinite(value) or value <= 0:
            problems.append(f"{key}: must be a positive number of seconds, got {value!r}")
    return problems
