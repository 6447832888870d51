"""Run a simulated InfiniBand fabric: ibsim with a console FIFO, then OpenSM on it through umad2sim.

```python
with Ibsim(workdir, render_net(model.topology), attach="node0001") as fabric:
    fabric.start_opensm({"qos": "TRUE", ...})        # waits for SUBNET UP
    fabric.run_diag(["smpquery", "vlarb", "1", "1"])  # diagnostics attach like OpenSM
```

OpenSM is stopped (and waited for) before ibsim in every exit path. Every fabric has its own
`IBSIM_SOCKNAME`; how the console, umad2sim and OpenSM's files work: docs/simulator.md.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from foundation.commands import CommandResult
from simulator.backends.errors import ConsoleError, IbsimError
from simulator.backends.ibsim_console import IbsimConsole
from simulator.backends.processes import Processes, poll_until, program, run_tool, stop_process, which

UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
READY = "Network simulator ready"
PROGRAMS = ("ibsim", "opensm")
DEFAULT_OPENSM_OPTIONS: dict[str, str] = {"sweep_interval": "0"}


def missing_programs(names: Sequence[str] = PROGRAMS) -> list[str]:
    """Of `names` and the umad2sim preload library, what is not installed."""
    missing = [name for name in names if which(name) is None]
    if not UMAD2SIM.is_file():
        missing.append(str(UMAD2SIM))
    return missing


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


class OpenSM:
    """An OpenSM attached to an `Ibsim` fabric; its config file is rewritten by `write_config`."""

    def __init__(
        self,
        fabric: Ibsim,
        options: Mapping[str, str] | None = None,
        *,
        binary: str | None = None,
        pid_file: Path | None = None,
    ) -> None:
        self.fabric = fabric
        self.dir = fabric.workdir / "osm"
        self.dir.mkdir(exist_ok=True)
        self.conf_path = self.dir / "opensm.conf"
        self.log_path = self.dir / "osm.log"
        self.stdout_path = self.dir / "stdout.log"
        self.pid_file = pid_file
        self.options: dict[str, str] = {**DEFAULT_OPENSM_OPTIONS, **(options or {})}
        self.binary = binary
        self.proc: subprocess.Popen[bytes] | None = None

    def write_config(self, options: Mapping[str, str] | None = None) -> None:
        """Merge `options` into the config and write the file (paths always point into `dir`)."""
        self.options.update(options or {})
        fixed = {
            "log_file": str(self.log_path),
            "dump_files_dir": str(self.dir),
            "partition_config_file": str(self.dir / "partitions.conf"),
            "qos_policy_file": str(self.dir / "qos-policy.conf"),
            "force_log_flush": "TRUE",
        }
        lines = [f"{key} {value}" for key, value in {**self.options, **fixed}.items()]
        self.conf_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def start(self, timeout: float = 60.0) -> None:
        """Start OpenSM and wait until its log says `SUBNET UP`; stopped again when that fails."""
        self.write_config()
        env = {**self.fabric.env, "OSM_TMP_DIR": str(self.dir), "OSM_CACHE_DIR": str(self.dir)}
        argv = [program("opensm", self.binary, IbsimError), "-F", str(self.conf_path), "-d", "2"]
        self.proc = self.fabric.processes.spawn(argv, log=self.stdout_path, env=env, cwd=self.dir)
        try:
            if self.pid_file is not None:
                self.pid_file.write_text(f"{self.proc.pid}\n", encoding="utf-8")
            self.wait_for_log("SUBNET UP", timeout)
        except BaseException:
            self.stop()
            raise

    def log_text(self) -> str:
        """The OpenSM log so far ("" before it exists)."""
        return _read(self.log_path)

    def wait_for_log(self, text: str, timeout: float = 30.0, after: int = 0) -> int:
        """Wait until `text` appears in the log after character offset `after`; return where it ends."""
        found = -1

        def appeared() -> bool:
            nonlocal found
            if self.proc is not None and self.proc.poll() is not None:
                tail = _read(self.stdout_path)[-2000:]
                raise IbsimError(f"opensm exited with {self.proc.returncode}: {tail}")
            found = self.log_text().find(text, after)
            return found >= 0

        poll_until(appeared, timeout, f"{text!r} in the OpenSM log", 0.02, IbsimError)
        return found + len(text)

    def reload(self) -> None:
        """Make OpenSM re-read its config file (SIGHUP)."""
        if self.proc is None or self.proc.poll() is not None:
            raise IbsimError("opensm is not running")
        self.proc.send_signal(signal.SIGHUP)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait, SIGKILL if needed (the fabric's `stop` does this too)."""
        stop_process(self.proc, timeout)


class Ibsim:
    """ibsim running the net file text `net` in `workdir`, with a console FIFO and an optional OpenSM."""

    def __init__(
        self,
        workdir: Path,
        net: str,
        *,
        attach: str = "node1",
        sockname: str | None = None,
        binary: str | None = None,
        diag_dir: Path | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.netfile = self.workdir / "fabric.net"
        self.netfile.write_text(net, encoding="utf-8")
        self.fifo = self.workdir / "ibsim.fifo"
        self.log_path = self.workdir / "ibsim.log"
        self.sockname = sockname or f"ibpool{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.attach = attach
        self.binary = binary
        self.diag_dir = diag_dir or self.workdir
        self.processes = Processes()
        self.commands = IbsimConsole(self.fifo, self.log_path, timeout_seconds=20.0)
        self.proc: subprocess.Popen[bytes] | None = None
        self.opensm: OpenSM | None = None

    @property
    def diag_env(self) -> dict[str, str]:
        """The variables that pick this fabric and the node a client attaches to."""
        return {"IBSIM_SOCKNAME": self.sockname, "SIM_HOST": self.attach}

    @property
    def env(self) -> dict[str, str]:
        """os.environ plus what attaches a client to this fabric (preload, socket name, host)."""
        return {**os.environ, "LD_PRELOAD": str(UMAD2SIM), **self.diag_env}

    def start(self, timeout: float = 20.0) -> Ibsim:
        """Start ibsim and wait until its console answers; stopped again when that fails."""
        try:
            binary = program("ibsim", self.binary, IbsimError)
            if self.fifo.exists():
                self.fifo.unlink()
            os.mkfifo(self.fifo)
            fd = os.open(self.fifo, os.O_RDWR)
            self.processes.on_close(lambda: os.close(fd))  # after ibsim stopped (newest first)
            self.proc = self.processes.spawn(
                [binary, "-s", str(self.netfile)],
                log=self.log_path,
                env={**os.environ, "IBSIM_SOCKNAME": self.sockname},
                cwd=self.workdir,
                stdin=fd,
            )
            poll_until(lambda: READY in self.log_text(), timeout, "ibsim to start", 0.02, IbsimError)
            self.console_run(["# started"])
        except BaseException:
            self.stop()
            raise
        return self

    def log_text(self) -> str:
        """ibsim's output so far; IbsimError when it has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise IbsimError(f"ibsim exited with {self.proc.returncode}: {_read(self.log_path)[-2000:]}")
        return _read(self.log_path)

    def console_run(self, commands: Sequence[str], timeout: float | None = None) -> str:
        """Run console commands (see IbsimConsole); IbsimError when ibsim does not answer."""
        console = self.commands if timeout is None else IbsimConsole(self.fifo, self.log_path, timeout)
        try:
            return console.run(commands)
        except ConsoleError as exc:
            self.log_text()  # says so when ibsim has exited
            raise IbsimError(str(exc)) from exc

    def start_opensm(
        self,
        options: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        *,
        binary: str | None = None,
        pid_file: Path | None = None,
    ) -> OpenSM:
        """Start OpenSM (attached like the diagnostics) and wait for `SUBNET UP`."""
        if self.opensm is not None:
            raise IbsimError("OpenSM already runs on this fabric")
        opensm = OpenSM(self, options, binary=binary, pid_file=pid_file)
        opensm.start(timeout)
        self.opensm = opensm
        return opensm

    def node_guid(self, name: str) -> str:
        """The node GUID ibsim gave `name`, as `0x` + 16 hex digits (from the console's Dump)."""
        output = self.console_run([f'Dump "{name}"'])
        match = re.search(r"nodeguid\s+([0-9a-fA-F]+)", output)
        if match is None:
            raise IbsimError(f"no node {name!r} in the fabric: {output[:500]}")
        return f"0x{int(match.group(1), 16):016x}"

    def lid(self, name: str, port: int | None = None) -> int:
        """The LID of `name` (a switch's port 0, or `port` of a CA; its first port by default), 0 if none.

        Read from the console's Dump, so it needs no diagnostic; LIDs exist once OpenSM has swept.
        """
        output = self.console_run([f'Dump "{name}"'])
        for line in output.splitlines():
            match = re.match(r"^\S+\s+\[(\d+)\].*?\blid (\d+)\b", line)
            if match and (port is None or int(match.group(1)) == port):
                return int(match.group(2))
        raise IbsimError(f"no LID line for {name!r} port {port} in: {output[:500]}")

    def run_diag(self, argv: Sequence[str], timeout: float = 30.0, check: bool = True) -> CommandResult:
        """Run a diagnostic (perfquery, smpquery, saquery, ...) against this fabric, in `diag_dir`."""
        argv = [program(argv[0], error=IbsimError), *argv[1:]]
        return run_tool(argv, env=self.env, cwd=self.diag_dir, timeout=timeout, check=check, error=IbsimError)

    def stop(self) -> None:
        """Stop OpenSM (and wait for it), then ibsim; close the console. Idempotent."""
        self.opensm = None
        self.processes.close()

    def __enter__(self) -> Ibsim:
        return self.start() if self.proc is None else self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
