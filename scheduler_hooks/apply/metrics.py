"""`ibpool_changes_applied_total{target,result}`, counted from the store's audit log.

`ibpool apply` is a short-lived command, so the counts live where its transitions do: every `applied`,
`failed` and `rolled_back` transition in the audit log counts once for each system (`opensm`, `slurm`)
the proposal changes. The counts survive restarts, and they cannot disagree with the proposals' states.
A long-running exporter (the recommender's) calls `changes_applied_family(store)` on each scrape.

Imports neither an adapter nor anything that acts: safe for the recommender to use.
"""

from __future__ import annotations

from foundation.exposition import MetricFamily, MetricSpec
from proposals.model import Proposal
from proposals.records import OK
from proposals.states import APPLIED, FAILED, ROLLED_BACK
from proposals.store import Store

TARGETS = ("opensm", "slurm")
RESULTS = (APPLIED, FAILED, ROLLED_BACK)
CHANGES_APPLIED = MetricSpec(
    "ibpool_changes_applied_total",
    "counter",
    "Approved changes the hooks tried to apply, by target (the system changed) and result.",
    ("target", "result"),
)


def systems(proposal: Proposal) -> tuple[str, ...]:
    """The systems a proposal changes (`opensm`, `slurm`), from its targets' first name part."""
    return tuple(sorted({change.target.partition(".")[0] for change in proposal.changes} & set(TARGETS)))


def changes_applied_counts(store: Store) -> dict[tuple[str, str], int]:
    """(target, result) -> count; every pair present, zero included."""
    counts = dict.fromkeys(((t, r) for t in TARGETS for r in RESULTS), 0)
    touched: dict[str, tuple[str, ...]] = {}
    for entry in store.audit():
        if entry.result != OK or entry.to_state not in RESULTS:
            continue
        if entry.proposal_id not in touched:
            touched[entry.proposal_id] = systems(store.get(entry.proposal_id).proposal)
        for target in touched[entry.proposal_id]:
            counts[(target, entry.to_state)] += 1
    return counts


def changes_applied_family(store: Store) -> MetricFamily:
    """The metric family, ready for `foundation.exposition.render`."""
    family = MetricFamily(CHANGES_APPLIED)
    for (target, result), count in sorted(changes_applied_counts(store).items()):
        family.add((target, result), float(count))
    return family
