"""A small, conservative PromQL scanner: the metric selectors an expression reads.

It does not parse PromQL; it walks the text and skips what cannot name a metric: strings, comments,
numbers and durations, range and subquery brackets, function names (an identifier followed by `(`),
aggregation operators, keywords, and the label lists after by/without/on/ignoring/group_left/group_right.
Every other identifier is a metric name; the `{...}` right after it holds its label matchers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_AGGREGATORS = frozenset(
    {
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)
_LABEL_LIST_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}) | _LABEL_LIST_KEYWORDS
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_NUMBER = re.compile(
    r"(?:0[xX][0-9a-fA-F]+|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"(?:(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*)?"
)
_MATCH_OPERATORS = ("=~", "!~", "!=", "=")


class PromQLScanError(ValueError):
    """The expression has a construct the scanner does not understand."""


@dataclass(frozen=True)
class Matcher:
    """One label matcher: `label op "value"`."""

    label: str
    op: str
    value: str


@dataclass(frozen=True)
class Selector:
    """A metric the expression reads, with its label matchers."""

    name: str
    matchers: tuple[Matcher, ...] = ()


def selectors(expr: str) -> list[Selector]:
    """Every metric selector in `expr`, in order of appearance."""
    return _Scanner(expr).run()


def metric_names(expr: str) -> set[str]:
    """The names of the metrics `expr` reads."""
    return {s.name for s in selectors(expr)}


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.found: list[Selector] = []

    def run(self) -> list[Selector]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char.isspace():
                self.pos += 1
            elif char == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif char in "\"'`":
                self._string()
            elif char == "{":
                self._bare_matchers()
            elif char == "[":
                self._skip_to("]")
            elif char.isdigit() or (char == "." and text[self.pos + 1 : self.pos + 2].isdigit()):
                match = _NUMBER.match(text, self.pos)
                if match is None:  # pragma: no cover - the regex accepts any digit
                    raise PromQLScanError(f"bad number at {self.pos} in {text!r}")
                self.pos = match.end()
            elif _IDENTIFIER.match(char):
                self._identifier()
            else:
                self.pos += 1
        return self.found

    def _identifier(self) -> None:
        match = _IDENTIFIER.match(self.text, self.pos)
        assert match is not None
        word = match.group(0)
        self.pos = match.end()
        lowered = word.lower()
        following = self._peek()
        if lowered in _LABEL_LIST_KEYWORDS:
            if following == "(":
                self.pos = self._next_non_space()
                self._skip_to(")")
            return
        if lowered in _KEYWORDS or lowered in _AGGREGATORS or following == "(":
            return  # a keyword, an aggregation or a function name
        matchers: tuple[Matcher, ...] = ()
        if following == "{":
            self.pos = self._next_non_space()
            matchers = self._matchers()
        self.found.append(Selector(word, matchers))

    def _bare_matchers(self) -> None:
        """`{__name__="x", ...}` with no name in front: the name must be an exact matcher."""
        matchers = self._matchers()
        names = [m for m in matchers if m.label == "__name__"]
        if len(names) != 1 or names[0].op != "=":
            raise PromQLScanError(f"a selector without an exact metric name in {self.text!r}")
        rest = tuple(m for m in matchers if m.label != "__name__")
        self.found.append(Selector(names[0].value, rest))

    def _matchers(self) -> tuple[Matcher, ...]:
        """Label matchers from the `{` at self.pos to its `}`."""
        text = self.text
        self.pos += 1
        out: list[Matcher] = []
        while True:
            self.pos = self._next_non_space()
            if self.pos >= len(text):
                raise PromQLScanError(f"unclosed {{ in {text!r}")
            if text[self.pos] == "}":
                self.pos += 1
                return tuple(out)
            if text[self.pos] == ",":
                self.pos += 1
                continue
            name = _LABEL_NAME.match(text, self.pos)
            if name is None:
                raise PromQLScanError(f"bad label matcher at {self.pos} in {text!r}")
            self.pos = self._next_non_space(name.end())
            op = next((o for o in _MATCH_OPERATORS if text.startswith(o, self.pos)), None)
            if op is None:
                raise PromQLScanError(f"no match operator at {self.pos} in {text!r}")
            self.pos = self._next_non_space(self.pos + len(op))
            out.append(Matcher(name.group(0), op, self._string()))

    def _string(self) -> str:
        """The string literal at self.pos (escapes kept as written); moves past it."""
        text = self.text
        quote = text[self.pos] if self.pos < len(text) else ""
        if quote not in ("'", '"', "`"):
            raise PromQLScanError(f"expected a string at {self.pos} in {text!r}")
        end = self.pos + 1
        while end < len(text) and text[end] != quote:
            end += 2 if text[end] == "\\" and quote != "`" else 1
        if end >= len(text):
            raise PromQLScanError(f"unclosed string in {text!r}")
        value = text[self.pos + 1 : end]
        self.pos = end + 1
        return value

    def _skip_to(self, closing: str) -> None:
        end = self.text.find(closing, self.pos)
        if end < 0:
            raise PromQLScanError(f"no {closing} after {self.pos} in {self.text!r}")
        self.pos = end + 1

    def _next_non_space(self, start: int | None = None) -> int:
        pos = self.pos if start is None else start
        while pos < len(self.text) and self.text[pos].isspace():
            pos += 1
        return pos

    def _peek(self) -> str:
        pos = self._next_non_space()
        return self.text[pos] if pos < len(self.text) else ""
