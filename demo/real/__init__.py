"""`ibpool demo --real`: the demo loop against real OpenSM on ibsim and a real Slurm on localhost.

    ibpool demo --real [--fast] [--out DIR] [--seed N] [--quiet]      (as root)

What changes from the plain demo: a smaller cluster (`demo.real.scenario`: 8 nodes on two leaves, so that
ibsim, OpenSM and one slurmd per node stay light), and the apply orchestrator drives the REAL sides
(`scheduler_hooks.apply.opensm_side.OpenSMSide` with `OpenSMAdapter`, `slurm_side.SlurmSide` with
`SlurmAdapter`) against programs this package starts and stops itself (`demo.real.fabric`: ibsim from the
model's topology (`render_net`) with a console FIFO, OpenSM with QoS on and the model's tables;
`demo.real.slurm`: munged, slurmctld and one `slurmd -N` per model node with fake GPUs; both run on
`simulator.backends.ibsim_run` / `slurm_run`, the start-up code the integration tests use too). The model is
kept in step (`demo.real.backends.RealBackends`): every cycle `IbsimMirror.push()` mirrors its counters and
link states into ibsim; after every applied change `IbsimMirror.pull_qos` (smpquery on an HCA port) and
`SlurmMirror.sync()` feed what the real systems now say back into the model.

Needs root and `ibsim`, `opensm`, `perfquery`, `smpquery`, `saquery`, `slurmctld`, `slurmd`, `munged`
(`missing()` says what is not there; the CLI prints it and exits 2). Everything is stopped at the end, also
on errors, Ctrl-C and SIGTERM/SIGHUP: OpenSM before ibsim, slurmd before slurmctld (munged is left running
when it was already running, stopped when this package started it). Files: `<run dir>/real/`.
"""

from demo.real.backends import RealBackends, missing

__all__ = ["RealBackends", "missing"]
