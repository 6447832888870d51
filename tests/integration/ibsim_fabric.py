"""A simulated InfiniBand fabric for integration tests: ibsim, optionally OpenSM, and the console.

```python
with IbsimFabric(tmp_path, FatTree(leaves=2, spines=1, hcas_per_leaf=4)) as fabric:
    fabric.start_opensm()                                # LIDs are assigned; perfquery works
    fabric.performance_set("leaf1", 3, "PortCounters", "SymbolErrorCounter", 7)
    fabric.unlink("leaf1", 3)
    fabric.run_diag(["perfquery", "-x", str(fabric.lid("leaf1")), "1"])
# OpenSM is stopped (and waited for) before ibsim.
```

Every fabric gets its own `IBSIM_SOCKNAME`, so tests never share a simulator. Diagnostics attach through
the umad2sim preload; `fabric.env` is the environment that does that, and diagnostics should run with
`cwd=fabric.workdir` because umad2sim writes a fake sysfs tree (`./sys-PID`) into the working directory
(on tmpfs, e.g. under /dev/shm, that costs almost nothing; on a disk mounted with `discard`, ~80 ms).
ibsim serves at most 10 clients at once (OpenSM holds one while it runs), and a diagnostic killed before
it exits never detaches: its slot stays taken until the console's `X <client>`.

OpenSM's files live in `fabric.opensm.dir` (`opensm.conf`, `osm.log`, `partitions.conf`,
`qos-policy.conf`); `OpenSM.write_config({...})` + `reload()` apply new options (SIGHUP).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
PROGRAMS = ("ibsim", "opensm", "perfquery", "ibnetdiscover", "iblinkinfo")
READY = "Network simulator ready"
MAX_CONSOLE_LINE = 127  # ibsim reads console lines into a 128-byte buffer

_marker_numbers = itertools.count(1)


class IbsimError(RuntimeError):
    """ibsim or OpenSM did not start, answer or stop as expected."""


def missing_programs() -> list[str]:
    """Programs (and the preload library) this module needs that are not installed."""
    missing = [name for name in PROGRAMS if _which(name) is None]
    if not UMAD2SIM.is_file():
        missing.append(str(UMAD2SIM))
    return missing


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _program(name: str) -> str:
    path = _which(name)
    if path is None:
        raise IbsimError(f"{name} is not installed")
    return path


def poll_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll `predicate` until it holds; raise IbsimError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise IbsimError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# --- topology ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FatTree:
    """A two-level fat tree in ibsim's net-file format.

    Leaf `leafL` port h (1..hcas_per_leaf) goes to `nodeN` port 1; leaf ports after those go up, with
    `links_per_pair` parallel links to every spine: leaf port `hcas_per_leaf + 1 + s * links + k` connects
    to spine `s+1` port `(L-1) * links + k + 1`. `speed` (for example "4xEDR") is written on both ends of
    every link; None leaves ibsim's default (4X SDR).
    """

    leaves: int = 2
    spines: int = 1
    hcas_per_leaf: int = 4
    ports: int = 8
    links_per_pair: int = 1
    speed: str | None = None

    def __post_init__(self) -> None:
        if min(self.leaves, self.spines, self.hcas_per_leaf, self.ports, self.links_per_pair) < 1:
            raise ValueError("every size must be at least 1")
        if self.hcas_per_leaf + self.spines * self.links_per_pair > self.ports:
            raise ValueError("a leaf has too few ports for its HCAs and uplinks")
        if self.leaves * self.links_per_pair > self.ports:
            raise ValueError("a spine has too few ports for its downlinks")

    @property
    def leaf_names(self) -> list[str]:
        """Leaf switch names, leaf1 first."""
        return [f"leaf{i}" for i in range(1, self.leaves + 1)]

    @property
    def spine_names(self) -> list[str]:
        """Spine switch names, spine1 first."""
        return [f"spine{i}" for i in range(1, self.spines + 1)]

    @property
    def switch_names(self) -> list[str]:
        """All switch names."""
        return self.spine_names + self.leaf_names

    @property
    def hca_names(self) -> list[str]:
        """All HCA names, node1 first."""
        return [f"node{i}" for i in range(1, self.leaves * self.hcas_per_leaf + 1)]

    @property
    def switch_ports(self) -> int:
        """How many switch ports the fabric has (linked or not)."""
        return (self.leaves + self.spines) * self.ports

    def hca_of(self, leaf: int, port: int) -> str:
        """Name of the HCA on `leafN` port `port` (both 1-based)."""
        return f"node{(leaf - 1) * self.hcas_per_leaf + port}"

    def _end(self, name: str, port: int) -> str:
        speed = f"  # lid 0 {self.speed}" if self.speed else ""
        return f'"{name}"[{port}]{speed}'

    def render(self) -> str:
        """The net file text."""
        links = self.links_per_pair
        out: list[str] = []
        for s, spine in enumerate(self.spine_names):
            out.append(f'Switch {self.ports} "{spine}"')
            for leaf in range(self.leaves):
                for k in range(links):
                    out.append(f"[{leaf * links + k + 1}] {self._end(f'leaf{leaf + 1}', self._up(s, k))}")
            out.append("")
        for leaf in range(1, self.leaves + 1):
            out.append(f'Switch {self.ports} "leaf{leaf}"')
            for h in range(1, self.hcas_per_leaf + 1):
                out.append(f"[{h}] {self._end(self.hca_of(leaf, h), 1)}")
            for s in range(self.spines):
                for k in range(links):
                    out.append(f"[{self._up(s, k)}] {self._end(f'spine{s + 1}', (leaf - 1) * links + k + 1)}")
            out.append("")
        for leaf in range(1, self.leaves + 1):
            for h in range(1, self.hcas_per_leaf + 1):
                out += [f'Hca 1 "{self.hca_of(leaf, h)}"', f"[1] {self._end(f'leaf{leaf}', h)}", ""]
        return "\n".join(out) + "\n"

    def _up(self, spine_index: int, k: int) -> int:
        return self.hcas_per_leaf + 1 + spine_index * self.links_per_pair + k


# --- OpenSM --------------------------------------------------------------------------------------

DEFAULT_OPENSM_OPTIONS: dict[str, str] = {"sweep_interval": "0"}


class OpenSM:
    """An OpenSM attached to an IbsimFabric; its config file is rewritten by `write_config`."""

    def __init__(self, fabric: IbsimFabric, options: Mapping[str, str] | None = None) -> None:
        self.fabric = fabric
        self.dir = fabric.workdir / "osm"
        self.dir.mkdir(exist_ok=True)
        self.conf_path = self.dir / "opensm.conf"
        self.log_path = self.dir / "osm.log"
        self.stdout_path = self.dir / "stdout.log"
        self.options: dict[str, str] = {**DEFAULT_OPENSM_OPTIONS, **(options or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def write_config(self, options: Mapping[str, str] | None = None) -> None:
        """Merge `options` into the config and write the file (paths always point into the work dir)."""
        self.options.update(options or {})
        fixed = {
            "log_file": str(self.log_path),
            "dump_files_dir": str(self.dir),
            "partition_config_file": str(self.dir / "partitions.conf"),
            "qos_policy_file": str(self.dir / "qos-policy.conf"),
            "force_log_flush": "TRUE",
        }
        lines = [f"{key} {value}" for key, value in {**self.options, **fixed}.items()]
        self.conf_path.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 60.0) -> None:
        """Start OpenSM and wait until its log says `SUBNET UP`."""
        self.write_config()
        env = {**self.fabric.env, "OSM_TMP_DIR": str(self.dir), "OSM_CACHE_DIR": str(self.dir)}
        with self.stdout_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [_program("opensm"), "-F", str(self.conf_path), "-d", "2"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.dir,
                start_new_session=True,
            )
        try:
            self.wait_for_log("SUBNET UP", timeout)
        except IbsimError:
            self.stop()
            raise

    def log_text(self) -> str:
        """The OpenSM log so far ("" before it exists)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, text: str, timeout: float = 30.0, after: int = 0) -> int:
        """Wait until `text` appears in the log after character offset `after`; return where it ends."""
        found = -1

        def appeared() -> bool:
            nonlocal found
            if self.proc is not None and self.proc.poll() is not None:
                raise IbsimError(f"opensm exited with {self.proc.returncode}: {self._stdout_tail()}")
            found = self.log_text().find(text, after)
            return found >= 0

        poll_until(appeared, timeout, f"{text!r} in the OpenSM log")
        return found + len(text)

    def reload(self) -> None:
        """Make OpenSM re-read its config file (SIGHUP)."""
        if self.proc is None or self.proc.poll() is not None:
            raise IbsimError("opensm is not running")
        self.proc.send_signal(signal.SIGHUP)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait, SIGKILL if needed."""
        _stop(self.proc, timeout)

    def _stdout_tail(self) -> str:
        try:
            return self.stdout_path.read_text(errors="replace")[-2000:]
        except FileNotFoundError:
            return ""


# --- ibsim ---------------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class IbsimFabric:
    """ibsim running `topology` in `workdir`, with a console FIFO and an optional OpenSM."""

    def __init__(
        self,
        workdir: Path,
        topology: FatTree | str,
        *,
        attach: str | None = None,
        sockname: str | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.topology = topology if isinstance(topology, FatTree) else None
        self.netfile = self.workdir / "fabric.net"
        self.netfile.write_text(topology.render() if isinstance(topology, FatTree) else topology)
        self.fifo = self.workdir / "ibsim.fifo"
        self.log_path = self.workdir / "ibsim.log"
        self.sockname = sockname or f"ibpool{os.getpid()}_{uuid.uuid4().hex[:8]}"
        default_attach = self.topology.hca_names[0] if self.topology else "node1"
        self.attach = attach or default_attach
        self.proc: subprocess.Popen[bytes] | None = None
        self.opensm: OpenSM | None = None
        self._console_fd: int | None = None

    @property
    def env(self) -> dict[str, str]:
        """os.environ plus what attaches a diagnostic to this fabric (preload, socket name, host)."""
        return {
            **os.environ,
            "LD_PRELOAD": str(UMAD2SIM),
            "IBSIM_SOCKNAME": self.sockname,
            "SIM_HOST": self.attach,
        }

    def start(self, timeout: float = 20.0) -> IbsimFabric:
        """Start ibsim and wait until its console answers (its sockets are bound by then)."""
        if self.fifo.exists():
            self.fifo.unlink()
        os.mkfifo(self.fifo)
        self._console_fd = os.open(self.fifo, os.O_RDWR)
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [_program("ibsim"), "-s", str(self.netfile)],
                stdin=self._console_fd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "IBSIM_SOCKNAME": self.sockname},
                cwd=self.workdir,
                start_new_session=True,
            )
        try:
            poll_until(lambda: READY in self._log(), timeout, "ibsim to start")
            self.console("# started", timeout)
        except IbsimError:
            self.stop()
            raise
        return self

    def _log(self) -> str:
        if self.proc is not None and self.proc.poll() is not None:
            raise IbsimError(f"ibsim exited with {self.proc.returncode}: {self._tail()}")
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except FileNotFoundError:
            return ""

    def console(self, command: str, timeout: float = 10.0) -> str:
        """Run one console command and return what ibsim printed for it.

        A comment line with a unique marker follows the command; ibsim echoes comments, so once the marker
        shows in its output every byte before it belongs to the command.
        """
        if self._console_fd is None:
            raise IbsimError("ibsim is not running")
        if "\n" in command or len(command) > MAX_CONSOLE_LINE:
            raise ValueError(f"a console command is one line of at most {MAX_CONSOLE_LINE} bytes")
        marker = f"# ibpool-sync-{next(_marker_numbers)}"
        start = len(self._log())
        os.write(self._console_fd, f"{command}\n".encode())
        os.write(self._console_fd, f"{marker}\n".encode())
        found = -1

        def echoed() -> bool:
            nonlocal found
            found = self._log().find(marker, start)
            return found >= 0

        poll_until(echoed, timeout, f"ibsim to run {command!r}")
        output = self._log()[start:found]
        return output.replace("sim> ", "").strip()

    def performance_set(self, node: str, port: int, attribute: str, field: str, value: int) -> None:
        """Set one PMA counter (`PerformanceSet "node"[port] attribute.field=value`)."""
        output = self.console(f'PerformanceSet "{node}"[{port}] {attribute}.{field}={value}')
        if "has been set to" not in output:
            raise IbsimError(f"PerformanceSet {node}[{port}] {attribute}.{field} failed: {output}")

    def set_vl_xmit_wait(self, node: str, port: int, vl: int, value: int) -> None:
        """Set one per-VL transmit-wait counter (ibsim names it PortVLXmitWaitCountersN)."""
        self.performance_set(node, port, "PortVLXmitWaitCounters", f"PortVLXmitWaitCounters{vl}", value)

    def unlink(self, node: str, port: int | None = None) -> None:
        """Take a link (or every link of `node`) down."""
        self.console(f'Unlink "{node}"' + (f"[{port}]" if port is not None else ""))

    def relink(self, node: str, port: int | None = None) -> None:
        """Restore a link (or every link of `node`) taken down with `unlink`."""
        self.console(f'ReLink "{node}"' + (f"[{port}]" if port is not None else ""))

    def set_error_rate(self, node: str, percent: int, attribute: int | None = None) -> None:
        """Drop `percent` % of the MADs `node` gets (only attribute id `attribute` when given)."""
        self.console(f'Error "{node}" {percent}' + (f" {attribute}" if attribute is not None else ""))

    def node_guid(self, name: str) -> str:
        """The node GUID ibsim gave `name`, as `0x` + 16 hex digits (from the console's Dump)."""
        output = self.console(f'Dump "{name}"')
        match = re.search(r"nodeguid\s+([0-9a-fA-F]+)", output)
        if match is None:
            raise IbsimError(f"no node {name!r} in the fabric: {output[:500]}")
        return f"0x{int(match.group(1), 16):016x}"

    def lid(self, name: str, port: int | None = None) -> int:
        """The LID of `name` (a switch's port 0, or `port` of a CA; its first port by default), 0 if none.

        Read from the console's Dump, so it needs no diagnostic; LIDs exist once OpenSM has swept.
        """
        output = self.console(f'Dump "{name}"')
        for line in output.splitlines():
            match = re.match(r"^\S+\s+\[(\d+)\].*?\blid (\d+)\b", line)
            if match and (port is None or int(match.group(1)) == port):
                return int(match.group(2))
        raise IbsimError(f"no LID line for {name!r} port {port} in: {output[:500]}")

    def start_opensm(self, options: Mapping[str, str] | None = None, timeout: float = 60.0) -> OpenSM:
        """Start OpenSM (attached like the diagnostics) and wait for `SUBNET UP`."""
        if self.opensm is not None:
            raise IbsimError("OpenSM already runs on this fabric")
        opensm = OpenSM(self, options)
        opensm.start(timeout)
        self.opensm = opensm
        return opensm

    def run_diag(
        self, argv: Sequence[str], timeout: float = 30.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a diagnostic (perfquery, smpquery, saquery, ...) against this fabric."""
        program = _program(argv[0]) if "/" not in argv[0] else argv[0]
        result = subprocess.run(
            [program, *argv[1:]],
            env=self.env,
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise IbsimError(f"{argv[0]} exited with {result.returncode}: {result.stderr[-2000:]}")
        return result

    def stop(self) -> None:
        """Stop OpenSM (and wait for it), then ibsim; close the console."""
        try:
            if self.opensm is not None:
                self.opensm.stop()
                self.opensm = None
        finally:
            _stop(self.proc, 10.0)
            if self._console_fd is not None:
                os.close(self._console_fd)
                self._console_fd = None

    def __enter__(self) -> IbsimFabric:
        return self.start() if self.proc is None else self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
