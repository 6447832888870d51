"""The cluster model behind the real systems: an ibsim fabric (with OpenSM) and a Slurm cluster.

```python
mirror = IbsimMirror(model, IbsimConsole(fifo, log))  # ibsim runs render_net(model.topology)
model.advance(60); mirror.push()                      # switch counters and link states into ibsim
mirror.pull_qos(Smpquery(run, lid, port))             # what OpenSM programmed -> model.set_vl_weights
SlurmMirror(model, {"SLURM_CONF": conf}).sync()       # Slurm partitions and drains -> the model
```

Each module's job, and the facts about ibsim and Slurm they rely on: docs/simulator.md.
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
