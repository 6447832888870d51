"""Proposal input limits: size, nesting and text length are refused with a clear error (exit 2), never
a traceback and never stored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proposals.errors import ProposalFormatError
from proposals.model import MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_ITEMS, MAX_TEXT_CHARS, from_json
from tests.proposals.factory import vl_weights_doc

REPO = Path(__file__).resolve().parents[2]
FUTURE = {"created_at": "2024-05-01T12:00:00Z", "expires_at": "2099-01-01T00:00:00Z"}


def submit(db: Path, source: Path | bytes) -> subprocess.CompletedProcess[bytes]:
    """`ibpool proposals submit` as a real process, from a file or from stdin."""
    name = str(source) if isinstance(source, Path) else "-"
    stdin = source if isinstance(source, bytes) else None
    command = [sys.executable, "-m", "ibpool", "proposals", "--db", str(db), "submit", name]
    return subprocess.run(command, cwd=REPO, input=stdin, capture_output=True, timeout=60, check=False)


def doc_bytes(**overrides: object) -> bytes:
    return json.dumps(vl_weights_doc(**FUTURE) | overrides).encode()


@pytest.mark.parametrize("from_stdin", [False, True])
def test_json_nested_100k_deep_is_refused(tmp_path: Path, from_stdin: bool) -> None:
    deep = b'{"kind": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path = tmp_path / "deep.json"
    path.write_bytes(deep)
    result = submit(tmp_path / "p.db", deep if from_stdin else path)
    err = result.stderr.decode()
    assert result.returncode == 2, err[-500:]
    assert f"nested deeper than {MAX_DEPTH} levels" in err and "Traceback" not in err
    assert not (tmp_path / "p.db").exists()


def test_a_5_mb_expected_effect_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(doc_bytes(expected_effect="x" * 5_000_000))
    result = submit(tmp_path / "p.db", path)
    err = result.stderr.decode()
    assert result.returncode == 2 and f"larger than {MAX_DOCUMENT_BYTES} bytes" in err, err[-500:]
    assert len(err) < 1000
    assert not (tmp_path / "p.db").exists()


def test_a_text_over_its_limit_is_refused_with_the_field(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_bytes(doc_bytes(expected_effect="y" * (MAX_TEXT_CHARS + 1)))
    result = submit(tmp_path / "p.db", path)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert f"expected_effect: {MAX_TEXT_CHARS + 1} characters; at most {MAX_TEXT_CHARS}" in err
    path.write_bytes(doc_bytes(expected_effect="y" * MAX_TEXT_CHARS))
    assert submit(tmp_path / "p.db", path).returncode == 0


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = "[[[[{{{{" * 20 + '\\"]]]'
    proposal = from_json(doc_bytes(expected_effect=text))
    assert proposal.expected_effect == text


def test_exactly_the_depth_limit_is_parsed() -> None:
    evidence = [{"query": "q", "window": "5m", "value": 1, "threshold": 0}]
    nested: object = evidence
    for _ in range(MAX_DEPTH - 3):
        nested = [nested]
    with pytest.raises(ProposalFormatError) as within:
        from_json(doc_bytes(evidence=nested))
    assert "nested deeper" not in str(within.value)  # parsed, then refused for its shape
    with pytest.raises(ProposalFormatError, match="nested deeper"):
        from_json(doc_bytes(evidence=[nested]))


def test_too_many_items_and_oversized_values_give_short_messages() -> None:
    change = {"target": "opensm.vlarb_low", "before": "0:1", "after": "0:2"}
    with pytest.raises(ProposalFormatError, match=f"changes: {MAX_ITEMS + 1} items; at most {MAX_ITEMS}"):
        from_json(doc_bytes(changes=[change] * (MAX_ITEMS + 1)))
    with pytest.raises(ProposalFormatError) as err:
        from_json(doc_bytes(kind="k" * 500_000))
    assert all(len(problem) < 400 for problem in err.value.problems)
