"""A Slurm cluster on localhost for the model: munged, slurmctld and one `slurmd -N` per model node.

Free loopback ports, a unique ClusterName, every file under one directory; GPUs are GRES whose `File=` are
symlinks to /dev/null (Slurm drops file-less GPUs). Partitions and GPUs come from `slurm_layout(model)`.
munged is started (as user munge) only when none answers, and then stopped by `stop()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import uuid
from pathlib import Path

from demo.real.fabric import RealError, poll_until, program, stop_process, which
from simulator.backends import SlurmLayout

MUNGE_DIR = Path("/run/munge")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_PID = Path("/run/munge/munged.pid")


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def _munge_answers() -> bool:
    try:
        result = subprocess.run(
            [which("munge") or "munge", "-n"], capture_output=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


class RealSlurm:
    """slurmctld plus one slurmd per node of `layout`, in `root`."""

    def __init__(self, root: Path, layout: SlurmLayout) -> None:
        self.root = root
        self.layout = layout
        self.conf_path = root / "slurm.conf"
        self.log_dir = root / "log"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf_path)}
        self._ctld: subprocess.Popen[bytes] | None = None
        self._slurmd: list[subprocess.Popen[bytes]] = []
        self._munged_pid: int | None = None

    def start(self, timeout: float = 60.0) -> None:
        """munged if needed, the config, slurmctld, every slurmd; waits until every node is idle."""
        try:
            self._ensure_munged()
            for sub in ("state", "spool", "log", "dev"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            ports = free_ports(len(self.layout.nodes) + 1)
            self._write_config(ports[0], dict(zip(self.layout.nodes, ports[1:], strict=True)))
            self._ctld = self._spawn("slurmctld", "-D", log="slurmctld.out")
            poll_until(self._ctld_up, timeout, "slurmctld to answer `scontrol ping`", 0.2)
            for node in self.layout.nodes:
                self._slurmd.append(self._spawn("slurmd", "-D", "-N", node, log=f"slurmd-{node}.out"))
            poll_until(self._all_idle, timeout, "every slurmd to register idle", 0.2)
        except BaseException:
            self.stop()
            raise

    def _ensure_munged(self) -> None:
        if _munge_answers():
            return
        MUNGE_DIR.mkdir(mode=0o755, exist_ok=True)
        shutil.chown(MUNGE_DIR, "munge", "munge")
        if not MUNGE_KEY.is_file() or MUNGE_KEY.stat().st_size == 0:
            subprocess.run(["mungekey", "--create", "--force"], check=True, capture_output=True, timeout=30)
            shutil.chown(MUNGE_KEY, "munge", "munge")
        subprocess.run(
            ["runuser", "-u", "munge", "--", program("munged")], capture_output=True, timeout=30, check=False
        )
        poll_until(_munge_answers, 15.0, "munged to answer")
        with contextlib.suppress(OSError, ValueError):
            self._munged_pid = int(MUNGE_PID.read_text().strip())

    def _write_config(self, ctld_port: int, node_ports: dict[str, int]) -> None:
        gpus = self.layout.gpus_per_node
        lines = [
            f"ClusterName=ibpdemo{uuid.uuid4().hex[:10]}",
            "SlurmctldHost=localhost",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
            f"SlurmctldPort={ctld_port}",
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
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
        ]
        gres = ""
        if gpus:
            dev = self.root / "dev"
            for index in range(gpus):
                link = dev / f"gpu{index}"
                if not link.is_symlink():
                    link.symlink_to("/dev/null")
            lines.append("GresTypes=gpu")
            gres = f" Gres=gpu:{gpus}"
            files = f"{dev}/gpu[0-{gpus - 1}]" if gpus > 1 else f"{dev}/gpu0"
            (self.root / "gres.conf").write_text(f"Name=gpu File={files}\n", encoding="utf-8")
        for node, port in node_ports.items():
            lines.append(
                f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
                f"CPUs=8 RealMemory=500{gres} State=UNKNOWN"
            )
        for index, (name, members) in enumerate(self.layout.partitions.items()):
            nodes = f" Nodes={','.join(members)}" if members else ""
            default = "YES" if index == 0 else "NO"
            lines.append(f"PartitionName={name}{nodes} Default={default} MaxTime=INFINITE State=UP")
        self.conf_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _spawn(self, name: str, *args: str, log: str) -> subprocess.Popen[bytes]:
        with (self.log_dir / log).open("ab") as out:
            return subprocess.Popen(
                [program(name), "-f", str(self.conf_path), *args],
                env=self.env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def run(self, *argv: str, timeout: float = 15.0) -> str:
        """A Slurm client command against this cluster; its stdout, RealError on failure."""
        try:
            result = subprocess.run(
                [program(argv[0]), *argv[1:]],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise RealError(f"{argv[0]}: no answer within {timeout:g} s") from None
        if result.returncode != 0:
            raise RealError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()[-300:]}")
        return result.stdout

    def _ctld_up(self) -> bool:
        if self._ctld is None or self._ctld.poll() is not None:
            raise RealError(f"slurmctld exited (see {self.log_dir})")
        try:
            return "is UP" in self.run("scontrol", "ping", timeout=10)
        except RealError:
            return False

    def _all_idle(self) -> bool:
        out = self.run("sinfo", "--noheader", "--Node", "--format=%N %T", timeout=10)
        states = dict(line.split(None, 1) for line in out.splitlines() if " " in line.strip())
        return all(states.get(node, "").strip() == "idle" for node in self.layout.nodes)

    def stop(self) -> None:
        """Every slurmd, then slurmctld, then munged when this started it; idempotent."""
        for proc in self._slurmd:
            stop_process(proc, 15.0)
        self._slurmd.clear()
        stop_process(self._ctld, 15.0)
        self._ctld = None
        if self._munged_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._munged_pid, signal.SIGTERM)
            self._munged_pid = None
