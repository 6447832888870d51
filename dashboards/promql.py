"""Just enough PromQL reading for checks: metric names, range selectors, Grafana variable substitution."""

from __future__ import annotations

import re
from collections.abc import Mapping

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[([^\[\]]*)\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_]\w*)(?::\w+)?\}|([A-Za-z_]\w*))")  # not label_replace's $1
_DURATION = re.compile(r"(?<![\w:.])(?:\d+(?:ms|[smhdwy]))+(?![\w:])")
_NUMBER = re.compile(r"(?<![\w:.])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.*?)\s*,\s*(\w+)\s*\)\s*$", re.DOTALL)
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
    | {"inf", "nan", "Inf", "NaN"}
)

BUILTIN_VARIABLES = ("__rate_interval", "__interval", "__range")


def _strip(expr: str) -> str:
    return _STRING.sub('""', expr)


def range_selectors(expr: str) -> list[str]:
    """The text inside every `[...]` (range or subquery) of `expr`."""
    return _RANGE.findall(_strip(expr))


def metric_names(expr: str) -> set[str]:
    """Metric names `expr` selects (bare names; `{__name__=...}` selectors are not seen)."""
    text = _strip(expr)
    for pattern in (_MATCHERS, _RANGE, _GROUPING, _VARIABLE, _DURATION, _NUMBER):
        text = pattern.sub(" ", text)
    names = set()
    for match in _IDENT.finditer(text):
        rest = text[match.end() :].lstrip()
        if match.group() not in _KEYWORDS and not rest.startswith("("):
            names.add(match.group())
    return names


def variables(expr: str) -> set[str]:
    """Names of the Grafana variables `expr` refers to (`$x`, `${x}`, `${x:fmt}`)."""
    return {a or b for a, b in _VARIABLE.findall(expr)}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """`expr` with every Grafana variable replaced by `values[name]`; an unknown one raises KeyError."""

    def one(match: re.Match[str]) -> str:
        return values[match.group(1) or match.group(2)]

    return _VARIABLE.sub(one, expr)


def parse_label_values(query: str) -> tuple[str, str] | None:
    """(series selector, label) of a `label_values(selector, label)` variable query, else None."""
    match = _LABEL_VALUES.match(query)
    return (match.group(1), match.group(2)) if match else None
