"""The real programs for the demo, the real apply sides on them, and the mirrors that keep the model in step.

    with RealBackends(run_dir / "real", model) as real:  # ibsim + OpenSM (QoS), munged, slurmctld, slurmds
        sides = real.sides(state_dir)  # OpenSMSide(OpenSMAdapter), SlurmSide(SlurmAdapter)
        real.push(model)               # each cycle: counters and link states into ibsim
        real.sync(model)               # after an applied change: fabric QoS and Slurm -> model

Between `start()` and `close()`, SIGTERM and SIGHUP raise SystemExit (in the main thread), so a killed
demo still stops everything: OpenSM before ibsim, slurmd before slurmctld.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from demo.real.fabric import RealFabric
from demo.real.slurm import RealSlurm
from scheduler_hooks.apply.opensm_side import OpenSMSide
from scheduler_hooks.apply.sides import Side
from scheduler_hooks.apply.slurm_side import SlurmSide
from scheduler_hooks.opensm import OpenSMConfig
from scheduler_hooks.opensm.config import DiagConfig, VerifyConfig
from scheduler_hooks.slurm import SlurmConfig
from simulator.backends import IbsimMirror, QosChange, SlurmMirror, SlurmSync, Smpquery, slurm_layout
from simulator.backends.ibsim_run import UMAD2SIM
from simulator.backends.processes import program, signals_raise, which
from simulator.cluster.model import ClusterModel

log = logging.getLogger(__name__)
PROGRAMS = ("ibsim", "opensm", "perfquery", "smpquery", "saquery", "slurmctld", "slurmd", "munged")
CLIENTS = ("scontrol", "sinfo", "squeue", "munge")


def missing() -> list[str]:
    """What `--real` needs and this machine lacks (root, programs, the umad2sim preload); [] when ready."""
    out = [] if os.geteuid() == 0 else ["root (run as root: it starts OpenSM, slurmctld and slurmd)"]
    out += [name for name in (*PROGRAMS, *CLIENTS) if which(name) is None]
    if not UMAD2SIM.is_file():
        out.append(str(UMAD2SIM))
    return out


@dataclass(frozen=True)
class Synced:
    """What one sync brought into the model."""

    qos: QosChange | None
    slurm: SlurmSync


class RealBackends:
    """ibsim/OpenSM and Slurm for `model`, started and stopped together."""

    def __init__(self, workdir: Path, model: ClusterModel) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.fabric = RealFabric(workdir / "fabric", model)
        self.slurm = RealSlurm(workdir / "slurm", slurm_layout(model))
        self.ibsim_mirror = IbsimMirror(model, self.fabric.console)
        self.slurm_mirror = SlurmMirror(model, {**os.environ, "SLURM_CONF": str(self.slurm.conf_path)})
        self.lid = 0
        self._sides: list[Side] = []
        self._signals = contextlib.ExitStack()

    def start(self) -> None:
        """Start everything; on a failure (Ctrl-C, SIGTERM too) stop what was started and re-raise."""
        self._signals.enter_context(signals_raise())
        try:
            self.fabric.start()
            self.lid = self.fabric.lid(self.fabric.attach)
            self.slurm.start()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RealBackends:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def sides(self, state_dir: Path) -> list[Side]:
        """The real apply sides: OpenSMAdapter on this OpenSM, SlurmAdapter on this Slurm."""
        fabric = self.fabric
        opensm = OpenSMConfig(
            config_file=fabric.conf_path,
            qos_policy_file=fabric.policy_path,
            partitions_file=fabric.partitions_path,
            state_dir=state_dir / "opensm",
            pid_file=fabric.pid_file,
            log_file=fabric.osm_log,
            diag=DiagConfig(
                preload=UMAD2SIM,
                env=fabric.diag_env,
                command_timeout=15.0,
                concurrency=2,
                workdir=fabric.scratch,
                smpquery=program("smpquery"),
                saquery=program("saquery"),
            ),
            verify=VerifyConfig(ports="sample", sample_size=2, timeout=30.0, interval=0.1),
        )
        (state_dir / "opensm").mkdir(parents=True, exist_ok=True)
        slurm = SlurmConfig(
            self.slurm.conf_path,
            poll_interval_seconds=0.2,
            drain_deadline_seconds=60.0,
            command_timeout_seconds=15.0,
        )
        self._sides = [OpenSMSide(opensm), SlurmSide(slurm)]
        return list(self._sides)

    def push(self) -> int:
        """Mirror the model's counters and link states into ibsim (call with the model locked)."""
        return self.ibsim_mirror.push()

    def sync(self) -> Synced:
        """What OpenSM programmed (smpquery on an HCA port) and Slurm's partitions -> the model (locked)."""
        qos = self.ibsim_mirror.pull_qos(Smpquery(self.fabric.run_diag, self.lid, 1))
        return Synced(qos, self.slurm_mirror.sync())

    def close(self) -> None:
        """Stop everything (OpenSM before ibsim, slurmd before slurmctld); safe to call twice.

        Each step runs even when an earlier one failed or was interrupted; the first error is raised after.
        """
        with contextlib.ExitStack() as steps:  # the last callback added runs first
            steps.callback(self._signals.close)
            steps.callback(self.slurm.stop)
            steps.callback(self.fabric.stop)
            for side in self._sides:
                steps.callback(_quietly, side.close)
            self._sides = []


def _quietly(close: Callable[[], object]) -> None:
    try:
        close()
    except Exception:
        log.exception("closing an apply side failed")
