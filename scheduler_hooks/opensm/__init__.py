"""The OpenSM adapter: VL arbitration, SL-to-VL, port-group SLs and members, partition members.

Targets: `opensm.vlarb_high`, `opensm.vlarb_low`, `opensm.sl2vl`, `opensm.port_group.<pool>.sl`,
`opensm.port_group.<pool>.members`, `opensm.partition.<pool>.members` (value forms: `targets`).
"""

from scheduler_hooks.opensm.adapter import OpenSMAdapter, Recovery, RollbackResult
from scheduler_hooks.opensm.config import DiagConfig, OpenSMConfig, VerifyConfig
from scheduler_hooks.opensm.model import Change, ChangeLike, LiveValue, Mismatch, Problem, VerifyResult
from scheduler_hooks.opensm.record import ApplyRecord, FileChange, Step
from scheduler_hooks.opensm.targets import Target, canonical, parse_target

__all__ = [
    "ApplyRecord",
    "Change",
    "ChangeLike",
    "DiagConfig",
    "FileChange",
    "LiveValue",
    "Mismatch",
    "OpenSMAdapter",
    "OpenSMConfig",
    "Problem",
    "Recovery",
    "RollbackResult",
    "Step",
    "Target",
    "VerifyConfig",
    "VerifyResult",
    "canonical",
    "parse_target",
]
