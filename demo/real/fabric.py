"""ibsim from the model's topology with a console FIFO, and OpenSM with QoS on and the model's tables.

Starting and stopping is `simulator.backends.ibsim_run.Ibsim`'s (its own `IBSIM_SOCKNAME`, OpenSM under
the umad2sim preload, OpenSM stopped and waited for before ibsim, in every exit path). This adds the demo's
OpenSM files: `opensm.conf` (QoS tables = the model's), `qos-policy.conf` and `partitions.conf` (minimal:
the demo changes VL arbitration only). Diagnostics run in a scratch directory (umad2sim writes `./sys-PID`
trees there).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path

from simulator.backends import first_hca, render_net
from simulator.backends.errors import ProcessError
from simulator.backends.ibsim_run import UMAD2SIM, Ibsim
from simulator.backends.processes import StartStop, program, which
from simulator.cluster.model import ClusterModel

__all__ = ["UMAD2SIM", "RealError", "RealFabric", "program", "which"]

RealError = ProcessError  # a real program did not start, answer or stop as expected


def _pairs(pairs: Sequence[tuple[int, int]]) -> str:
    return ",".join(f"{vl}:{weight}" for vl, weight in pairs)


class RealFabric(StartStop):
    """ibsim running the model's fat tree in `workdir`, then OpenSM on it."""

    def __init__(self, workdir: Path, model: ClusterModel) -> None:
        self.workdir = workdir
        self.model = model
        self.scratch = workdir / "diag"
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.ibsim = Ibsim(
            workdir,
            render_net(model.topology),
            attach=first_hca(model.topology),
            sockname=f"ibpooldemo{os.getpid()}_{uuid.uuid4().hex[:8]}",
            diag_dir=self.scratch,
        )
        self.osm_dir = workdir / "osm"
        self.osm_dir.mkdir(exist_ok=True)
        self.conf_path = self.osm_dir / "opensm.conf"
        self.policy_path = self.osm_dir / "qos-policy.conf"
        self.partitions_path = self.osm_dir / "partitions.conf"
        self.pid_file = self.osm_dir / "opensm.pid"
        self.osm_log = self.osm_dir / "osm.log"
        self.console = self.ibsim.commands

    @property
    def attach(self) -> str:
        """The node OpenSM and the diagnostics attach to."""
        return self.ibsim.attach

    @property
    def diag_env(self) -> dict[str, str]:
        """What attaches a diagnostic to this fabric (added to the inherited environment)."""
        return self.ibsim.diag_env

    def start(self, timeout: float = 60.0) -> None:
        """ibsim, then OpenSM with QoS; waits for `SUBNET UP`. Stops what it started on failure."""
        try:
            self.ibsim.start()
            self._write_files()
            self.ibsim.start_opensm(self._options(), timeout, pid_file=self.pid_file)
        except BaseException:
            self.stop()
            raise

    def _options(self) -> dict[str, str]:
        qos = self.model.qos()
        return {
            "sweep_interval": "0",
            "qos": "TRUE",
            "qos_max_vls": "8",
            "qos_high_limit": "4",
            "qos_vlarb_high": _pairs(qos.vlarb_high),
            "qos_vlarb_low": _pairs(qos.vlarb_low),
            "qos_sl2vl": ",".join(map(str, qos.sl2vl)),
        }

    def _write_files(self) -> None:
        self.policy_path.write_text(
            "# ibpool demo\nqos-levels\n    qos-level\n        name: DEFAULT\n        sl: 0\n"
            "    end-qos-level\nend-qos-levels\n",
            encoding="utf-8",
        )
        self.partitions_path.write_text("Default=0x7fff, ipoib : ALL=full ;\n", encoding="utf-8")

    def lid(self, node: str) -> int:
        """The LID of `node`'s first port, from the console's Dump (assigned once OpenSM swept)."""
        output = self.ibsim.console_run([f'Dump "{node}"'])
        for line in output.splitlines():
            match = re.match(r"^\S+\s+\[(\d+)\].*?\blid (\d+)\b", line)
            if match and int(match.group(2)) > 0:
                return int(match.group(2))
        raise RealError(f"no LID for {node} in ibsim's Dump")

    def run_diag(self, argv: Sequence[str], timeout: float = 20.0) -> str:
        """Run a diagnostic (smpquery, ...) against this fabric; its stdout, RealError on failure."""
        return self.ibsim.run_diag(argv, timeout).stdout

    def stop(self) -> None:
        """OpenSM (waited for), then ibsim; close the console. Idempotent."""
        self.ibsim.stop()
