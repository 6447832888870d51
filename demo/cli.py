"""`ibpool demo`: the closed loop on one machine, one command, no servers needed.

    ibpool demo [--fast] [--out DIR] [--seed N] [--quiet] [--real]

The run, its static twin and each change's counterfactual, the alert replay, then the summary and the
post-mortem report, all kept in the run directory (`--out`, default a new temporary directory). `--real`
(root; ibsim, OpenSM, the infiniband diagnostics, Slurm and munge installed) applies the changes to a
real OpenSM on ibsim and a real Slurm, on a smaller cluster; without them it says what is missing, exit 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from demo.alert_replay import SERIES_FILE, load_rules, replay_run
from demo.loop import Loop, LoopReport
from demo.real import missing
from demo.real.fabric import RealError
from demo.report import build, comparison_rows
from demo.scenario import PRIORITY_JOB, RULE_SETTINGS
from demo.series import SeriesRecorder
from demo.settings import DEFAULT, FAST, HIGH_POOL, Timings
from demo.twin import TwinResult, run_twins
from postmortem.cli import main as postmortem
from proposals.errors import ApprovalConfigError, StoreError
from scheduler_hooks.errors import HookError
from simulator.backends import BackendError
from simulator.cluster.errors import ClusterError

FAILURES = (ApprovalConfigError, StoreError, HookError, ClusterError, BackendError, RealError, OSError)


def parser() -> argparse.ArgumentParser:
    """The flags."""
    p = argparse.ArgumentParser(prog="ibpool demo", description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="six simulated hours instead of a day")
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
    timings = FAST if args.fast else DEFAULT
    try:
        text = _run(timings, out, say, args.seed, args.real)
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


def _run(t: Timings, out: Path, say: Callable[[str], None], seed: int, real: bool) -> str:
    """The loop run, its twins, the alert replay and the summary files; the summary text."""
    ruleset, why_not = load_rules(None, dict(RULE_SETTINGS))
    recorder = SeriesRecorder(ruleset.metric_names() if ruleset is not None else ())
    loop = Loop(t, out, recorder, say=say, seed=seed, real=real)
    try:
        report = loop.run()
    finally:
        loop.run_dir.close()
        recorder.write(out / SERIES_FILE)
    say("the static twin and each change's counterfactual (model-only replays) ...")
    twins = run_twins(
        loop.model.fresh,
        loop.model.log,
        loop.model,
        duration=t.duration_seconds,
        every=t.sample_seconds,
        window=t.effect_window_seconds,
        priority_pool=HIGH_POOL,
        priority_job=PRIORITY_JOB,
    )
    say("replaying the shipped alert rules over the run's series (vmalert) ...")
    alerts = replay_run(out, ruleset, why_not, loop.start_unix, loop.start_unix + t.duration_seconds)
    text, data = build(report, loop.run_dir.events, twins, alerts)
    if real:
        text += (
            f"\n--real: a smaller cluster ({len(loop.model.spec.nodes)} nodes) than the default demo; "
            "changes applied to real OpenSM (on ibsim) and Slurm, the model fed back from them"
        )
    run_dir = loop.run_dir
    run_dir.write_json("summary.json", data)
    run_dir.write_json("proposals.json", report.proposals)
    run_dir.write_json("twin.json", {**twins.to_dict(), "rows": comparison_rows(twins.static, twins.loop)})
    run_dir.write_json("effects.json", _effects(report, twins))
    run_dir.write_json(
        "run.json",
        {
            "timings": t.name,
            "seed": seed,
            "real": real,
            "start": loop.start_unix,
            "duration_seconds": t.duration_seconds,
            "nodes": list(loop.model.spec.nodes),
            "pools": {p.name: list(p.nodes) for p in loop.model.spec.pools},
            "high_pool": HIGH_POOL,
            "priority_job": PRIORITY_JOB,
            "rule_settings": dict(RULE_SETTINGS),
            "series": str(SERIES_FILE),
        },
    )
    (out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    return text


def _effects(report: LoopReport, twins: TwinResult) -> list[dict[str, Any]]:
    """Per applied change: what it was and its counterfactual (effects.json)."""
    by_tag = {e.tag: e for e in twins.effects}
    out: list[dict[str, Any]] = []
    for change in report.applied:
        effect = by_tag.get(change.proposal_id)
        out.append(
            {
                "change": {
                    "t": change.t,
                    "started": change.started,
                    "proposal_id": change.proposal_id,
                    "kind": change.kind,
                    "policy": change.policy,
                    "changes": [list(c) for c in change.changes],
                    "expected_effect": change.expected_effect,
                },
                "counterfactual": None if effect is None else effect.to_dict(),
            }
        )
    return out


def _write_report(out: Path) -> int:
    """The post-mortem report of the run, written beside its data."""
    report = out / "report.html"
    status = postmortem(["--run", str(out), "--out", str(report)])
    if status == 0:
        print(f"Post-mortem report: {report}")
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
