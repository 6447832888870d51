"""A throwaway Slurm cluster on localhost for integration tests (ARCHITECTURE §5, RECIPES "Slurm").

One `slurmctld` and one `slurmd -N nodeK` per node, all in the foreground as children of the test
process, on free loopback ports, with a unique ClusterName and every file (config, state, spool, logs)
under one directory. munged is shared: it is started if no munged answers, and never stopped.

Fake GPUs: Slurm 22.05 drops a GPU GRES that has no `File=` ("Removing file-less GPU ... from final GRES
list"), and the node then registers as INVAL ("gres/gpu count reported lower than configured"), even with
`SlurmdParameters=config_overrides`. A `File=` must name character or block devices, so each fake GPU is
a symlink to /dev/null under the cluster's directory; `Gres=gpu:N` then registers and schedules normally.

    cluster = SlurmCluster(tmp, nodes=8, partitions={"training": ["node1", ...], ...}, gpus_per_node=8)
    # or name the nodes: SlurmCluster(tmp, node_names=["node0001", ...], partitions=...)
    cluster.start()
    job = cluster.submit("training", nodes=2, gpus_per_node=8)
    cluster.wait_job_state(job, "RUNNING")
    cluster.scontrol("update", "NodeName=node3", "State=DRAIN", "Reason=test")
    cluster.stop()
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tests.helpers import wait_for

PROGRAMS = ("slurmctld", "slurmd", "scontrol", "sinfo", "squeue", "sbatch", "scancel", "munged", "munge")
MUNGE_DIR = Path("/run/munge")
MUNGE_KEY = Path("/etc/munge/munge.key")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class SlurmClusterError(Exception):
    """The test cluster could not be started, or a command against it failed."""


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin", name), Path("/sbin", name)) if os.access(p, os.X_OK)), None
    )


def slurm_skip_reason() -> str | None:
    """Why a SlurmCluster cannot run on this machine, or None when it can."""
    missing = [name for name in PROGRAMS if _which(name) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian packages slurm-wlm and munge)"
    if os.geteuid() != 0:
        return "the test Slurm cluster runs as root (SlurmUser=root, munged started as user munge)"
    return None


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll `predicate` until it is true; raise SlurmClusterError naming `what` after `timeout` seconds."""
    if not wait_for(predicate, timeout, interval):
        raise SlurmClusterError(f"timed out after {timeout:g} s waiting for {what}")


def _munge_answers() -> bool:
    try:
        result = subprocess.run(
            [_which("munge") or "munge", "-n"], capture_output=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def ensure_munged(timeout: float = 15.0) -> None:
    """Start the system munged (as user munge) unless one already answers; never stops it."""
    if _munge_answers():
        return
    MUNGE_DIR.mkdir(mode=0o755, exist_ok=True)
    shutil.chown(MUNGE_DIR, "munge", "munge")
    if not MUNGE_KEY.is_file() or MUNGE_KEY.stat().st_size == 0:
        subprocess.run(["mungekey", "--create", "--force"], check=True, capture_output=True, timeout=30)
        shutil.chown(MUNGE_KEY, "munge", "munge")
    munged = _which("munged") or "munged"
    # It daemonises; a concurrent start by another test loses the pid-file race and exits, which is fine.
    subprocess.run(["runuser", "-u", "munge", "--", munged], capture_output=True, timeout=30, check=False)
    wait_until(_munge_answers, timeout, "munged to answer")


def _is_gone(pid: int) -> bool:
    """True when `pid` has exited (a zombie counts: PID 1 here does not reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


class SlurmCluster:
    """slurmctld plus `nodes` slurmd on localhost; see the module docstring."""

    def __init__(
        self,
        root: Path,
        *,
        nodes: int = 8,
        partitions: Mapping[str, Sequence[str]] | None = None,
        gpus_per_node: int = 0,
        cpus_per_node: int = 8,
        scheduler_parameters: str = "batch_sched_delay=0",
        extra_conf: Sequence[str] = (),
        node_names: Sequence[str] | None = None,
    ) -> None:
        if node_names is not None:
            nodes = len(node_names)
            bad = [n for n in node_names if not _NAME.match(n)]
            if bad or len(set(node_names)) != nodes:
                raise ValueError(f"node names must be unique words: {bad or list(node_names)}")
        if not 1 <= nodes <= 64:
            raise ValueError("nodes must be between 1 and 64")
        self.root = Path(root).resolve()
        self.node_names = (
            list(node_names) if node_names is not None else [f"node{i}" for i in range(1, nodes + 1)]
        )
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
        self.cluster_name = f"ibp{uuid.uuid4().hex[:12]}"
        self.conf_path = self.root / "slurm.conf"
        self.log_dir = self.root / "log"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf_path)}
        self.ctld_port = 0
        self.node_ports: dict[str, int] = {}
        self._ctld: subprocess.Popen[bytes] | None = None
        self._slurmd: dict[str, subprocess.Popen[bytes]] = {}

    # --- life cycle -------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        """Write the config, start slurmctld and every slurmd, and wait until all nodes are idle."""
        reason = slurm_skip_reason()
        if reason:
            raise SlurmClusterError(reason)
        ensure_munged()
        for sub in ("state", "spool", "log", "jobs", "dev"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        ports = free_ports(len(self.node_names) + 1)
        self.ctld_port, self.node_ports = ports[0], dict(zip(self.node_names, ports[1:], strict=True))
        self._write_config()
        try:
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
            raise SlurmClusterError("slurmctld is already running")
        self._ctld = self._spawn("slurmctld", "-D", *(["-R"] if recover else []), log="slurmctld.out")
        wait_until(self.controller_up, timeout, "slurmctld to answer `scontrol ping`", interval=0.1)

    def stop_controller(self, timeout: float = 15.0) -> None:
        """Stop slurmctld only (simulates a scheduler outage); slurmd and jobs keep running."""
        if self._ctld is not None:
            self._terminate(self._ctld, timeout)
            self._ctld = None

    def controller_up(self) -> bool:
        """True when slurmctld is running and answers `scontrol ping`."""
        if self._ctld is None or self._ctld.poll() is not None:
            return False
        result = self.run("scontrol", "ping", check=False, timeout=10)
        return "is UP" in result.stdout

    def stop(self, timeout: float = 15.0) -> None:
        """Cancel the jobs, stop every daemon, and kill whatever job processes are left; idempotent."""
        if self._ctld is not None and self._ctld.poll() is None:
            with contextlib.suppress(SlurmClusterError, OSError):
                self.run("scancel", "--quiet", f"--user={os.geteuid()}", check=False, timeout=10)
                with contextlib.suppress(SlurmClusterError):
                    wait_until(lambda: not self.squeue_ids(), 5.0, "jobs to end", interval=0.1)
        for proc in self._slurmd.values():
            self._terminate(proc, timeout)
        self._slurmd.clear()
        self.stop_controller(timeout)
        self._kill_job_processes()

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- commands ---------------------------------------------------------------------------------

    def run(
        self, program: str, *args: str, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client program against this cluster (no shell); raise on failure when `check`."""
        path = _which(program)
        if path is None:
            raise SlurmClusterError(f"{program} is not installed")
        try:
            result = subprocess.run(
                [path, *args],
                env=self.env,
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise SlurmClusterError(f"{program} {' '.join(args)}: no answer within {timeout:g} s") from None
        if check and result.returncode != 0:
            raise SlurmClusterError(
                f"{program} {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}"
            )
        return result

    def scontrol(self, *args: str, timeout: float = 30.0) -> str:
        """`scontrol ARGS` against this cluster; its stdout."""
        return self.run("scontrol", *args, timeout=timeout).stdout

    def submit(
        self,
        partition: str | Sequence[str],
        *,
        nodes: int = 1,
        gpus_per_node: int = 0,
        gpus: int = 0,
        seconds: int = 600,
        nodelist: Sequence[str] = (),
        exclusive: bool = False,
        hold: bool = False,
        array: str | None = None,
        extra: Sequence[str] = (),
    ) -> int:
        """`sbatch --wrap 'sleep SECONDS'` with the given request; returns the job id."""
        parts = partition if isinstance(partition, str) else ",".join(partition)
        args = [
            "--parsable",
            f"--partition={parts}",
            f"--nodes={nodes}",
            f"--output={self.root / 'jobs' / '%j.out'}",
            f"--chdir={self.root / 'jobs'}",
            "--job-name=ibpool-test",
        ]
        if gpus_per_node:
            args.append(f"--gres=gpu:{gpus_per_node}")
        if gpus:
            args.append(f"--gpus={gpus}")
        if nodelist:
            args.append(f"--nodelist={','.join(nodelist)}")
        if exclusive:
            args.append("--exclusive")
        if hold:
            args.append("--hold")
        if array:
            args.append(f"--array={array}")
        args.extend(extra)
        args.extend(["--wrap", f"sleep {int(seconds)}"])
        out = self.run("sbatch", *args).stdout.strip()
        job_id = out.split(";")[0]
        if not job_id.isdigit():
            raise SlurmClusterError(f"sbatch printed {out!r}, not a job id")
        return int(job_id)

    def squeue_ids(self) -> list[int]:
        """Ids of the jobs slurmctld still knows as pending or active."""
        out = self.run("squeue", "--noheader", "--array", "--format=%F", timeout=10).stdout
        return sorted({int(line) for line in out.split() if line.isdigit()})

    def job_states(self) -> dict[int, str]:
        """Job id -> state (PENDING, RUNNING, ...) for every job squeue lists (array records by their id)."""
        out = self.run("squeue", "--noheader", "--format=%A %T", timeout=10).stdout
        states: dict[int, str] = {}
        for line in out.splitlines():
            job_id, _, state = line.strip().partition(" ")
            if job_id.isdigit():
                states[int(job_id)] = state.strip()
        return states

    def node_states(self) -> dict[str, str]:
        """Node -> sinfo's long state (idle, mixed, allocated, drained, down*, ...)."""
        out = self.run("sinfo", "--noheader", "--Node", "--format=%N %T", timeout=10).stdout
        return dict(line.split(None, 1) for line in out.splitlines() if " " in line.strip())

    def partition_members(self) -> dict[str, list[str]]:
        """Partition -> member nodes as slurmctld has them now (read back, not the config we wrote)."""
        out = self.run("scontrol", "--oneliner", "show", "partitions", timeout=10).stdout
        members: dict[str, list[str]] = {
            line.split()[0].removeprefix("PartitionName="): []
            for line in out.splitlines()
            if line.startswith("PartitionName=")
        }
        out = self.run("sinfo", "--noheader", "--Node", "--format=%N %R", timeout=10).stdout
        for line in out.splitlines():
            node, _, partition = line.strip().partition(" ")
            if partition:
                members.setdefault(partition, []).append(node)
        return members

    def wait_idle(self, nodes: Sequence[str] | None = None, timeout: float = 60.0) -> None:
        """Wait until every given node (default: all) is idle."""
        wanted = set(nodes or self.node_names)

        def idle() -> bool:
            states = self.node_states()
            return all(states.get(node) == "idle" for node in wanted)

        wait_until(idle, timeout, f"nodes {sorted(wanted)} to be idle", interval=0.1)

    def wait_job_state(self, job_id: int, state: str, timeout: float = 60.0) -> None:
        """Wait until squeue lists `job_id` in `state` (e.g. RUNNING, PENDING)."""
        wait_until(lambda: self.job_states().get(job_id) == state, timeout, f"job {job_id} {state}", 0.1)

    def set_node_state(self, nodes: Sequence[str], state: str, reason: str = "ibpool test") -> None:
        """`scontrol update NodeName=... State=... Reason=...` (DRAIN, DOWN, RESUME, FAIL, ...)."""
        args = [f"NodeName={','.join(nodes)}", f"State={state}"]
        if state.upper() != "RESUME":
            args.append(f"Reason={reason}")
        self.scontrol("update", *args)

    # --- internals --------------------------------------------------------------------------------

    def _write_config(self) -> None:
        gres = ""
        lines = [
            f"ClusterName={self.cluster_name}",
            "SlurmctldHost=localhost",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
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
            dev = self.root / "dev"
            for index in range(self.gpus_per_node):
                link = dev / f"gpu{index}"
                if not link.is_symlink():
                    link.symlink_to("/dev/null")
            lines.append("GresTypes=gpu")
            gres = f" Gres=gpu:{self.gpus_per_node}"
            last = self.gpus_per_node - 1
            files = f"{dev}/gpu[0-{last}]" if last else f"{dev}/gpu0"
            (self.root / "gres.conf").write_text(f"Name=gpu File={files}\n")
        lines.extend(self.extra_conf)
        for node, port in self.node_ports.items():
            lines.append(
                f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
                f"CPUs={self.cpus_per_node} RealMemory=500{gres} State=UNKNOWN"
            )
        for index, (name, members) in enumerate(self.partitions.items()):
            nodes = f" Nodes={','.join(members)}" if members else ""
            default = "YES" if index == 0 else "NO"
            lines.append(f"PartitionName={name}{nodes} Default={default} MaxTime=INFINITE State=UP")
        self.conf_path.write_text("\n".join(lines) + "\n")

    def _spawn(self, program: str, *args: str, log: str) -> subprocess.Popen[bytes]:
        path = _which(program)
        if path is None:
            raise SlurmClusterError(f"{program} is not installed")
        with (self.log_dir / log).open("ab") as out:
            return subprocess.Popen(
                [path, "-f", str(self.conf_path), *args],
                env=self.env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @staticmethod
    def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)

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
        pids = [pid for pid in self._job_process_ids() if not _is_gone(pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: all(_is_gone(pid) for pid in pids), timeout, "job processes to exit")
