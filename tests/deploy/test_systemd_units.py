"""deploy/systemd: the units pass `systemd-analyze verify`, score low exposure, and run real ibpool commands.

`systemd-analyze` works without systemd as PID 1 when pointed at a root directory: the units go into
`ROOT/etc/systemd/system`, the distribution's units (targets the ones here depend on) are copied into
`ROOT/usr/lib/systemd/system`, and `ROOT/opt/ibpool/bin/ibpool` is an executable stand-in, since verify
checks that ExecStart names one. Any warning verify prints (an unknown key, a bad value) fails the test.
`systemd-tmpfiles` and `systemd-sysusers` apply the tmpfiles.d and sysusers.d entries to such a root.
The units are also parsed here, so their hardening and commands are checked where systemd is missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exporter import config as exporter_config
from exporter.fabric import config as fabric_config
from exporter.scheduler import config as scheduler_config
from exporter.scheduler import targets_main
from ibpool.cli import COMMANDS
from recommender import cli as recommender_cli

REPO = Path(__file__).resolve().parents[2]
UNITS_DIR = REPO / "deploy" / "systemd"
SERVICES = sorted(UNITS_DIR.glob("*.service"))
ANALYZE = shutil.which("systemd-analyze")
TMPFILES = shutil.which("systemd-tmpfiles")
SYSUSERS = shutil.which("systemd-sysusers")
SYSTEM_UNITS = Path("/usr/lib/systemd/system")
EXECUTABLE = "/opt/ibpool/bin/ibpool"
MAX_EXPOSURE = 2.5  # systemd-analyze security: 0 (locked down) .. 10 (exposed); "OK" is below 4.5
THRESHOLD = f"--threshold={int(MAX_EXPOSURE * 10)}"  # systemd-analyze takes it in tenths
needs_systemd = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze is not installed (Debian: systemd)"
)

Unit = dict[str, list[tuple[str, str]]]


def parse_unit(text: str) -> Unit:
    """Sections -> (key, value) pairs in order, repeated keys kept; comments and blank lines dropped."""
    unit: Unit = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            unit.setdefault(section, [])
            continue
        key, sep, value = line.partition("=")
        assert sep and section, f"not `key=value` in a section: {raw!r}"
        unit[section].append((key.strip(), value.strip()))
    return unit


def values(unit: Unit, section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def one(unit: Unit, section: str, key: str) -> str:
    (value,) = values(unit, section, key)
    return value


def command_argv(unit: Unit) -> list[str]:
    """ExecStart's words after the ibpool executable, with the unit's own Environment= defaults in."""
    env: dict[str, str] = {}
    for assignment in values(unit, "Service", "Environment"):
        for word in assignment.split():
            name, _, value = word.partition("=")
            env[name] = value
    words = one(unit, "Service", "ExecStart").split()
    assert words[0] == EXECUTABLE
    expanded = [re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], w) for w in words[1:]]
    return [w for w in expanded if w]


def load_with_the_real_cli(argv: list[str]) -> object:
    """The command's own settings loader over `argv` (raises ConfigError on a flag it does not know)."""
    name, rest = argv[0], argv[1:]
    loaders: dict[str, Callable[[list[str]], object]] = {
        "exporter": exporter_config.load_config,
        "fabric-exporter": fabric_config.load_config,
        "scheduler-exporter": scheduler_config.load_config,
        "targets": targets_main.load_config,
        "recommend": lambda a: recommender_cli.load(recommender_cli.parser().parse_args(a)),
    }
    return loaders[name](rest)


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_every_service_is_hardened(path: Path) -> None:
    unit = parse_unit(path.read_text())
    service = dict(unit["Service"])
    expected = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
        "RestrictSUIDSGID": "yes",
        "SystemCallArchitectures": "native",
    }
    assert {k: service.get(k) for k in expected} == expected
    assert "@system-service" in values(unit, "Service", "SystemCallFilter")
    writable = values(unit, "Service", "ReadWritePaths")
    assert len(writable) <= 1
    for directory in writable[0].split() if writable else []:
        # every writable path is a state or runtime directory systemd creates for the unit
        made = values(unit, "Service", "StateDirectory") + values(unit, "Service", "RuntimeDirectory")
        assert any(directory.endswith("/" + d.split()[-1]) for d in made), directory


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_every_command_parses_with_the_real_cli(path: Path) -> None:
    argv = command_argv(parse_unit(path.read_text()))
    assert argv[0] in COMMANDS
    load_with_the_real_cli(argv)


def test_the_units_are_the_four_services_and_the_target_list() -> None:
    commands = sorted(command_argv(parse_unit(p.read_text()))[0] for p in SERVICES)
    assert commands == ["exporter", "fabric-exporter", "recommend", "scheduler-exporter", "targets"]
    timer = parse_unit((UNITS_DIR / "ibpool-targets.timer").read_text())
    assert one(timer, "Timer", "OnUnitActiveSec") == "60s"


def test_the_node_exporter_reads_the_directory_the_prolog_writes() -> None:
    unit = parse_unit((UNITS_DIR / "ibpool-exporter.service").read_text())
    argv = command_argv(unit)
    assert argv[argv.index("--jobs.directory") + 1] == "/run/ibpool/jobs"
    assert "/run/ibpool/jobs" in (REPO / "deploy" / "slurm" / "ibpool-prolog").read_text()
    tmpfiles = (UNITS_DIR / "tmpfiles.d" / "ibpool.conf").read_text().split("\n")
    assert "d /run/ibpool/jobs 0755 root root -" in tmpfiles


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A root directory holding the distribution's units, ours, and a stand-in ibpool executable."""
    root = tmp_path_factory.mktemp("systemd-root")
    (root / "usr" / "lib" / "systemd").mkdir(parents=True)
    if SYSTEM_UNITS.is_dir():
        shutil.copytree(SYSTEM_UNITS, root / "usr" / "lib" / "systemd" / "system", symlinks=True)
    units = root / "etc" / "systemd" / "system"
    units.mkdir(parents=True)
    for path in UNITS_DIR.glob("ibpool-*"):
        shutil.copy(path, units / path.name)
    executable = root / EXECUTABLE.lstrip("/")
    executable.parent.mkdir(parents=True)
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    yield root


def analyze(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run(
        [ANALYZE, f"--root={root}", *args], capture_output=True, text=True, timeout=120, check=False
    )


@needs_systemd
def test_systemd_analyze_verify_accepts_every_unit_without_a_warning(root: Path) -> None:
    names = [p.name for p in UNITS_DIR.glob("ibpool-*")]
    proc = analyze(root, "verify", *names)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == "", proc.stderr + proc.stdout


@needs_systemd
def test_systemd_analyze_verify_reports_a_broken_unit(root: Path) -> None:
    units = root / "etc" / "systemd" / "system"
    broken = units / "ibpool-broken.service"
    broken.write_text((units / "ibpool-exporter.service").read_text().replace("ProtectHome=", "ProtectHom="))
    try:
        proc = analyze(root, "verify", broken.name)
    finally:
        broken.unlink()
    assert "Unknown key 'ProtectHom'" in proc.stderr


@needs_systemd
@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_exposure_is_low(root: Path, path: Path) -> None:
    proc = analyze(root, "security", "--offline=true", THRESHOLD, path.name)
    level = re.search(r"Overall exposure level for \S+: ([\d.]+)", proc.stdout)
    assert level is not None, proc.stdout[-500:] + proc.stderr
    assert proc.returncode == 0 and float(level.group(1)) <= MAX_EXPOSURE, level.group(0)


@needs_systemd
def test_an_unhardened_unit_scores_above_the_bound(root: Path) -> None:
    units = root / "etc" / "systemd" / "system"
    plain = units / "ibpool-plain.service"
    plain.write_text(f"[Service]\nExecStart={EXECUTABLE} exporter\n")
    try:
        proc = analyze(root, "security", "--offline=true", THRESHOLD, plain.name)
    finally:
        plain.unlink()
    assert proc.returncode != 0


@pytest.mark.skipif(TMPFILES is None, reason="systemd-tmpfiles is not installed (Debian: systemd)")
def test_tmpfiles_creates_the_job_map_directory(tmp_path: Path) -> None:
    assert TMPFILES is not None
    conf = UNITS_DIR / "tmpfiles.d" / "ibpool.conf"
    proc = subprocess.run(
        [TMPFILES, f"--root={tmp_path}", "--create", str(conf)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    jobs = tmp_path / "run" / "ibpool" / "jobs"
    assert jobs.is_dir() and jobs.stat().st_mode & 0o777 == 0o755


@pytest.mark.skipif(SYSUSERS is None, reason="systemd-sysusers is not installed (Debian: systemd)")
def test_sysusers_creates_the_ibpool_user(tmp_path: Path) -> None:
    assert SYSUSERS is not None
    (tmp_path / "etc").mkdir()
    conf = UNITS_DIR / "sysusers.d" / "ibpool.conf"
    proc = subprocess.run(
        [SYSUSERS, f"--root={tmp_path}", str(conf)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    (entry,) = [line for line in (tmp_path / "etc" / "passwd").read_text().splitlines() if line]
    name, _, _, _, _, home, shell = entry.split(":")
    assert (name, home) == ("ibpool", "/var/lib/ibpool") and shell.endswith("nologin")
