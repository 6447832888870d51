"""Scopes every query to the dashboard's `cluster` and `job` variables, so one dashboard serves any setup.

`scoped(expr)` adds `cluster=~"$cluster"` to every series selector of `expr`, and `job=~"$job"` to those
of raw metrics (recorded series and ALERTS carry no scrape job); a selector that already matches the
label keeps its own matcher. Both variables default to All (`.*`), which also matches series without the
label, so a Prometheus without a `cluster` label loses nothing. Rules: only selectors change; strings,
ranges, function and aggregation names and the label lists of by/without/on/ignoring/group_* are left as
they are.
"""

from __future__ import annotations

import re

CLUSTER = 'cluster=~"$cluster"'
JOB = 'job=~"$job"'

_TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{\w+(?::\w+)?\}|\$\w+)
  | (?P<braces>\{[^{}]*\})
  | (?P<range>\[[^\[\]]*\])
  | (?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?:ms|[smhdwy])*)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<space>\s+)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"})
_AGGREGATIONS = frozenset(
    {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values"}
    | {"group", "limitk", "limit_ratio"}
)
_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def matchers_for(name: str) -> tuple[str, ...]:
    """The scope matchers a selector of metric `name` gets."""
    if ":" in name or name == "ALERTS":
        return (CLUSTER,)
    return (CLUSTER, JOB)


def _with(braces: str, matchers: tuple[str, ...]) -> str:
    """`{a="b"}` with the matchers whose label it does not match yet."""
    inner = braces[1:-1].strip()
    present = set(_LABEL.findall(inner))
    extra = [m for m in matchers if m.split("=~", 1)[0] not in present]
    joined = ", ".join(p for p in (inner, *extra) if p)
    return "{" + joined + "}" if joined else ""


def scoped(expr: str, matchers: tuple[str, ...] | None = None) -> str:
    """`expr` with every series selector scoped (`matchers` instead of the per-name default if given)."""
    tokens = [(m.lastgroup or "other", m.group()) for m in _TOKEN.finditer(expr)]
    out: list[str] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = _next(tokens, i + 1)
        if kind != "ident" or text in _KEYWORDS:
            out.append(text)
            i += 1
            continue
        if text in _GROUPING:
            end = _skip_parens(tokens, nxt) if nxt is not None and tokens[nxt][1] == "(" else i + 1
            out.extend(t for _, t in tokens[i:end])
            i = end
            continue
        if text in _AGGREGATIONS or (nxt is not None and tokens[nxt][1] == "("):
            out.append(text)  # a function or an aggregation
            i += 1
            continue
        wanted = matchers if matchers is not None else matchers_for(text)
        if i + 1 < len(tokens) and tokens[i + 1][0] == "braces":
            out.extend((text, _with(tokens[i + 1][1], wanted)))
            i += 2
        else:
            out.extend((text, _with("{}", wanted)))
            i += 1
    return "".join(out)


def _next(tokens: list[tuple[str, str]], start: int) -> int | None:
    """Index of the next token that is not white space."""
    for j in range(start, len(tokens)):
        if tokens[j][0] != "space":
            return j
    return None


def _skip_parens(tokens: list[tuple[str, str]], start: int) -> int:
    """Index just past the parenthesis that closes the one at `start`."""
    depth = 0
    for j in range(start, len(tokens)):
        if tokens[j][1] == "(":
            depth += 1
        elif tokens[j][1] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(tokens)
