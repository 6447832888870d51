"""Mirror the real Slurm's partitions and drains into the model, and lay out a Slurm cluster for a model.

`SlurmMirror.sync()` reads partitions and node states with `sinfo` and applies them in the hooks' order:
drain, set a partition's nodes, resume. Slurm is the scheduler of record, except that a node the model
drained for a lost GPU stays drained until the GPU is restored. Everything is validated before anything
changes; `read()` and `apply()` are split so the model part can run under the runner's lock.
`slurm_layout(model)` gives what a test Slurm cluster (or a slurm.conf, `conf_lines`) needs to match.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from foundation.commands import CommandRunner, which
from foundation.hostlist import expand_hostlist
from simulator.backends.errors import SlurmReadError
from simulator.cluster.model import ClusterModel

log = logging.getLogger(__name__)
Run = Callable[[Sequence[str]], str]
PARTITIONS_ARGV = ("sinfo", "-h", "-a", "-o", "%R %N")  # every partition's nodes, as a hostlist
NODES_ARGV = ("sinfo", "-h", "-N", "-o", "%N|%T|%E")  # node, state, reason
_DRAIN_STATES = ("drain", "drained", "draining")
_MODEL_DRAINED = ("draining", "drained")
_NO_NODES = ("", "n/a", "(null)")


@dataclass(frozen=True)
class SlurmState:
    """Partitions (member nodes) and drained nodes (with their reason) as Slurm shows them."""

    partitions: Mapping[str, tuple[str, ...]]
    drained: Mapping[str, str]


@dataclass(frozen=True)
class SlurmSync:
    """What one sync changed in the model, and what it could not map."""

    moved: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    drained: tuple[str, ...] = ()
    resumed: tuple[str, ...] = ()
    unknown_partitions: tuple[str, ...] = ()  # in Slurm, not pools of the model
    missing_pools: tuple[str, ...] = ()  # pools of the model Slurm does not have

    @property
    def changed(self) -> bool:
        """Whether the model changed."""
        return bool(self.moved or self.drained or self.resumed)


def parse_partitions(text: str) -> dict[str, tuple[str, ...]]:
    """`%R %N` lines (a partition may span several lines) -> partition -> nodes in order, no repeats."""
    members: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, _, hostlist = line.strip().partition(" ")
        if not name:
            continue
        names = members.setdefault(name, [])
        hostlist = hostlist.strip()
        if hostlist.lower() in _NO_NODES:
            continue
        try:
            names += [n for n in expand_hostlist(hostlist) if n not in names]
        except ValueError as exc:
            raise SlurmReadError(f"sinfo: partition {name}: {exc}") from None
    return {name: tuple(nodes) for name, nodes in members.items()}


def parse_drained(text: str) -> dict[str, str]:
    """`%N|%T|%E` lines -> the nodes whose state is drained or draining, with Slurm's reason."""
    drained: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) < 2 or not parts[0]:
            continue
        node, state = parts[0], parts[1].lower().rstrip("*~#!%$@^-")
        if any(word in _DRAIN_STATES for word in state.split("+")):
            reason = parts[2].strip() if len(parts) > 2 else ""
            drained[node] = "" if reason == "none" else reason
    return drained


def command_runner(env: Mapping[str, str], timeout_seconds: float = 15.0) -> Run:
    """Runs a Slurm client program with `env` (SLURM_CONF, ...); its stdout, SlurmReadError on failure."""

    runner = CommandRunner(timeout_seconds, env=env)

    def run(argv: Sequence[str]) -> str:
        result = runner.run([which(argv[0]) or argv[0], *argv[1:]])
        if not result.ok:
            raise SlurmReadError(result.describe(with_args=True))
        return result.stdout

    return run


class SlurmMirror:
    """Makes the model's pools and drains follow the real Slurm's."""

    def __init__(self, model: ClusterModel, cluster_env: Mapping[str, str], run: Run | None = None) -> None:
        self.model = model
        self._run = run or command_runner(cluster_env)

    def read(self) -> SlurmState:
        """Slurm's partitions and drained nodes now (does not touch the model)."""
        partitions = parse_partitions(self._run(PARTITIONS_ARGV))
        drained = parse_drained(self._run(NODES_ARGV))
        return SlurmState(partitions, drained)

    def sync(self) -> SlurmSync:
        """Read Slurm and apply it to the model."""
        return self.apply(self.read())

    def apply(self, state: SlurmState) -> SlurmSync:
        """Apply a read state; SlurmReadError (nothing changed) when it names nodes the model lacks."""
        view = self.model.scheduler_view()
        pools = [p for p in state.partitions if p in view.pools]
        named = {n for p in pools for n in state.partitions[p]} | set(state.drained)
        unknown = sorted(named - set(view.nodes))
        if unknown:
            raise SlurmReadError(f"Slurm has nodes the model does not: {', '.join(unknown[:10])}")
        drained, resumed = [], []
        for node, reason in sorted(state.drained.items()):  # drains first: a moved node takes no new job
            if view.nodes[node].state not in _MODEL_DRAINED:
                self.model.drain(node, reason or "drained in Slurm")
                drained.append(node)
        moved = {}
        for pool in pools:
            before, after = view.pools[pool].nodes, state.partitions[pool]
            if set(before) != set(after):
                self.model.set_partition_nodes(pool, list(after))
                moved[pool] = (before, after)
        for name, info in sorted(view.nodes.items()):  # resumes last, into the new pools
            if info.state in _MODEL_DRAINED and name not in state.drained and not info.lost_gpus:
                self.model.resume(name)
                resumed.append(name)
        result = SlurmSync(
            moved,
            tuple(drained),
            tuple(resumed),
            tuple(sorted(set(state.partitions) - set(view.pools))),
            tuple(sorted(set(view.pools) - set(state.partitions))),
        )
        if result.changed:
            log.info("model follows Slurm: moved %s, drained %s, resumed %s", list(moved), drained, resumed)
        return result


@dataclass(frozen=True)
class SlurmLayout:
    """The Slurm nodes and partitions that match a model."""

    nodes: tuple[str, ...]
    partitions: Mapping[str, tuple[str, ...]]
    gpus_per_node: int

    def conf_lines(self, node_options: str = "CPUs=1 RealMemory=500 State=UNKNOWN") -> list[str]:
        """`NodeName=` and `PartitionName=` lines of a slurm.conf (the first partition is the default)."""
        gres = f" Gres=gpu:{self.gpus_per_node}" if self.gpus_per_node else ""
        lines = [f"NodeName={node} {node_options}{gres}".rstrip() for node in self.nodes]
        for index, (name, members) in enumerate(self.partitions.items()):
            nodes = f" Nodes={','.join(members)}" if members else ""
            default = "YES" if index == 0 else "NO"
            lines.append(f"PartitionName={name}{nodes} Default={default} MaxTime=INFINITE State=UP")
        return lines


def slurm_layout(model: ClusterModel) -> SlurmLayout:
    """The model's nodes (names as in the model), its pools as partitions, and its GPUs per node."""
    view = model.scheduler_view()
    partitions = {name: pool.nodes for name, pool in view.pools.items()}
    return SlurmLayout(tuple(model.spec.nodes), partitions, model.spec.gpus_per_node)
