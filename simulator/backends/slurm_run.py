"""Run a throwaway Slurm cluster on localhost: munged (if none answers), slurmctld, one `slurmd -N` per node.

```python
with Slurm(root, ["node1", "node2"], {"debug": ["node1", "node2"]}, gpus_per_node=8) as slurm:
    slurm.run("scontrol", "update", "NodeName=node2", "State=DRAIN", "Reason=x")
```

At the end, also when a start failed: jobs cancelled, every slurmd then slurmctld stopped. Each daemon runs
in its own process group on free loopback ports, every file under `root`; munged is the system one,
stopped only with `stop_munged=True`. Fake GPUs are /dev/null symlinks (why: docs/simulator.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from foundation.commands import CommandResult, run_command
from simulator.backends.errors import SlurmError
from simulator.backends.processes import (
    Processes,
    StartStop,
    free_ports,
    is_gone,
    poll_until,
    program,
    run_tool,
    stop_process,
    which,
)

PROGRAMS = ("slurmctld", "slurmd", "scontrol", "sinfo", "squeue", "sbatch", "scancel", "munged", "munge")
MUNGE_DIR = Path("/run/munge")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_PID = MUNGE_DIR / "munged.pid"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def unavailable(names: Sequence[str] = PROGRAMS) -> str | None:
    """Why a local Slurm cluster cannot run on this machine, or None when it can."""
    missing = [name for name in names if which(name) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian packages slurm-wlm and munge)"
    if os.geteuid() != 0:
        return "the local Slurm cluster runs as root (SlurmUser=root, munged started as user munge)"
    return None


def munge_answers() -> bool:
    """True when `munge -n` gets a credential from the system munged."""
    return run_command([which("munge") or "munge", "-n"], 5).ok


def ensure_munged(timeout: float = 15.0) -> int | None:
    """Start the system munged (as user munge) unless one answers; its pid when this call started it."""
    if munge_answers():
        return None
    MUNGE_DIR.mkdir(mode=0o755, exist_ok=True)
    shutil.chown(MUNGE_DIR, "munge", "munge")
    if not MUNGE_KEY.is_file() or MUNGE_KEY.stat().st_size == 0:
        created = run_command([program("mungekey", error=SlurmError), "--create", "--force"], 30)
        if not created.ok:
            raise SlurmError(created.describe(with_args=True))
        shutil.chown(MUNGE_KEY, "munge", "munge")
    munged = program("munged", error=SlurmError)
    # It daemonises; a concurrent start elsewhere loses the pid-file race and exits, which is fine.
    run_command([program("runuser", error=SlurmError), "-u", "munge", "--", munged], 30)
    poll_until(munge_answers, timeout, "munged to answer", 0.05, SlurmError)
    try:
        return int(MUNGE_PID.read_text().strip())
    except (OSError, ValueError):
        return None


class Slurm(StartStop):
    """slurmctld plus one slurmd per name in `node_names`, in `root`; see the module docstring."""

    def __init__(
        self,
        root: Path,
        node_names: Sequence[str],
        partitions: Mapping[str, Sequence[str]] | None = None,
        *,
        gpus_per_node: int = 0,
        cpus_per_node: int = 8,
        scheduler_parameters: str = "batch_sched_delay=0",
        extra_conf: Sequence[str] = (),
        cluster_prefix: str = "ibp",
        stop_munged: bool = False,
        binaries: Mapping[str, str] | None = None,
    ) -> None:
        bad = [n for n in node_names if not _NAME.match(n)]
        if bad or len(set(node_names)) != len(node_names):
            raise ValueError(f"node names must be unique words: {bad or list(node_names)}")
        if not 1 <= len(node_names) <= 64:
            raise ValueError("nodes must be between 1 and 64")
        self.root = Path(root).resolve()
        self.node_names = list(node_names)
        self.partitions = {
            name: list(members) for name, members in (partitions or {"debug": self.node_names}).items()
        }
        for name, members in self.partitions.items():
            unknown = sorted(set(members) - set(self.node_names))
            if not _NAME.match(name) or unknown:
                raise ValueError(f"partition {name!r}: bad name or unknown nodes {unknown}")
        self.gpus_per_node = gpus_per_node
        self.cpus_per_node = cpus_per_node
        self.scheduler_parameters = scheduler_parameters
        self.extra_conf = list(extra_conf)
        self.cluster_name = f"{cluster_prefix}{uuid.uuid4().hex[:12]}"
        self.stop_munged = stop_munged
        self.binaries = dict(binaries or {})
        self.conf_path = self.root / "slurm.conf"
        self.log_dir = self.root / "log"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf_path)}
        self.ctld_port = 0
        self.node_ports: dict[str, int] = {}
        self.processes = Processes(stop_timeout=15.0)
        self._ctld: subprocess.Popen[bytes] | None = None
        self._slurmd: dict[str, subprocess.Popen[bytes]] = {}

    # --- life cycle -------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        """Write the config, start slurmctld and every slurmd, wait until all nodes are idle.

        On any failure (Ctrl-C included) everything started so far is stopped before the error is raised.
        """
        try:
            reason = unavailable()
            if reason:
                raise SlurmError(reason)
            munged = ensure_munged()
            if munged is not None and self.stop_munged:
                self.processes.adopt("munged", munged)
            for sub in ("state", "spool", "log", "jobs", "dev"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            ports = free_ports(len(self.node_names) + 1)
            self.ctld_port, self.node_ports = ports[0], dict(zip(self.node_names, ports[1:], strict=True))
            self._write_config()
            self.start_controller(timeout=timeout)
            for node in self.node_names:
                self._slurmd[node] = self._spawn("slurmd", "-D", "-N", node, log=f"slurmd-{node}.out")
            self.wait_idle(timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def start_controller(self, recover: bool = False, timeout: float = 60.0) -> None:
        """Start slurmctld (again) and wait until it answers; `recover` passes -R (keep scontrol changes)."""
        if self._ctld is not None and self._ctld.poll() is None:
            raise SlurmError("slurmctld is already running")
        self._ctld = self._spawn("slurmctld", "-D", *(["-R"] if recover else []), log="slurmctld.out")

        def up() -> bool:
            self._check_daemons()
            return self.controller_up()

        poll_until(up, timeout, "slurmctld to answer `scontrol ping`", 0.1, SlurmError)

    def stop_controller(self, timeout: float = 15.0) -> None:
        """Stop slurmctld only (a scheduler outage); slurmd and jobs keep running."""
        stop_process(self._ctld, timeout)
        self._ctld = None

    def controller_up(self) -> bool:
        """True when slurmctld is running and answers `scontrol ping`."""
        if self._ctld is None or self._ctld.poll() is not None:
            return False
        result = self.run("scontrol", "ping", check=False, timeout=10)
        return "is UP" in result.stdout

    def stop(self, timeout: float = 15.0) -> None:
        """Cancel the jobs; stop every slurmd, slurmctld, munged when ours; kill job processes. Idempotent.

        Every step runs even when an earlier one fails (or is interrupted); the first error is raised after.
        """
        slurmd = list(self._slurmd.values())
        self._slurmd.clear()
        with contextlib.ExitStack() as steps:  # run newest first: the last callback below runs first
            steps.callback(self._kill_job_processes)
            steps.callback(self.processes.close)
            steps.callback(self.stop_controller, timeout)
            for proc in slurmd:
                steps.callback(stop_process, proc, timeout)
            self._cancel_jobs()

    # --- commands ---------------------------------------------------------------------------------

    def run(self, name: str, *args: str, check: bool = True, timeout: float = 30.0) -> CommandResult:
        """Run a Slurm client program against this cluster (no shell); SlurmError on failure when `check`."""
        path = program(name, self.binaries.get(name), SlurmError)
        return run_tool(
            [path, *args], env=self.env, cwd=self.root, timeout=timeout, check=check, error=SlurmError
        )

    def squeue_ids(self) -> list[int]:
        """Ids of the jobs slurmctld still knows as pending or active."""
        out = self.run("squeue", "--noheader", "--array", "--format=%F", timeout=10).stdout
        return sorted({int(line) for line in out.split() if line.isdigit()})

    def node_states(self) -> dict[str, str]:
        """Node -> sinfo's long state (idle, mixed, allocated, drained, down*, ...)."""
        out = self.run("sinfo", "--noheader", "--Node", "--format=%N %T", timeout=10).stdout
        return dict(line.split(None, 1) for line in out.splitlines() if " " in line.strip())

    def wait_idle(self, nodes: Sequence[str] | None = None, timeout: float = 60.0) -> None:
        """Wait until every given node (default: all) is idle; SlurmError early when a daemon exited."""
        wanted = set(nodes or self.node_names)

        def idle() -> bool:
            self._check_daemons()
            states = self.node_states()
            return all(states.get(node) == "idle" for node in wanted)

        poll_until(idle, timeout, f"nodes {sorted(wanted)} to be idle", 0.1, SlurmError)

    # --- internals --------------------------------------------------------------------------------

    def _check_daemons(self) -> None:
        daemons = [("slurmctld", self._ctld), *((f"slurmd -N {n}", p) for n, p in self._slurmd.items())]
        for name, proc in daemons:
            if proc is not None and proc.poll() is not None:
                raise SlurmError(f"{name} exited with {proc.returncode} (logs: {self.log_dir})")

    def _cancel_jobs(self) -> None:
        if self._ctld is None or self._ctld.poll() is not None:
            return
        with contextlib.suppress(SlurmError, OSError):
            self.run("scancel", "--quiet", f"--user={os.geteuid()}", check=False, timeout=10)
            poll_until(lambda: not self.squeue_ids(), 5.0, "jobs to end", 0.1, SlurmError)

    def _write_config(self) -> None:
        gres = ""
        lines = [
            f"ClusterName={self.cluster_name}",
            "SlurmctldHost=localhost",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            # Loopback only: several test clusters on one machine, each on its own free ports.
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
            f"SlurmctldPort={self.ctld_port}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool' / '%n'}",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.log_dir / 'slurmctld.log'}",
            f"SlurmdLogFile={self.log_dir / 'slurmd-%n.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            # More CPUs than the machine has, so that several jobs share a node (testing only).
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "MpiDefault=none",
            "MailProg=/bin/true",
            # batch_sched_delay=0: start a submitted batch job within about a second, not three.
            *([f"SchedulerParameters={self.scheduler_parameters}"] if self.scheduler_parameters else []),
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
        ]
        if self.gpus_per_node:
            # Slurm 22.05 drops a GPU GRES without `File=` and the node registers as INVAL; `File=` must name
            # character or block devices, so each fake GPU is a symlink to /dev/null.
            dev = self.root / "dev"
            for index in range(self.gpus_per_node):
                link = dev / f"gpu{index}"
                if not link.is_symlink():
                    link.symlink_to("/dev/null")
            lines.append("GresTypes=gpu")
            gres = f" Gres=gpu:{self.gpus_per_node}"
            last = self.gpus_per_node - 1
            files = f"{dev}/gpu[0-{last}]" if last else f"{dev}/gpu0"
            (self.root / "gres.conf").write_text(f"Name=gpu File={files}\n", encoding="utf-8")
        lines.extend(self.extra_conf)
        for node, port in self.node_ports.items():
            lines.append(
                f"NodeName={node} NodeHostname={self.node_hostname(node)} NodeAddr=127.0.0.1 Port={port} "
                f"CPUs={self.cpus_per_node} RealMemory=500{gres} State=UNKNOWN"
            )
        for index, (name, members) in enumerate(self.partitions.items()):
            nodes = f" Nodes={','.join(members)}" if members else ""
            default = "YES" if index == 0 else "NO"
            lines.append(f"PartitionName={name}{nodes} Default={default} MaxTime=INFINITE State=UP")
        self.conf_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def node_hostname(self, node: str) -> str:
        """`node`'s NodeHostname in slurm.conf (every slurmd listens on 127.0.0.1, its NodeAddr)."""
        del node
        return "localhost"

    def _spawn(self, name: str, *args: str, log: str) -> subprocess.Popen[bytes]:
        path = program(name, self.binaries.get(name), SlurmError)
        return self.processes.spawn(
            [path, "-f", str(self.conf_path), *args],
            log=self.log_dir / log,
            env=self.env,
            cwd=self.root,
            name=name,
        )

    def _job_process_ids(self) -> Iterator[int]:
        """Processes (slurmstepd, job scripts) started for this cluster: their environment names our conf."""
        marker = f"SLURM_CONF={self.conf_path}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    yield int(entry.name)

    def _kill_job_processes(self, timeout: float = 10.0) -> None:
        pids = [pid for pid in self._job_process_ids() if not is_gone(pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        poll_until(
            lambda: all(is_gone(pid) for pid in pids), timeout, "job processes to exit", 0.05, SlurmError
        )
