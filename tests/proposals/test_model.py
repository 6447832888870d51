"""Proposal format: canonical JSON, content id, validation that reports every problem."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest

from proposals.errors import ProposalFormatError
from proposals.model import Change, Evidence, Proposal, canonical_bytes, from_dict, from_json
from tests.proposals.factory import move_doc, vl_weights_doc


def test_canonical_json_is_sorted_compact_utf8() -> None:
    p = from_dict(vl_weights_doc(expected_effect="débit du pool a"))
    text = p.canonical_json().decode("utf-8")
    assert " " not in text.replace("débit du pool a", "").replace("all-reduce", "")
    assert "débit" in text
    assert text.startswith(
        '{"changes":[{"after":"0:48,1:32","before":"0:32,1:32","target":"opensm.vlarb_low"}]'
    )
    assert '"created_at":"2024-05-01T12:00:00Z"' in text
    assert json.loads(text) == p.to_dict()


def test_id_is_stable_across_key_order_whitespace_and_offsets() -> None:
    doc = vl_weights_doc()
    compact = json.dumps(doc, separators=(",", ":"))
    reordered = json.dumps(dict(reversed(list(doc.items()))), indent=4)
    shifted = dict(doc, created_at="2024-05-01T14:00:00+02:00", expires_at="2024-05-01t14:00:00.000z")
    ids = {from_json(compact).id, from_json(reordered).id, from_json(json.dumps(shifted)).id}
    assert len(ids) == 1
    assert len(ids.pop()) == 64


def test_id_changes_with_content_and_integers_equal_floats() -> None:
    base = from_dict(vl_weights_doc())
    other = from_dict(vl_weights_doc(policy="other"))
    assert base.id != other.id
    evidence = [{"query": "q", "window": "5m", "value": 1, "threshold": 2}]
    as_int = from_dict(vl_weights_doc(evidence=evidence))
    as_float = from_dict(vl_weights_doc(evidence=[dict(evidence[0], value=1.0, threshold=2.0)]))
    assert as_int.id == as_float.id


def test_round_trip_and_matching_id_key_accepted() -> None:
    p = from_dict(move_doc(2))
    again = from_json(p.canonical_json())
    assert again == p
    assert from_dict(dict(p.to_dict(), id=p.id)) == p
    with pytest.raises(ProposalFormatError, match="id: does not match"):
        from_dict(dict(p.to_dict(), id="0" * 64))


def test_constructed_proposal_is_validated_and_equals_parsed() -> None:
    p = Proposal(
        kind="set_vl_weights",
        changes=(Change("opensm.vlarb_low", "0:32,1:32", "0:48,1:32"),),
        evidence=(Evidence('pool:port_wait:ratio{pool="a"}', "15m", 0.42, 0.3),),
        expected_effect="pool a all-reduce wait below 10%",
        created_at=datetime(2024, 5, 1, 12, tzinfo=UTC),
        expires_at=datetime(2024, 5, 1, 14, tzinfo=UTC),
        policy="bandwidth-quota",
    )
    assert p.id == from_dict(vl_weights_doc()).id
    with pytest.raises(ProposalFormatError) as err:
        Proposal("set_vl_weights", (), (), "", p.created_at, p.created_at, "x")
    assert err.value.problems == [
        "changes: must list at least one change",
        "expected_effect: must be a non-empty string, got ''",
        "expires_at: must be after created_at",
    ]


def test_every_problem_is_reported_with_its_key() -> None:
    doc = {
        "kind": "move_nodes",
        "changes": [
            {"target": "opensm.vlarb_low", "before": "0:32", "after": "0:300"},
            {"target": "slurm.partition.a.nodes", "before": "n2,n1", "after": "n[1-2]"},
            {"target": "slurm.partition.a.nodes", "before": "n1", "after": "n1"},
            {"target": "nowhere", "before": 3},
            "not an object",
        ],
        "evidence": [{"query": " ", "window": "5", "value": float("nan"), "threshold": True, "extra": 1}],
        "expected_effect": "",
        "created_at": "2024-05-01T12:00:00Z",
        "expires_at": "2024-02-30T00:00:00Z",
        "colour": "blue",
    }
    with pytest.raises(ProposalFormatError) as err:
        from_json(json.dumps(doc), "p.json")
    problems = err.value.problems
    expected = [
        "p.json: colour: unknown key",
        "p.json: policy: missing",
        "p.json: changes[3].after: missing",
        "p.json: changes[4]: must be an object with keys target, before, after",
        "p.json: changes[0].target: a move_nodes proposal cannot change opensm.vlarb_low",
        "p.json: changes[0].after: weight 300 of VL 0 is out of range 0-255",
        "p.json: changes[1].before: must be unique names in natural sort order: n1,n2",
        "p.json: changes[1].after: 'n[1-2]' is not a plain node name (no hostlist ranges, no spaces)",
        "p.json: changes[2].target: slurm.partition.a.nodes is changed more than once",
        "p.json: changes[2].after: equals before (nothing would change)",
        "p.json: changes[3].before: must be a string, got 3",
        "p.json: changes[3].target: unknown target 'nowhere'",
        "p.json: evidence[0].extra: unknown key",
        "p.json: evidence[0].query: must be a non-empty string, got ' '",
        "p.json: evidence[0].window: must be a duration like 5m or 1h30m, got '5'",
        "p.json: evidence[0].value: must be a finite number, got nan",
        "p.json: evidence[0].threshold: must be a finite number, got True",
        "p.json: expected_effect: must be a non-empty string, got ''",
        "p.json: expires_at: not a valid date and time",
    ]
    assert len(problems) == len(expected), "\n".join(problems)
    for want, got in zip(expected, problems, strict=True):
        assert got.startswith(want), f"{got!r} does not start with {want!r}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not valid JSON"),
        ("[]", "a proposal must be a JSON object"),
        ('{"kind": "set_vl_weights", "kind": "move_nodes"}', "kind: given more than once"),
    ],
)
def test_unreadable_documents(text: str, problem: str) -> None:
    with pytest.raises(ProposalFormatError) as err:
        from_json(text)
    assert any(problem in p for p in err.value.problems)


def test_kind_restricts_targets() -> None:
    change = {"target": "opensm.port_group.a.sl", "before": "0", "after": "1"}
    with pytest.raises(ProposalFormatError, match="a set_vl_weights proposal cannot change"):
        from_dict(vl_weights_doc(changes=[change]))
    assert from_dict(vl_weights_doc(kind="set_port_group", changes=[change])).kind == "set_port_group"


def test_empty_evidence_is_allowed_but_not_empty_changes() -> None:
    assert from_dict(vl_weights_doc(evidence=[])).evidence == ()
    with pytest.raises(ProposalFormatError, match="changes: must be a non-empty list"):
        from_dict(vl_weights_doc(changes=[]))


def test_text_that_cannot_be_canonical_is_refused() -> None:
    doc = vl_weights_doc(expected_effect="\ud800", policy="bad policy", created_at="2024-05-01T12:00:00Z\n")
    doc["evidence"][0]["value"] = 10**400
    with pytest.raises(ProposalFormatError) as err:
        from_dict(doc)
    assert [p.split(":")[0] for p in err.value.problems] == [
        "evidence[0].value",
        "expected_effect",
        "policy",
        "created_at",
    ]


# --- reclaim: the nodes a move_nodes proposal takes back by requeueing their jobs ------------------


def test_a_proposal_without_reclaim_keeps_its_id_and_drains() -> None:
    doc = move_doc(2)
    old = from_dict(doc)  # as stored before the field existed
    assert old.reclaim == "" and old.reclaim_nodes == ()
    assert "reclaim" not in old.to_dict() and b"reclaim" not in old.canonical_json()
    assert from_dict(dict(doc, reclaim="")).id == old.id  # empty is the same as absent
    # the id a store computed before the field existed: sha256 of the same canonical bytes
    legacy = dict(
        doc,
        evidence=[{"query": 'pool:pending_gpus{pool="b"}', "window": "30m", "value": 16.0, "threshold": 8.0}],
    )
    assert hashlib.sha256(canonical_bytes(legacy)).hexdigest() == old.id


def test_reclaim_round_trips_and_changes_the_id() -> None:
    p = from_dict(dict(move_doc(2), reclaim="a1,a2"))
    assert p.reclaim_nodes == ("a1", "a2")
    assert p.to_dict()["reclaim"] == "a1,a2"
    again = from_json(p.canonical_json())
    assert again == p and again.id == p.id
    assert p.id != from_dict(move_doc(2)).id
    assert from_dict(dict(p.to_dict(), id=p.id)) == p


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (dict(move_doc(2), reclaim="a2,a1"), "reclaim: must be unique names in natural sort order: a1,a2"),
        (dict(move_doc(2), reclaim=["a1"]), "reclaim: must be a node list string (empty: none), got ['a1']"),
        (dict(move_doc(2), reclaim="a1,a3"), "reclaim: a3 leave(s) no Slurm partition in the changes"),
        (dict(move_doc(2), reclaim="b1"), "reclaim: b1 leave(s) no Slurm partition"),
        (dict(vl_weights_doc(), reclaim="a1"), "reclaim: only a move_nodes proposal takes nodes back"),
    ],
)
def test_a_bad_reclaim_is_refused_with_its_key(doc: dict[str, object], problem: str) -> None:
    with pytest.raises(ProposalFormatError) as err:
        from_dict(doc)
    assert [p for p in err.value.problems if p.startswith(problem)], err.value.problems


def test_a_constructed_proposal_checks_reclaim_too() -> None:
    p = from_dict(move_doc(1))
    with pytest.raises(ProposalFormatError, match="reclaim: a2 leave"):
        Proposal(p.kind, p.changes, p.evidence, p.expected_effect, p.created_at, p.expires_at, p.policy, "a2")
    assert Proposal(
        p.kind, p.changes, p.evidence, p.expected_effect, p.created_at, p.expires_at, p.policy, "a1"
    ).reclaim_nodes == ("a1",)
