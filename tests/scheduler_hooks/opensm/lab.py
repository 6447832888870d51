"""A small QoS-enabled lab for the OpenSM adapter's integration tests: ibsim + OpenSM + baseline files.

Six nodes on two leaves; pool `training` is node1-3 (port group SL 1, partition 0x0002), pool `inference`
node4-6 (SL 2, partition 0x0003). OpenSM runs with the recipe's QoS settings. `reset()` puts the
baseline files back, signals OpenSM, waits until the re-read is over and the fabric shows them again.

Tests wait for events, not for time: after a SIGHUP, for the `SUBNET UP` that ends the sweep it starts
(`log_end` + `wait_for_sweep_end`); for "nothing was signalled", OpenSM is held stopped (`frozen`) while
the action runs, so a SIGHUP sent to it stays pending where `pending_signals` sees it, and its files and
logs cannot change behind the test's back.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scheduler_hooks.opensm import Change, OpenSMAdapter, OpenSMConfig
from simulator.backends.ibsim_fabric import (
    UMAD2SIM,
    FatTree,
    IbsimFabric,
    OpenSM,
    missing_programs,
    poll_until,
)

TREE = FatTree(leaves=2, spines=1, hcas_per_leaf=3, ports=6)
QOS_OPTIONS = {
    "qos": "TRUE",
    "qos_max_vls": "8",
    "qos_high_limit": "4",
    "qos_vlarb_high": "0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0",
    "qos_vlarb_low": "0:0,1:64,2:32,3:16,4:8,5:4,6:2,7:1",
    "qos_sl2vl": "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7",
}
BASELINE = {
    "opensm.vlarb_high": "0:4",
    "opensm.vlarb_low": "1:64,2:32,3:16,4:8,5:4,6:2,7:1",
    "opensm.sl2vl": "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7",
    "opensm.port_group.training.sl": "1",
    "opensm.port_group.inference.sl": "2",
    "opensm.port_group.training.members": "node1,node2,node3",
    "opensm.port_group.inference.members": "node4,node5,node6",
    "opensm.partition.training.members": "node1,node2,node3",
    "opensm.partition.inference.members": "node4,node5,node6",
}
FILES = ("opensm.conf", "qos-policy.conf", "partitions.conf")


def missing() -> list[str]:
    """What this lab needs that is not installed."""
    extra = [p for p in ("smpquery", "saquery") if shutil.which(p, path="/usr/sbin:/usr/bin:/sbin") is None]
    return missing_programs() + extra


def policy_text(guids: dict[str, str]) -> str:
    """The baseline QoS policy (port groups by port GUID, one level and rule per pool)."""
    groups = {"training": ["node1", "node2", "node3"], "inference": ["node4", "node5", "node6"]}
    out = ["# ibpool test policy", "port-groups"]
    for name, nodes in groups.items():
        out += ["    port-group", f"        name: {name}"]
        out += [f"        port-guid: {', '.join(guids[n] for n in nodes)}", "    end-port-group"]
    out += ["end-port-groups", "", "qos-levels"]
    for name, sl in (("DEFAULT", 0), ("training-level", 1), ("inference-level", 2)):
        out += ["    qos-level", f"        name: {name}", f"        sl: {sl}", "    end-qos-level"]
    out += ["end-qos-levels", "", "qos-match-rules"]
    for name in groups:
        out += ["    qos-match-rule", f"        source: {name}", f"        destination: {name}"]
        out += [f"        qos-level-name: {name}-level", "    end-qos-match-rule"]
    return "\n".join([*out, "end-qos-match-rules", ""])


def partitions_text(guids: dict[str, str]) -> str:
    """The baseline partitions (Default for all, one partition per pool)."""
    training = ", ".join(f"{guids[n]}=full" for n in ("node1", "node2", "node3"))
    inference = ", ".join(f"{guids[n]}=full" for n in ("node4", "node5", "node6"))
    return (
        "# ibpool test partitions\nDefault=0x7fff, ipoib : ALL=full ;\n"
        f"training=0x0002 : {training} ;\ninference=0x0003 : {inference} ;\n"
    )


class Lab:
    """ibsim + OpenSM with the baseline files; adapters built on it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.fabric = IbsimFabric(workdir / "fabric", TREE)
        self.opensm: OpenSM | None = None
        self.baseline: dict[str, bytes] = {}
        self.guids: dict[str, str] = {}
        shm = Path("/dev/shm")
        parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
        # The diagnostics' working directory (umad2sim writes a tree per process there): tmpfs if any.
        self.scratch = Path(tempfile.mkdtemp(prefix="ibpool-opensm-lab-", dir=parent))

    @property
    def osm_dir(self) -> Path:
        """Where OpenSM's files are."""
        return self.fabric.workdir / "osm"

    @property
    def pid_file(self) -> Path:
        """A pid file holding OpenSM's pid."""
        return self.fabric.workdir / "opensm.pid"

    def start(self) -> Lab:
        """Start ibsim, write the baseline files, start OpenSM with QoS on."""
        self.fabric.start()
        self.guids = {n: f"0x{int(self.fabric.node_guid(n), 16) + 1:016x}" for n in TREE.hca_names}
        self.osm_dir.mkdir(exist_ok=True)
        (self.osm_dir / "qos-policy.conf").write_text(policy_text(self.guids))
        (self.osm_dir / "partitions.conf").write_text(partitions_text(self.guids))
        self.opensm = self.fabric.start_opensm(QOS_OPTIONS)
        assert self.opensm.proc is not None
        self.pid_file.write_text(f"{self.opensm.proc.pid}\n")
        self.baseline = {name: (self.osm_dir / name).read_bytes() for name in FILES}
        return self

    def stop(self) -> None:
        """OpenSM, then ibsim; remove the scratch directory."""
        try:
            self.fabric.stop()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def config_mapping(self, state_dir: Path, **verify: Any) -> dict[str, Any]:
        """The adapter's config (YAML shape) for this lab."""
        return {
            "config_file": str(self.osm_dir / "opensm.conf"),
            "qos_policy_file": str(self.osm_dir / "qos-policy.conf"),
            "partitions_file": str(self.osm_dir / "partitions.conf"),
            "pid_file": str(self.pid_file),
            "state_dir": str(state_dir),
            "diag": {
                "preload": str(UMAD2SIM),
                "env": {"IBSIM_SOCKNAME": self.fabric.sockname, "SIM_HOST": self.fabric.attach},
                "command_timeout": 10,
                "concurrency": 3,
                "workdir": str(self.scratch),
            },
            "verify": {"timeout": 10, "interval": 0.05, **verify},
        }

    def adapter(self, state_dir: Path, **kwargs: Any) -> OpenSMAdapter:
        """An adapter for this lab with its records in `state_dir`."""
        return OpenSMAdapter(OpenSMConfig.from_mapping(self.config_mapping(state_dir)), **kwargs)

    def reset(self, state_dir: Path) -> None:
        """Baseline files back, SIGHUP; wait until the re-read is over and the fabric shows the baseline."""
        for name, data in self.baseline.items():
            (self.osm_dir / name).write_bytes(data)
        assert self.opensm is not None
        since = self.log_end()
        self.opensm.reload()
        self.wait_for_sweep_end(since)
        with self.adapter(state_dir) as adapter:
            result = adapter.verify([Change(t, None, v) for t, v in BASELINE.items()], timeout=20)
        assert result.ok, result.describe()

    def snapshot(self) -> dict[str, tuple[bytes, int]]:
        """Content and mtime (ns) of OpenSM's files, and the sizes of its log and stdout."""
        out = {
            name: ((self.osm_dir / name).read_bytes(), (self.osm_dir / name).stat().st_mtime_ns)
            for name in FILES
        }
        for log in ("osm.log", "stdout.log"):
            out[log] = (b"", os.path.getsize(self.osm_dir / log))
        return out

    def log_end(self) -> int:
        """Where OpenSM's log ends now: take it before a SIGHUP, for `wait_for_sweep_end`."""
        assert self.opensm is not None
        return len(self.opensm.log_text())

    def wait_for_sweep_end(self, since: int, timeout: float = 20.0) -> None:
        """Until OpenSM's log says `SUBNET UP` after `since` (a `log_end()` from before a SIGHUP).

        On SIGHUP OpenSM re-reads its files, then runs a heavy sweep whose last log line is `SUBNET UP`
        (the log is flushed line by line: force_log_flush and -d 2); nothing follows until the next signal
        (sweep_interval 0). A SIGHUP that lands during a sweep re-reads the files within it, before its
        `SUBNET UP` (OpenSM 3.3.23: two SIGHUPs 2 ms apart give two re-reads and one `SUBNET UP`).
        """
        assert self.opensm is not None
        self.opensm.wait_for_log("SUBNET UP", timeout, after=since)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """OpenSM stopped (SIGSTOP) for the block and resumed (SIGCONT) after it.

        While stopped it writes nothing, and a signal sent to it stays pending (`pending_signals`) rather
        than being handled. Diagnostics that need its SA (saquery) get no answer meanwhile; smpquery and
        ibnetdiscover do (ibsim answers SMPs itself).
        """
        assert self.opensm is not None and self.opensm.proc is not None
        pid = self.opensm.proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            poll_until(lambda: _all_stopped(pid), 10.0, f"OpenSM (pid {pid}) to stop")
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def pending_signals(self) -> set[int]:
        """Numbers of the signals sent to OpenSM and not handled yet (SigPnd, ShdPnd of /proc/PID/status)."""
        assert self.opensm is not None and self.opensm.proc is not None
        mask = 0
        for line in Path(f"/proc/{self.opensm.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("SigPnd", "ShdPnd"):
                mask |= int(value.strip(), 16)
        return {n for n in range(1, 65) if mask >> (n - 1) & 1}

    def smp(self, *args: str) -> str:
        """Run smpquery/saquery against the lab (independently of the adapter); stdout."""
        return self.fabric.run_diag(list(args)).stdout


def _all_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is in the stopped state (T in /proc/PID/task/TID/stat)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # a thread that just exited
            continue
        states.append(text[text.rindex(")") + 2])
    return bool(states) and all(state == "T" for state in states)
