"""Slurm's compact lists: host lists (`node[01-03,7],gpu5`) and job-array task lists (`0-99:2%10`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_EXPANDED = 1_000_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TASK_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")
_NOT_IN_NAME = re.compile(r"[\[\],\s]")


def split_top_level(text: str, open_char: str = "[", close_char: str = "]") -> list[str]:
    """Split on commas that are not inside brackets; raise ValueError on unbalanced brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == open_char:
            depth += 1
        elif char == close_char:
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {close_char!r} in {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if depth:
        raise ValueError(f"unbalanced {open_char!r} in {text!r}")
    parts.append(text[start:])
    return parts


def _expand_ranges(inner: str, whole: str) -> list[str]:
    values: list[str] = []
    for part in inner.split(","):
        match = _RANGE.match(part)
        if match is None:
            raise ValueError(f"bad range {part!r} in {whole!r}")
        low_text, high_text = match.group(1), match.group(2) or match.group(1)
        low, high = int(low_text), int(high_text)
        if high < low or high - low >= MAX_EXPANDED:
            raise ValueError(f"bad range {part!r} in {whole!r}")
        width = len(low_text) if low_text.startswith("0") else 0
        values.extend(str(n).zfill(width) for n in range(low, high + 1))
    return values


def _expand_one(item: str, whole: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        if "]" in item:
            raise ValueError(f"unbalanced ']' in {whole!r}")
        return [item]
    close_at = item.find("]", open_at)
    if close_at < 0:
        raise ValueError(f"unbalanced '[' in {whole!r}")
    prefix, inner, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    tails = _expand_one(rest, whole) if rest else [""]
    return [f"{prefix}{value}{tail}" for value in _expand_ranges(inner, whole) for tail in tails]


def expand_hostlist(text: str) -> list[str]:
    """`node[1-3],gpu[01-02]-ib` -> node1, node2, node3, gpu01-ib, gpu02-ib (order kept, padding kept)."""
    text = text.strip()
    if not text or text == "(null)":
        return []
    names: list[str] = []
    for item in split_top_level(text):
        if not item:
            raise ValueError(f"empty host name in {text!r}")
        names.extend(_expand_one(item, text))
        if len(names) > MAX_EXPANDED:
            raise ValueError(f"host list {text[:40]!r}... expands to too many names")
    return names


def _ranges(numbers: list[int], width: int) -> list[tuple[int, str]]:
    """Consecutive runs of sorted `numbers` as (first, "a-b" or "a"), zero-padded to `width`."""
    runs: list[tuple[int, str]] = []
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        low, high = str(start).zfill(width), str(previous).zfill(width)
        runs.append((start, low if start == previous else f"{low}-{high}"))
        if number is not None:
            start = previous = number
    return runs


def compress_hostlist(names: Iterable[str]) -> str:
    """node1,node2,node3,node7,gpu01 -> gpu01,node[1-3,7]; `expand_hostlist` gives the names back.

    Duplicates are dropped. Digits with a leading zero keep their width (node[08-09,10]); names without
    trailing digits are written as they are. ValueError for a name with brackets, commas or spaces.
    """
    plain: set[str] = set()
    # prefix -> zero-padded width (0: not padded) -> numbers
    groups: dict[str, dict[int, set[int]]] = {}
    for name in names:
        if not name or _NOT_IN_NAME.search(name):
            raise ValueError(f"{name!r} is not a host name")
        match = _TRAILING_DIGITS.match(name)
        if match is None:
            plain.add(name)
            continue
        prefix, digits = match.groups()
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault(prefix, {}).setdefault(width, set()).add(int(digits))
    items = sorted(plain)
    for prefix, by_width in sorted(groups.items()):
        runs = sorted(run for width, numbers in by_width.items() for run in _ranges(sorted(numbers), width))
        texts = [text for _, text in runs]
        single = len(texts) == 1 and "-" not in texts[0]
        items.append(f"{prefix}{texts[0]}" if single else f"{prefix}[{','.join(texts)}]")
    return ",".join(items)


def count_array_tasks(text: str) -> int:
    """How many tasks a job-array task string names: `0-99%10` -> 100, `1,3,5-7` -> 5, `0-15:4` -> 4."""
    body = text.strip().strip("[]").partition("%")[0]
    if not body:
        raise ValueError(f"empty array task string {text!r}")
    total = 0
    for part in body.split(","):
        match = _TASK_RANGE.match(part)
        if match is None:
            raise ValueError(f"bad array task range {part!r} in {text!r}")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        step = int(match.group(3)) if match.group(3) else 1
        if high < low or step < 1:
            raise ValueError(f"bad array task range {part!r} in {text!r}")
        total += (high - low) // step + 1
    return total
