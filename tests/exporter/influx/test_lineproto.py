"""Line protocol: escaping matches influxdb-client's Point byte for byte; values, chunks, label parsing."""

from __future__ import annotations

import math
from typing import Any

import pytest
from influxdb_client.client.write.point import Point

from exporter.influx.lineproto import LineEncoder, format_value, parse_labels, series_prefix
from foundation.exposition import MetricFamily, MetricSpec, render_labels

TRICKY = [
    "plain",
    "with space",
    "a,b",
    "k=v",
    "all of ,= them",
    'quote"d',
    "back\\slash",
    "ends\\",
    "new\nline",
    "tab\tand\rcr",
    "ünïcode",
    "",
]


def _point_line(name: str, tags: dict[str, str], value: float, ts: int) -> str:
    make: Any = Point  # influxdb-client leaves Point unannotated
    point = make(name).field("value", float(value)).time(ts)
    for key, tag in tags.items():
        point = point.tag(key, tag)
    return str(point.to_line_protocol())


@pytest.mark.parametrize("text", TRICKY)
def test_tag_values_are_escaped_as_influxdb_client_does(text: str) -> None:
    tags = {"device": text, "port": "1"}
    ours = series_prefix("ibpool_x", tags.items()) + "1.5 123"
    assert ours == _point_line("ibpool_x", tags, 1.5, 123)


@pytest.mark.parametrize("text", [t for t in TRICKY if t])
def test_names_and_tag_keys_are_escaped_as_influxdb_client_does(text: str) -> None:
    ours = series_prefix(text, [(text, "v")]) + "2 7"
    assert ours == _point_line(text, {text: "v"}, 2.0, 7)


def test_empty_tag_values_are_left_out_and_tags_sorted() -> None:
    assert series_prefix("m", [("z", "1"), ("a", ""), ("b", "2")]) == "m,b=2,z=1 value="


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3, "3"),
        (3.0, "3"),
        (0.25, "0.25"),
        (-1.5, "-1.5"),
        (1e20, "1e+20"),
        (2**64 - 1, "18446744073709551615"),
    ],
)
def test_values_are_float_fields(value: float, text: str) -> None:
    assert format_value(value) == text
    if isinstance(value, float):
        assert _point_line("m", {}, value, 1) == f"m value={text} 1"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_values_line_protocol_cannot_carry_are_none(value: float) -> None:
    assert format_value(value) is None


@pytest.mark.parametrize("text", [t for t in TRICKY if t])
def test_parse_labels_inverts_render_labels(text: str) -> None:
    names = ("a", "b", "c")
    values = (text, "x", text + "!")
    assert parse_labels(names, render_labels(names, values)) == list(zip(names, values, strict=True))


def test_parse_labels_rejects_a_string_of_other_names() -> None:
    with pytest.raises(ValueError, match="not found"):
        parse_labels(("a",), render_labels(("b",), ("1",)))


SPEC = MetricSpec("ibpool_test_ratio", "gauge", "Test.", ("device", "port"))


def test_encoder_writes_one_line_per_sample_and_skips_non_finite() -> None:
    family = MetricFamily(SPEC)
    family.add(("mlx5 0", "1"), 0.5)
    family.add(("mlx5,1", "1"), math.nan)
    family.add(("mlx5=2", "1"), 7)
    chunks, skipped = LineEncoder().encode([family], 1_700_000_000_000_000_000)
    assert skipped == 1
    assert [c.points for c in chunks] == [2]
    assert chunks[0].payload.decode().splitlines() == [
        r"ibpool_test_ratio,device=mlx5\ 0,port=1 value=0.5 1700000000000000000",
        r"ibpool_test_ratio,device=mlx5\=2,port=1 value=7 1700000000000000000",
    ]


def test_encoder_splits_a_collection_into_chunks_of_at_most_chunk_points() -> None:
    family = MetricFamily(SPEC)
    for i in range(7):
        family.add((f"d{i}", "1"), i)
    chunks, _ = LineEncoder(chunk_points=3).encode([family], 5)
    assert [c.points for c in chunks] == [3, 3, 1]
    assert all(c.timestamp_ns == 5 for c in chunks)
    assert b"".join(c.payload for c in chunks).count(b"\n") == 7


def test_encoder_output_equals_influxdb_client_serialisation() -> None:
    family = MetricFamily(SPEC)
    for i, text in enumerate(TRICKY):
        family.add((text, str(i)), i / 3)
    chunks, _ = LineEncoder().encode([family], 99)
    expected = [
        _point_line(SPEC.name, {"device": text, "port": str(i)}, i / 3, 99) for i, text in enumerate(TRICKY)
    ]
    assert chunks[0].payload.decode().split("\n")[:-1] == expected
