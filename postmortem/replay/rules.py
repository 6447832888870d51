"""The rule files as shipped: groups and rules read from YAML, ordered for a replay, annotations looked up.

A replay engine writes a recording rule's results back to the store it reads from, so a rule that reads
another recording rule must run after it. `levels()` orders the rules by dependency (a rule is one level
above the deepest recording rule whose name appears in its expression) and gives each level as its own
rule-file text, groups and rule bodies copied as they are. `settings` replace the expression of named
recording rules: the documented way to set a site value (alerts/README.md, "Overrides"), e.g. the bytes
per PortXmitWait tick of a fabric; a name that is not a recording rule of the files is an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from postmortem.replay.errors import ReplayError

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass(frozen=True)
class Rule:
    """One rule: its group, its body as written (a mapping) and where it came from."""

    group: str
    interval: str | None
    body: Mapping[str, Any]
    source: str

    @property
    def name(self) -> str:
        """The recorded metric or the alert name."""
        return str(self.body.get("record") or self.body.get("alert") or "")

    @property
    def is_alert(self) -> bool:
        """True for an alerting rule."""
        return "alert" in self.body

    @property
    def expr(self) -> str:
        """The PromQL expression."""
        return str(self.body.get("expr", ""))

    @property
    def severity(self) -> str:
        """The `severity` label ("" when none)."""
        return str((self.body.get("labels") or {}).get("severity", ""))

    @property
    def annotations(self) -> Mapping[str, str]:
        """The rule's annotations (templates as written)."""
        return {str(k): str(v) for k, v in (self.body.get("annotations") or {}).items()}


@dataclass
class RuleSet:
    """Every rule of some rule files, in file and group order."""

    files: tuple[Path, ...]
    rules: list[Rule] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, paths: Sequence[Path], settings: Mapping[str, str] | None = None) -> RuleSet:
        """Read rule files (a directory means its `*.yml` and `*.yaml`); ReplayError lists every problem."""
        files = _expand(paths)
        problems: list[str] = []
        rules: list[Rule] = []
        for path in files:
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                problems.append(f"{path}: {exc}")
                continue
            groups = data.get("groups") if isinstance(data, dict) else None
            if not isinstance(groups, list):
                problems.append(f"{path}: no `groups` list")
                continue
            for index, group in enumerate(groups):
                if not isinstance(group, dict) or not isinstance(group.get("rules"), list):
                    problems.append(f"{path}: groups[{index}] has no `rules` list")
                    continue
                interval = str(group["interval"]) if "interval" in group else None
                for body in group["rules"]:
                    if (
                        not isinstance(body, dict)
                        or not ({"record", "alert"} & set(body))
                        or "expr" not in body
                    ):
                        problems.append(
                            f"{path}: group {group.get('name')!r}: a rule without record/alert/expr"
                        )
                        continue
                    rules.append(Rule(str(group.get("name", f"group{index}")), interval, body, str(path)))
        wanted = dict(settings or {})
        recorded = {r.name for r in rules if not r.is_alert}
        problems += [
            f"setting {name!r}: no recording rule of that name" for name in wanted if name not in recorded
        ]
        if not files:
            problems.append("no rule files (give *.yml files or a directory holding them)")
        if problems:
            raise ReplayError("rules: " + "; ".join(problems))
        changed = [
            Rule(r.group, r.interval, {**r.body, "expr": wanted[r.name]}, r.source)
            if not r.is_alert and r.name in wanted
            else r
            for r in rules
        ]
        return cls(files, changed, wanted)

    def alerts(self) -> list[Rule]:
        """The alerting rules."""
        return [r for r in self.rules if r.is_alert]

    def alert(self, name: str, severity: str = "") -> Rule | None:
        """The alerting rule `name` (with that severity when several share the name)."""
        found = [r for r in self.alerts() if r.name == name]
        exact = [r for r in found if r.severity == severity]
        chosen = exact or found
        return chosen[0] if chosen else None

    def metric_names(self) -> set[str]:
        """Every name an expression mentions (metrics, functions and keywords alike; a superset)."""
        return {token for r in self.rules for token in NAME.findall(r.expr)}

    def level_of(self) -> dict[int, int]:
        """Rule index -> dependency level (0: reads no recording rule of the set)."""
        producers: dict[str, list[int]] = {}
        for i, rule in enumerate(self.rules):
            if not rule.is_alert:
                producers.setdefault(rule.name, []).append(i)
        levels: dict[int, int] = {}

        def level(i: int, seen: frozenset[int]) -> int:
            if i in levels:
                return levels[i]
            if i in seen:
                raise ReplayError(
                    f"rules: recording rules depend on each other in a cycle ({self.rules[i].name})"
                )
            tokens = set(NAME.findall(self.rules[i].expr))
            deps = [j for token in tokens for j in producers.get(token, []) if j != i]
            value = 1 + max((level(j, seen | {i}) for j in deps), default=-1)
            levels[i] = value
            return value

        for i in range(len(self.rules)):
            level(i, frozenset())
        return levels

    def levels(self) -> list[str]:
        """One rule-file text per dependency level, lowest first (groups keep their names and intervals)."""
        by_level = self.level_of()
        out = []
        for lvl in range(max(by_level.values(), default=-1) + 1):
            groups: dict[tuple[str, str | None], list[Mapping[str, Any]]] = {}
            for i, rule in enumerate(self.rules):
                if by_level[i] == lvl:
                    groups.setdefault((rule.group, rule.interval), []).append(dict(rule.body))
            doc = {
                "groups": [
                    {"name": name, **({"interval": interval} if interval else {}), "rules": bodies}
                    for (name, interval), bodies in groups.items()
                ]
            }
            out.append(yaml.safe_dump(doc, sort_keys=False))
        return out


def _expand(paths: Sequence[Path]) -> tuple[Path, ...]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted([*path.glob("*.yml"), *path.glob("*.yaml")])
        else:
            files.append(path)
    return tuple(files)
