"""A stand-in for OpenSM and the fabric, for adapter tests without ibsim.

The test process plays OpenSM: its SIGHUP handler copies the three files into the "applied" state, and
the scripted diagnostics answer from that state in the formats the real ones print (the topology is
the captured `ibnetdiscover -p` of a 4-node fabric: node1..node4 at LIDs 1, 5, 6, 7).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from scheduler_hooks.opensm import OpenSMAdapter, OpenSMConfig, VerifyConfig, conffile, partitions, policy
from scheduler_hooks.opensm.commands import Output
from scheduler_hooks.opensm.render import Texts
from scheduler_hooks.opensm.targets import parse_sl2vl, parse_vlarb

DATA = Path(__file__).parent / "data"
PORTS_REPORT = (DATA / "ibnetdiscover_p.txt").read_text()
GUIDS = {"node1": "0x0000000000100001", "node2": "0x0000000000100003", "node3": "0x0000000000100005"}
GUIDS["node4"] = "0x0000000000100007"
LID_GUID = {1: GUIDS["node1"], 5: GUIDS["node2"], 6: GUIDS["node3"], 7: GUIDS["node4"]}
CONF = """qos TRUE
qos_max_vls 8
qos_vlarb_high 0:4
qos_vlarb_low 0:0,1:64,2:32
qos_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
"""
POLICY = f"""port-groups
    port-group
        name: training
        port-guid: {GUIDS["node1"]}, {GUIDS["node2"]}
    end-port-group
    port-group
        name: inference
        port-guid: {GUIDS["node3"]}, {GUIDS["node4"]}
    end-port-group
end-port-groups
qos-levels
    qos-level
        name: DEFAULT
        sl: 0
    end-qos-level
end-qos-levels
"""
PARTITIONS = f"""Default=0x7fff : ALL=full ;
training=0x0002 : {GUIDS["node1"]}=full, {GUIDS["node2"]}=full ;
inference=0x0003 : {GUIDS["node3"]}=full, {GUIDS["node4"]}=full ;
"""


class FakeOpenSM:
    """Files in `directory`, an applied copy updated on SIGHUP, and diagnostics answering from it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.paths = {
            name: directory / name for name in ("opensm.conf", "qos-policy.conf", "partitions.conf")
        }
        for path, text in zip(self.paths.values(), (CONF, POLICY, PARTITIONS), strict=True):
            path.write_text(text)
        self.applied = self.read()
        self.hups = 0
        self.deaf = False  # True: SIGHUP arrives but nothing is re-read (a hung OpenSM)
        self.calls: list[str] = []
        self._previous: Any = None

    def read(self) -> Texts:
        """The files as they are now."""
        return Texts(*(p.read_text() for p in self.paths.values()))

    def __enter__(self) -> FakeOpenSM:
        self._previous = signal.signal(signal.SIGHUP, self._hup)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGHUP, self._previous)

    def _hup(self, signum: int, frame: FrameType | None) -> None:
        self.hups += 1
        if not self.deaf:
            self.applied = self.read()

    def config(self, state_dir: Path) -> OpenSMConfig:
        """An adapter config pointing at the files, signalling this process."""
        return OpenSMConfig(
            config_file=self.paths["opensm.conf"],
            qos_policy_file=self.paths["qos-policy.conf"],
            partitions_file=self.paths["partitions.conf"],
            state_dir=state_dir,
            pid=os.getpid(),
            process_name=None,
            verify=VerifyConfig(timeout=2.0, interval=0.01),
        )

    def adapter(self, state_dir: Path, **kwargs: Any) -> OpenSMAdapter:
        """An adapter whose diagnostics are answered by this fake."""
        return OpenSMAdapter(self.config(state_dir), runner=self, **kwargs)

    # --- the diagnostics -------------------------------------------------------------------------

    def __call__(self, argv: Sequence[str]) -> Output:
        args = list(argv[1:])
        self.calls.append(" ".join(args))
        program = Path(argv[0]).name
        if program == "ibnetdiscover":
            text = PORTS_REPORT
        elif program == "saquery":
            source, destination = (int(x) for x in args[-1].split(":"))
            text = self._path(source, destination)
        else:
            op, lid = args[0], int(args[1])
            text = {"vlarb": self._vlarb, "sl2vl": self._sl2vl, "pkeys": self._pkeys}[op](lid)
        return Output(tuple(argv), 0, text, "", 0.0)

    def _options(self) -> dict[str, str]:
        return conffile.parse_options(self.applied.config)

    def _vlarb(self, lid: int) -> str:
        def rows(key: str) -> list[str]:
            entries = (parse_vlarb(self._options()[key]) + [(0, 0)] * 8)[:8]
            vls = "".join(f"0x{vl:<2X}|" for vl, _ in entries)
            weights = "".join(f"0x{w:<2X}|" for _, w in entries)
            return [f"VL    : |{vls}", f"WEIGHT: |{weights}"]

        head = f"# VLArbitration tables: Lid {lid} port 1 LowCap 8 HighCap 8"
        lines = [head, "# Low priority VL Arbitration Table:", *rows("qos_vlarb_low")]
        lines += ["# High priority VL Arbitration Table:", *rows("qos_vlarb_high")]
        return "\n".join(lines) + "\n"

    def _sl2vl(self, lid: int) -> str:
        vls = parse_sl2vl(self._options()["qos_sl2vl"])
        return f"# SL2VL table: Lid {lid}\nports: in  0, out  0: |" + "".join(f"{v:2}|" for v in vls) + "\n"

    def _pkeys(self, lid: int) -> str:
        guid = LID_GUID.get(lid)
        keys = [0xFFFF]
        for statement in partitions.parse_partitions(self.applied.partitions or ""):
            members = partitions.port_memberships(statement) if statement.members is not None else {}
            if guid in members and statement.pkey is not None:
                keys.append(statement.pkey | (0x8000 if members[guid] != "limited" else 0))
        keys += [0] * (8 - len(keys))
        return "   0: " + " ".join(f"0x{k:04x}" for k in keys) + "\n64 pkeys capacity for this port\n"

    def _path(self, source: int, destination: int) -> str:
        doc = policy.parse_policy(self.applied.policy or "")
        sl = doc.default_sl() or 0
        for group in doc.of("port-group"):
            guids = set(group.values("port-guid"))
            if LID_GUID.get(source) in guids and LID_GUID.get(destination) in guids and group.name:
                sl = doc.group_sl(group.name) or 0
        fields = {"slid": source, "dlid": destination, "sl": f"0x{sl:x}", "pkey": "0xFFFF"}
        return "PathRecord dump:\n" + "".join(
            f"\t\t{k}" + "." * (24 - len(k)) + f"{v}\n" for k, v in fields.items()
        )
