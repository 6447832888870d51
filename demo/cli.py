"""`ibpool demo`: the closed loop on one machine, one command, no servers needed.

    ibpool demo [--fast] [--out DIR] [--seed N] [--quiet] [--real]

Default: three simulated hours at 75 simulated seconds per wall second (a few minutes). `--fast`: 75
simulated minutes as fast as the machine goes (well under a minute). Demo timings are compressed: see
demo.settings. The run directory (`--out`, default a new temporary directory) keeps the timeline, the
series and the proposal store for a post-mortem (see demo.record). `--real` (root; ibsim, OpenSM, the
infiniband diagnostics, Slurm and munge installed) applies the changes to a real OpenSM on ibsim and a real
Slurm on localhost, on a smaller cluster (see demo.real); without them it says what is missing, exit 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from demo.real import missing
from demo.real.fabric import RealError
from demo.run import Demo
from demo.settings import DEFAULT, FAST
from demo.summary import build
from postmortem.cli import main as postmortem
from proposals.errors import ApprovalConfigError, StoreError
from scheduler_hooks.errors import HookError
from simulator.backends import BackendError
from simulator.cluster.errors import ClusterError


def parser() -> argparse.ArgumentParser:
    """The flags."""
    p = argparse.ArgumentParser(prog="ibpool demo", description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="a shorter, unpaced run (well under a minute)")
    p.add_argument("--out", type=Path, default=None, help="run directory (default: a new temporary one)")
    p.add_argument("--seed", type=int, default=1, help="workload seed (1)")
    p.add_argument("--quiet", action="store_true", help="no progress lines; the summary only")
    p.add_argument(
        "--real",
        action="store_true",
        help="apply to real OpenSM on ibsim and a real Slurm, started here (root; a smaller cluster)",
    )
    return p


def main(argv: list[str]) -> int:
    """0 done, 1 failed at run time, 2 bad usage."""
    args = parser().parse_args(argv)
    if args.real:
        lacking = missing()
        if lacking:
            print(f"ibpool demo: --real needs {', '.join(lacking)} (run without --real)", file=sys.stderr)
            return 2
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="ibpool-demo-"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"ibpool demo: cannot create {out}: {exc}", file=sys.stderr)
        return 1
    if any(out.iterdir()):
        print(f"ibpool demo: {out} is not empty; give an empty or new directory", file=sys.stderr)
        return 2
    handler = logging.FileHandler(out / "demo.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    say = (lambda _: None) if args.quiet else (lambda line: print(line, flush=True))
    try:
        demo = Demo(FAST if args.fast else DEFAULT, out, say=say, seed=args.seed, real=args.real)
        try:
            report = demo.run()
        finally:
            demo.run_dir.close()
        text, data = build(report, demo.run_dir.events)
        demo.run_dir.write_json("summary.json", data)
        demo.run_dir.write_json("proposals.json", report.proposals)
        demo.run_dir.write_json("effects.json", data["effects"])
        if args.real:
            text += (
                f"\n--real: a smaller cluster ({len(demo.model.spec.nodes)} nodes) than the default demo; "
                "changes applied to real OpenSM (on ibsim) and Slurm, the model fed back from them"
            )
        (out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    except (
        ApprovalConfigError,
        StoreError,
        HookError,
        ClusterError,
        BackendError,
        RealError,
        OSError,
    ) as exc:
        print(f"ibpool demo: {exc} (log: {out / 'demo.log'})", file=sys.stderr)
        return 1
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()
    print()
    print(text)
    return _write_report(out)


def _write_report(out: Path) -> int:
    """The post-mortem report of the run, written beside its data."""
    report = out / "report.html"
    status = postmortem(["--run", str(out), "--out", str(report)])
    if status == 0:
        print(f"Post-mortem report: {report}")
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
