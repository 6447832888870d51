"""Proposals: the format, the store, the audit log and the approval rules (ARCHITECTURE §4).

Shared by the recommender (which proposes) and the scheduler hooks (which apply); it imports neither.

Format
    A proposal is frozen data (`proposals.model.Proposal`) serialised as canonical JSON: sorted keys, no
    spaces, UTF-8, timestamps as RFC 3339 UTC text with `Z` (seconds; microseconds only when not zero),
    numbers in evidence as floats. Its id is the sha256 hex of those bytes, so the same content always has
    the same id whatever the key order or whitespace of the file it came from. Example file::

        {"kind": "set_vl_weights",
         "changes": [{"target": "opensm.vlarb_low", "before": "0:32,1:32", "after": "0:64,1:32"}],
         "evidence": [{"query": "pool:ib_port_wait:ratio5m{pool=\\"a\\"}", "window": "15m",
                       "value": 0.42, "threshold": 0.3}],
         "expected_effect": "pool a all-reduce wait below 10%",
         "created_at": "2024-05-01T12:00:00Z", "expires_at": "2024-05-01T13:00:00Z",
         "policy": "bandwidth-quota"}

    `evidence` may be an empty list (a proposal written by an operator); `changes` may not. An `id` key is
    accepted when it equals the content id (so `show` output can be fed back).

Targets (`proposals.targets`; use its parse/format helpers on both sides)
    `opensm.vlarb_high`, `opensm.vlarb_low`
        OpenSM's `qos_vlarb_high` / `qos_vlarb_low`: `VL:weight,...` in table order, decimal, no spaces,
        data VLs 0-14, weights 0-255, each VL at most once (e.g. `0:64,1:32,2:0`).
    `opensm.sl2vl`
        OpenSM's `qos_sl2vl`: 16 comma-separated VLs (0-15), one per SL 0-15.
    `opensm.port_group.<pool>.sl`
        The service level (decimal 0-15) of the pool's port group in the QoS policy file.
    `opensm.partition.<pool>.members`
        The pool's partition in `partitions.conf`: port GUIDs `0x` + 16 lower-case hex digits, optional
        `=full|=limited|=both`, unique, sorted, comma-separated (empty: no members).
    `slurm.partition.<pool>.nodes`
        The full node list as `scontrol update PartitionName=<pool> Nodes=...` takes it: plain names (no
        hostlist ranges), unique, natural order (node2 before node10), comma-separated (empty: no nodes).
    `<pool>` is `[A-Za-z0-9_][A-Za-z0-9_-]*` (no dots). Kinds and the targets they may change:
    `move_nodes`: slurm.partition.*.nodes, opensm.partition.*.members (both sides of a move together);
    `set_vl_weights`: opensm.vlarb_high, opensm.vlarb_low, opensm.sl2vl;
    `set_port_group`: opensm.port_group.*.sl, opensm.sl2vl.
    Changes are applied in the order listed; `before` is what the hooks must read live (else: stale).

Lifecycle (`proposals.states`)
    pending -> approved | rejected | expired; approved -> applying | expired; applying -> applied | failed;
    failed -> rolled_back. Every transition and every refused decision is in the audit log; the hooks add
    per-step records with `Store.record_step`. `applying` found on start-up is an interrupted apply.

Who
    The proposer is the user given at submit, else `policy:<policy>`. Approvers are people (names that do
    not start with `policy:`) or an approval policy file, recorded as `policy:<name>`; never the proposer.
    Beside each declared name the audit log keeps the identity the system vouched for (`actor`: the OS
    account, SUDO_USER under root, the HTTP user of `ibpool approval-server`); a person's approval is
    refused when any of the approver's names is one of the proposer's. Trust model: docs/approvals.md.

Store location
    `--db PATH`, else the environment variable `IBPOOL_DB`, else `/var/lib/ibpool/ibpool.db`.
"""
