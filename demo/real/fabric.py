"""ibsim from the model's topology with a console FIFO, and OpenSM with QoS on and the model's tables.

Every fabric gets its own `IBSIM_SOCKNAME`; diagnostics attach through the umad2sim preload
(`RealFabric.diag_env`) and run in a scratch directory (umad2sim writes `./sys-PID` trees there). OpenSM's
files are `opensm.conf` (QoS tables = the model's), `qos-policy.conf` and `partitions.conf` (minimal: the
demo changes VL arbitration only). `stop()` stops OpenSM (and waits) before ibsim.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from simulator.backends import IbsimConsole, first_hca, render_net
from simulator.cluster.model import ClusterModel

UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
READY = "Network simulator ready"


class RealError(RuntimeError):
    """A real program did not start, answer or stop as expected."""


def which(name: str) -> str | None:
    """The program's path (PATH, then /usr/sbin and /sbin), or None."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def program(name: str) -> str:
    """The program's path; RealError when it is not installed."""
    path = which(name)
    if path is None:
        raise RealError(f"{name} is not installed")
    return path


def poll_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll until `predicate` holds; RealError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RealError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """SIGTERM, wait, SIGKILL if needed."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def _pairs(pairs: Sequence[tuple[int, int]]) -> str:
    return ",".join(f"{vl}:{weight}" for vl, weight in pairs)


class RealFabric:
    """ibsim running the model's fat tree in `workdir`, then OpenSM on it."""

    def __init__(self, workdir: Path, model: ClusterModel) -> None:
        self.workdir = workdir
        self.osm_dir = workdir / "osm"
        self.osm_dir.mkdir(parents=True, exist_ok=True)
        self.netfile = workdir / "fabric.net"
        self.netfile.write_text(render_net(model.topology), encoding="utf-8")
        self.fifo = workdir / "ibsim.fifo"
        self.log_path = workdir / "ibsim.log"
        self.conf_path = self.osm_dir / "opensm.conf"
        self.policy_path = self.osm_dir / "qos-policy.conf"
        self.partitions_path = self.osm_dir / "partitions.conf"
        self.pid_file = self.osm_dir / "opensm.pid"
        self.osm_log = self.osm_dir / "osm.log"
        self.sockname = f"ibpooldemo{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.attach = first_hca(model.topology)
        self.scratch = workdir / "diag"
        self.scratch.mkdir(exist_ok=True)
        self.model = model
        self.ibsim: subprocess.Popen[bytes] | None = None
        self.opensm: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None
        self.console = IbsimConsole(self.fifo, self.log_path, timeout_seconds=20.0)

    @property
    def diag_env(self) -> dict[str, str]:
        """What attaches a diagnostic to this fabric (added to the inherited environment)."""
        return {"IBSIM_SOCKNAME": self.sockname, "SIM_HOST": self.attach}

    def start(self, timeout: float = 60.0) -> None:
        """ibsim, then OpenSM with QoS; waits for `SUBNET UP`. Stops what it started on failure."""
        try:
            self._start_ibsim(timeout)
            self._start_opensm(timeout)
        except BaseException:
            self.stop()
            raise

    def _start_ibsim(self, timeout: float) -> None:
        if self.fifo.exists():
            self.fifo.unlink()
        os.mkfifo(self.fifo)
        self._fd = os.open(self.fifo, os.O_RDWR)
        with self.log_path.open("wb") as out:
            self.ibsim = subprocess.Popen(
                [program("ibsim"), "-s", str(self.netfile)],
                stdin=self._fd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "IBSIM_SOCKNAME": self.sockname},
                cwd=self.workdir,
                start_new_session=True,
            )
        poll_until(lambda: READY in self._text(self.log_path, self.ibsim, "ibsim"), timeout, "ibsim to start")
        self.console.run(["# started"])

    def _start_opensm(self, timeout: float) -> None:
        qos = self.model.qos()
        options = {
            "sweep_interval": "0",
            "qos": "TRUE",
            "qos_max_vls": "8",
            "qos_high_limit": "4",
            "qos_vlarb_high": _pairs(qos.vlarb_high),
            "qos_vlarb_low": _pairs(qos.vlarb_low),
            "qos_sl2vl": ",".join(map(str, qos.sl2vl)),
            "log_file": str(self.osm_log),
            "dump_files_dir": str(self.osm_dir),
            "partition_config_file": str(self.partitions_path),
            "qos_policy_file": str(self.policy_path),
            "force_log_flush": "TRUE",
        }
        self.conf_path.write_text("".join(f"{k} {v}\n" for k, v in options.items()), encoding="utf-8")
        self.policy_path.write_text(
            "# ibpool demo\nqos-levels\n    qos-level\n        name: DEFAULT\n        sl: 0\n"
            "    end-qos-level\nend-qos-levels\n",
            encoding="utf-8",
        )
        self.partitions_path.write_text("Default=0x7fff, ipoib : ALL=full ;\n", encoding="utf-8")
        env = {
            **os.environ,
            "LD_PRELOAD": str(UMAD2SIM),
            **self.diag_env,
            "OSM_TMP_DIR": str(self.osm_dir),
            "OSM_CACHE_DIR": str(self.osm_dir),
        }
        with (self.osm_dir / "stdout.log").open("wb") as out:
            self.opensm = subprocess.Popen(
                [program("opensm"), "-F", str(self.conf_path), "-d", "2"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.osm_dir,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{self.opensm.pid}\n", encoding="utf-8")
        poll_until(
            lambda: "SUBNET UP" in self._text(self.osm_log, self.opensm, "opensm"),
            timeout,
            "OpenSM SUBNET UP",
        )

    @staticmethod
    def _text(path: Path, proc: subprocess.Popen[bytes] | None, name: str) -> str:
        if proc is not None and proc.poll() is not None:
            raise RealError(f"{name} exited with {proc.returncode} (see {path})")
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def lid(self, node: str) -> int:
        """The LID of `node`'s first port, from the console's Dump (assigned once OpenSM swept)."""
        output = self.console.run([f'Dump "{node}"'])
        for line in output.splitlines():
            match = re.match(r"^\S+\s+\[(\d+)\].*?\blid (\d+)\b", line)
            if match and int(match.group(2)) > 0:
                return int(match.group(2))
        raise RealError(f"no LID for {node} in ibsim's Dump")

    def run_diag(self, argv: Sequence[str], timeout: float = 20.0) -> str:
        """Run a diagnostic (smpquery, ...) against this fabric; its stdout, RealError on failure."""
        env = {**os.environ, "LD_PRELOAD": str(UMAD2SIM), **self.diag_env}
        try:
            result = subprocess.run(
                [program(argv[0]), *argv[1:]],
                env=env,
                cwd=self.scratch,
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

    def stop(self) -> None:
        """OpenSM (waited for), then ibsim; close the console."""
        try:
            stop_process(self.opensm)
        finally:
            stop_process(self.ibsim)
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
