"""The cluster model behind the real systems: an ibsim fabric (with OpenSM) and a Slurm cluster.

```python
net = render_net(model.topology)                     # ibsim's .net: the model's switches, HCAs, GUIDs
mirror = IbsimMirror(model, IbsimConsole(fifo, log)) # ibsim started with `ibsim -s NET 0<>FIFO > LOG`
model.advance(60); mirror.push()                     # switch counters and link states into ibsim
mirror.pull_qos(Smpquery(run, lid, port))            # what OpenSM programmed -> model.set_vl_weights
SlurmMirror(model, {"SLURM_CONF": conf}).sync()      # Slurm partitions and drains -> the model
slurm_layout(model)                                  # nodes and partitions for a matching Slurm
```

Modules: `ibsim_net` (topology file), `ibsim_console` (batched console), `ibsim_counters` (model counter
-> PMA field), `ibsim_mirror` (push, pull_qos), `qos_read` (opensm.conf and smpquery tables),
`slurm_mirror` (sinfo -> model; layout), `errors`. Running the real programs: `ibsim_run` (ibsim with a
console FIFO, OpenSM under umad2sim), `slurm_run` (munged, slurmctld, slurmd per node), both on
`processes` (each program in its own process group, all stopped in every exit path).
"""

from simulator.backends.errors import BackendError, ConsoleError, QosReadError, SlurmReadError
from simulator.backends.ibsim_console import Console, IbsimConsole
from simulator.backends.ibsim_mirror import IbsimMirror, Plan
from simulator.backends.ibsim_net import first_hca, link_speed, render_net
from simulator.backends.qos_read import (
    OpenSMConf,
    QosChange,
    QosSource,
    QosTables,
    Smpquery,
    apply_qos,
    parse_opensm_conf,
    parse_sl2vl_table,
    parse_vlarb_tables,
)
from simulator.backends.slurm_mirror import SlurmLayout, SlurmMirror, SlurmState, SlurmSync, slurm_layout

__all__ = [
    "BackendError",
    "Console",
    "ConsoleError",
    "IbsimConsole",
    "IbsimMirror",
    "OpenSMConf",
    "Plan",
    "QosChange",
    "QosReadError",
    "QosSource",
    "QosTables",
    "SlurmLayout",
    "SlurmMirror",
    "SlurmReadError",
    "SlurmState",
    "SlurmSync",
    "Smpquery",
    "apply_qos",
    "first_hca",
    "link_speed",
    "parse_opensm_conf",
    "parse_sl2vl_table",
    "parse_vlarb_tables",
    "render_net",
    "slurm_layout",
]
