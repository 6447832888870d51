"""Decisions: what the recommender proposed, what the hooks applied, and VL weights live against desired."""

from __future__ import annotations

from typing import Any

from dashboards.base import dashboard
from dashboards.layout import Row
from dashboards.panels import Q, stat, table, timeseries
from dashboards.variables import label_values

UID = "ibpool-decisions"
TARGETS = 'target=~"$target"'
WEIGHT = "max by (table, vl) (ibpool_vl_weight{{{}}})"


def _proposals() -> Row:
    return Row(
        "Proposals",
        [
            stat("Pending", [Q('sum(ibpool_proposals{state="pending"})')], "none"),
            stat("Approved", [Q('sum(ibpool_proposals{state="approved"})')], "none"),
            stat(
                "Failed",
                [Q('sum(ibpool_proposals{state=~"failed|rolled_back"})')],
                "none",
                thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
            ),
            stat(
                "Oldest pending",
                [Q("time() - min(ibpool_proposal_oldest_pending_timestamp_seconds)")],
                "s",
                "Age of the oldest proposal waiting for approval (IbpoolProposalPendingTooLong above 1 h).",
                thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 3600}],
                no_value="none pending",
            ),
            timeseries(
                "Proposals by state",
                [Q("sum by (state) (ibpool_proposals)", "{{state}}")],
                "none",
                stack=True,
            ),
        ],
        height=8,
        widths=(4, 4, 4, 4, 8),
    )


def _changes() -> Row:
    increase = f"increase(ibpool_changes_applied_total{{{TARGETS}}}[$__rate_interval])"
    return Row(
        "Changes",
        [
            timeseries(
                "Changes applied and failed",
                [Q(f"sum by (target, result) ({increase}) > 0", "{{target}} {{result}}")],
                "none",
                "Changes made by the hooks, by target and result.",
                bars=True,
            ),
            table(
                "Changes by target (since the hooks started)",
                [Q(f"sum by (target, result) (ibpool_changes_applied_total{{{TARGETS}}})")],
                rename={"Value": "changes"},
                sort_by="changes",
            ),
        ],
        height=9,
        widths=(16, 8),
    )


def _weights() -> Row:
    live, desired = 'source="live"', 'source="desired"'
    drift = f"{WEIGHT.format(desired)} - {WEIGHT.format(live)} != 0"
    return Row(
        "VL arbitration weights",
        [
            timeseries(
                "Weights: live and desired",
                [
                    Q(WEIGHT.format(live), "{{table}} VL{{vl}} live"),
                    Q(WEIGHT.format(desired), "{{table}} VL{{vl}} desired"),
                ],
                "none",
                "VL arbitration weights (0-255): read back from the fabric, and wanted by policy.",
            ),
            table(
                "Weights now",
                [Q(WEIGHT.format(live), "live"), Q(WEIGHT.format(desired), "desired")],
                rename={"Value #A": "live", "Value #B": "desired"},
            ),
            table(
                "Weights not yet applied (desired - live)",
                [Q(drift)],
                hide=("Time",),
                rename={"Value": "desired - live"},
            ),
        ],
        height=9,
        widths=(12, 6, 6),
    )


def build() -> Any:
    """The decisions dashboard."""
    return dashboard(
        UID,
        "ibpool / Decisions",
        "Proposals by state, changes applied and failed, VL arbitration weights live against desired.",
        [_proposals(), _changes(), _weights()],
        variables=[label_values("target", "ibpool_changes_applied_total", "target", title="Change target")],
    )
