"""Slurm node states normalised to one lower-case word per node (the `state` label of node_state_info).

Slurm reports a base state (IDLE, MIXED, DOWN, ...) and flags (DRAIN, COMPLETING, NOT_RESPONDING, ...);
the normalised state is the first rule that matches, in the order of `NODE_STATES` (the table with every
rule: docs/scheduler-exporter.md). The names follow `sinfo --format=%T` without its suffix marks, with one
deliberate difference: a DOWN node that is also drained is `down` here (sinfo says `drained`): it is dead.
"""

from __future__ import annotations

from collections.abc import Iterable

NODE_STATES = (
    "invalid",
    "down",
    "draining",
    "drained",
    "failing",
    "fail",
    "error",
    "maint",
    "reboot",
    "powered_down",
    "powering_down",
    "powering_up",
    "allocated",
    "mixed",
    "completing",
    "reserved",
    "planned",
    "idle",
    "future",
    "unknown",
)
BASE_STATES = frozenset({"IDLE", "MIXED", "ALLOCATED", "DOWN", "ERROR", "FUTURE", "UNKNOWN"})
# Flags on an idle node, checked in this order; the first one present names the state.
_IDLE_FLAGS = (
    (("MAINTENANCE", "MAINT"), "maint"),
    (("REBOOT_REQUESTED", "REBOOT_ISSUED", "REBOOT"), "reboot"),
    (("POWERED_DOWN", "POWER_DOWN"), "powered_down"),
    (("POWERING_DOWN",), "powering_down"),
    (("POWERING_UP", "POWER_UP"), "powering_up"),
)


def normalise_node_state(base: str, flags: Iterable[str]) -> str:
    """One state from NODE_STATES for Slurm's base state and flags (any case; `ALLOC` is ALLOCATED)."""
    base = base.strip().upper()
    base = {"ALLOC": "ALLOCATED", "MIX": "MIXED"}.get(base, base)
    flag_set = {flag.strip().upper() for flag in flags}
    busy = base in ("ALLOCATED", "MIXED")
    if "INVALID_REG" in flag_set or "INVALID" in flag_set:
        return "invalid"
    if base == "DOWN" or "NOT_RESPONDING" in flag_set:
        return "down"
    if "DRAIN" in flag_set:
        return "draining" if busy or "COMPLETING" in flag_set else "drained"
    if "FAIL" in flag_set:
        return "failing" if busy or "COMPLETING" in flag_set else "fail"
    if base == "ERROR":
        return "error"
    if not busy:
        for names, state in _IDLE_FLAGS:
            if flag_set.intersection(names):
                return state
    if busy:
        return base.lower()
    if "COMPLETING" in flag_set:
        return "completing"
    if "RESERVED" in flag_set:
        return "reserved"
    if "PLANNED" in flag_set:
        return "planned"
    if base in ("IDLE", "FUTURE"):
        return base.lower()
    return "unknown"
