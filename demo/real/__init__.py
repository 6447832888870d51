"""`ibpool demo --real`: the demo loop against real OpenSM on ibsim and a real Slurm on localhost.

    ibpool demo --real [--fast] [--out DIR] [--seed N] [--quiet]      (as root)

A smaller cluster (`scenario`); the apply orchestrator drives the real OpenSM and Slurm sides against
programs this package starts and stops (`fabric`, `slurm`), and `backends.RealBackends` keeps the model in
step. Needs root and the programs `missing()` checks (the CLI prints what is missing, exit 2). Everything
is stopped at the end, also on errors, Ctrl-C, SIGTERM and SIGHUP. Files: `<run dir>/real/`. In detail:
docs/demo.md ("`--real`").
"""

from demo.real.backends import RealBackends, missing

__all__ = ["RealBackends", "missing"]
