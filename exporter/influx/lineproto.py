"""InfluxDB line protocol for metric families: measurement = metric name, tags = labels, one field `value`.

Escaping is influxdb-client's (`Point.to_line_protocol`, checked byte for byte by the tests): `,` and space
(and newline, tab, CR as `\\n`, `\\t`, `\\r`) in the measurement; `=` too in tag keys and values; a tag value
that ends in a backslash gets a space; empty tag values are left out; tags are sorted by key. Values are
always written as floats (`value=3`, never the integer form `3i`), so a series never changes field type;
NaN and +-Inf, which line protocol cannot carry, are skipped and counted.

Target labels (`target_labels`): added to every point as a scrape adds them, a clashing own label renamed
`exported_<name>`, so a pushed series has the name and labels Prometheus would store it under.

Speed: each series' `measurement,tags value=` prefix is built once (parsing the family's pre-rendered
Prometheus label string) and cached, so a point costs one dict lookup and a string join.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from exporter.influx import target_labels
from foundation.exposition import MetricFamily, MetricSpec

FIELD = "value"
_ESCAPE_MEASUREMENT = str.maketrans({",": r"\,", " ": r"\ ", "\n": r"\n", "\t": r"\t", "\r": r"\r"})
_ESCAPE_KEY = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ ", "\n": r"\n", "\t": r"\t", "\r": r"\r"})
_PROM_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


def escape_measurement(name: str) -> str:
    """A measurement name as line protocol writes it."""
    return name.translate(_ESCAPE_MEASUREMENT)


def escape_key(key: str) -> str:
    """A tag key or field key as line protocol writes it."""
    return key.translate(_ESCAPE_KEY)


def escape_tag_value(value: str) -> str:
    """A tag value as line protocol writes it (a trailing backslash would escape the separator)."""
    escaped = value.translate(_ESCAPE_KEY)
    return escaped + " " if escaped.endswith("\\") else escaped


def format_value(value: float) -> str | None:
    """A sample value as a float field value; None for NaN and +-Inf."""
    if type(value) is int:
        return str(value)
    number = float(value)
    if number - number != 0:  # NaN or infinite
        return None
    text = repr(number)
    return text[:-2] if text.endswith(".0") else text


def series_prefix(measurement: str, tags: Iterable[tuple[str, str]], field: str = FIELD) -> str:
    """`measurement,k=v,... field=`: everything of a point before its value."""
    parts = [escape_measurement(measurement)]
    for key, value in sorted(tags):
        k, v = escape_key(key), escape_tag_value(value)
        if k and v:
            parts.append(f"{k}={v}")
    return ",".join(parts) + f" {escape_key(field)}="


def parse_labels(names: Sequence[str], rendered: str) -> list[tuple[str, str]]:
    """(name, value) pairs from a label string rendered by `exposition.render_labels` for `names`."""
    if not names:
        return []
    pairs: list[tuple[str, str]] = []
    pos = 1  # after "{"
    for name in names:
        start = pos + len(name) + 2  # after `name="`
        if rendered[pos : start - 2] != name or rendered[start - 2 : start] != '="':
            raise ValueError(f"label {name!r} not found in {rendered!r}")
        chars: list[str] = []
        i = start
        while rendered[i] != '"':
            if rendered[i] == "\\":
                i += 1
                chars.append(_PROM_UNESCAPE.get(rendered[i], rendered[i]))
            else:
                chars.append(rendered[i])
            i += 1
        pairs.append((name, "".join(chars)))
        pos = i + 2  # after `",` or `"}`
    return pairs


@dataclass(frozen=True)
class Chunk:
    """Encoded points of one collection: newline-terminated lines, all with the same timestamp."""

    payload: bytes
    points: int
    timestamp_ns: int


class LineEncoder:
    """Encodes collections into chunks of at most `chunk_points` lines, caching every series' prefix;
    `target` labels are added to every series (`target_labels.apply`)."""

    def __init__(
        self, chunk_points: int = 5000, max_series: int = 500_000, target: target_labels.Labels = ()
    ) -> None:
        if chunk_points < 1:
            raise ValueError("chunk_points must be >= 1")
        self.chunk_points = chunk_points
        self._max_series = max_series
        self._target = target
        self._prefixes: dict[tuple[str, str], str] = {}

    def prefix(self, spec: MetricSpec, rendered: str) -> str:
        """The cached line prefix of one series."""
        key = (spec.name, rendered)
        found = self._prefixes.get(key)
        if found is None:
            if len(self._prefixes) >= self._max_series:
                self._prefixes.clear()
            own = parse_labels(spec.labels, rendered)
            found = series_prefix(spec.name, target_labels.apply(own, self._target))
            self._prefixes[key] = found
        return found

    def encode(self, families: Iterable[MetricFamily], timestamp_ns: int) -> tuple[list[Chunk], int]:
        """(chunks, points skipped because their value is not finite) for one collection."""
        stamp = f" {timestamp_ns}\n"
        prefixes = self._prefixes
        lines: list[str] = []
        skipped = 0
        for family in families:
            spec, name = family.spec, family.spec.name
            for rendered, value in family.samples:
                head = prefixes.get((name, rendered)) or self.prefix(spec, rendered)
                if type(value) is float and value - value == 0:
                    text = repr(value)
                    if text.endswith(".0"):
                        text = text[:-2]
                elif type(value) is int:
                    text = str(value)
                else:
                    formatted = format_value(value)
                    if formatted is None:
                        skipped += 1
                        continue
                    text = formatted
                lines.append(head + text + stamp)
        size = self.chunk_points
        chunks = [
            Chunk("".join(lines[i : i + size]).encode(), len(lines[i : i + size]), timestamp_ns)
            for i in range(0, len(lines), size)
        ]
        return chunks, skipped
