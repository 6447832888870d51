"""Link state, current rates and the port counters of every HCA and switch port.

After each reallocation the fabric keeps, per directed channel that carries or waits, its rate, its wait
ratio and its per-VL wait ratios; `integrate` adds `seconds` of them to the counters, so a step costs time
proportional to the channels in use. A flow offers its full demand on the channels up to and including its
bottleneck (credit back-pressure spreads congestion upstream) and its granted rate after it; a channel's
wait ratio is the share of offered data it could not send, `1 - given / offered`, which is the fraction of
time the congestion metric `rate(port_xmit_wait) * tick_bytes / link_rate` reads back. With the spec's
effects on, credit stalls, packet-granular arbitration and head-of-line blocking change the rates first
(`simulator.cluster.effects`), and the counters show what they did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.cluster.effects import FabricEffects, block_victims, effective_weights, stalled_capacity
from simulator.cluster.sharing import Flow, allocate
from simulator.cluster.spec import VL_COUNT
from simulator.cluster.topology import Topology

COUNTER_MAX_32 = (1 << 32) - 1


@dataclass(slots=True)
class ChannelUse:
    """A directed channel's current use."""

    channel: int
    tx_port: int
    rx_port: int
    rate: float  # bytes/s sent
    offered: float  # bytes/s that wanted to go
    wait_ratio: float
    vl_rates: dict[int, float]
    vl_wait: dict[int, float]  # VL -> wait ratio


class Fabric:
    """Counters and link state of the whole fabric."""

    def __init__(
        self,
        topology: Topology,
        wait_tick_bytes: int = 256,
        mtu_bytes: int = 4096,
        effects: FabricEffects | None = None,
    ) -> None:
        self.topology = topology
        self.effects = effects or FabricEffects(mtu_bytes=mtu_bytes)
        self.tick_bytes = wait_tick_bytes
        self.mtu = mtu_bytes
        n = len(topology.ports)
        self.link_up = [True] * len(topology.links)
        self.xmit_bytes = [0.0] * n
        self.rcv_bytes = [0.0] * n
        self.xmit_packets = [0.0] * n
        self.rcv_packets = [0.0] * n
        self.xmit_wait = [0.0] * n
        self.vl_wait: dict[int, list[float]] = {}
        self.symbol_error = [0] * n
        self.link_downed = [0] * n
        self.saturated: set[tuple[int, str]] = set()
        self.rate: dict[int, float] = {}  # channel -> bytes/s now
        self.wait: dict[int, float] = {}  # channel -> wait ratio now (waiting channels only)
        self._tx = [topology.channel_ports(c)[0] for c in range(2 * len(topology.links))]
        self._rx = [topology.channel_ports(c)[1] for c in range(2 * len(topology.links))]
        self._sending: list[tuple[int, int, float]] = []  # (tx port, rx port, bytes/s)
        self._waiting: list[tuple[int, float, list[tuple[int, float]]]] = []  # (tx port, ratio, per VL)
        self._flows: Sequence[Flow] = ()
        self._per_vl: dict[int, list[tuple[int, float]]] = {}
        self._usage: dict[int, ChannelUse] | None = None
        self._capacity: list[float] | None = None
        self._wait_scale = topology.capacity / wait_tick_bytes

    def capacities(self) -> list[float]:
        """Capacity of every directed channel (0 when its link is down)."""
        if self._capacity is None:
            out: list[float] = []
            for up in self.link_up:
                cap = self.topology.capacity if up else 0.0
                out += (cap, cap)
            self._capacity = out
        return self._capacity

    def reallocate(self, flows: Sequence[Flow], weights: Sequence[int]) -> None:
        """Share the links among `flows`; remember each channel's rate and wait ratios."""
        capacity = self.capacities()
        if self.effects.on:  # the ground truth's extras (simulator.cluster.effects)
            allocate(
                flows,
                stalled_capacity(flows, capacity, self.effects),
                effective_weights(weights, self.effects),
            )
            block_victims(flows, self.effects)
        else:
            allocate(flows, capacity, weights)
        rate: dict[int, float] = {}
        extra: dict[int, float] = {}
        vl_extra: dict[tuple[int, int], float] = {}
        for flow in flows:
            r = flow.rate
            if r > 0:
                for c in flow.channels:
                    rate[c] = rate.get(c, 0.0) + r
            if flow.bottleneck >= 0 and flow.demand > r:
                more = flow.demand - r
                for c in flow.channels[: flow.bottleneck + 1]:
                    if capacity[c] > 0:
                        extra[c] = extra.get(c, 0.0) + more
                        key = (c, flow.vl)
                        vl_extra[key] = vl_extra.get(key, 0.0) + more
        vl_given: dict[tuple[int, int], float] = {}
        if extra:
            for flow in flows:
                for c in flow.channels:
                    if c in extra:
                        key = (c, flow.vl)
                        vl_given[key] = vl_given.get(key, 0.0) + flow.rate
        per_vl: dict[int, list[tuple[int, float]]] = {}
        for (c, vl), more in vl_extra.items():
            given = vl_given.get((c, vl), 0.0)
            per_vl.setdefault(c, []).append((vl, more / (given + more)))
        self.rate = rate
        self.wait = {c: more / (rate.get(c, 0.0) + more) for c, more in extra.items()}
        self._sending = [(self._tx[c], self._rx[c], r) for c, r in rate.items()]
        self._waiting = [(self._tx[c], ratio, per_vl.get(c, [])) for c, ratio in self.wait.items()]
        self._per_vl = per_vl
        self._flows = flows
        self._usage = None

    def integrate(self, seconds: float) -> None:
        """Add `seconds` of the current rates and waits to the counters."""
        xb, rb, xp, rp = self.xmit_bytes, self.rcv_bytes, self.xmit_packets, self.rcv_packets
        packets = seconds / self.mtu
        for tx, rx, rate in self._sending:
            nbytes = rate * seconds
            xb[tx] += nbytes
            rb[rx] += nbytes
            xp[tx] += rate * packets
            rp[rx] += rate * packets
        scale = self._wait_scale * seconds
        for tx, ratio, per_vl in self._waiting:
            self.xmit_wait[tx] += ratio * scale
            counters = self.vl_wait.get(tx)
            if counters is None:
                counters = self.vl_wait[tx] = [0.0] * VL_COUNT
            for vl, vl_ratio in per_vl:
                counters[vl] += vl_ratio * scale

    def usage(self) -> dict[int, ChannelUse]:
        """Every channel in use now, with its per-VL rates (built on demand for views)."""
        if self._usage is None:
            usage: dict[int, ChannelUse] = {}
            for flow in self._flows:
                for c in flow.channels:
                    if flow.rate <= 0 and c not in self.wait:
                        continue
                    use = usage.get(c)
                    if use is None:
                        ratio = self.wait.get(c, 0.0)
                        r = self.rate.get(c, 0.0)
                        offered = r / (1 - ratio) if ratio < 1 else r
                        per_vl = dict(self._per_vl.get(c, []))
                        use = usage[c] = ChannelUse(
                            c, self._tx[c], self._rx[c], r, offered, ratio, {}, per_vl
                        )
                    use.vl_rates[flow.vl] = use.vl_rates.get(flow.vl, 0.0) + flow.rate
            self._usage = usage
        return self._usage

    def set_link(self, link: int, up: bool) -> bool:
        """Take a link down or bring it up; returns whether its state changed."""
        if self.link_up[link] == up:
            return False
        self.link_up[link] = up
        self._capacity = None
        if not up:
            a, b = self.topology.links[link].a, self.topology.links[link].b
            self.link_downed[a] += 1
            self.link_downed[b] += 1
        return True

    def flap(self, link: int) -> None:
        """A link went down and came straight back (link_downed + 1 on both ends)."""
        a, b = self.topology.links[link].a, self.topology.links[link].b
        self.link_downed[a] += 1
        self.link_downed[b] += 1

    def port_up(self, port: int) -> bool:
        """Whether the port's link is up."""
        link = self.topology.link_of_port[port]
        return link >= 0 and self.link_up[link]

    def counter(self, port: int, name: str) -> int:
        """A counter as a port shows it (data in 4-byte words; 32-bit wait and 16/8-bit errors saturate)."""
        raw: dict[str, float] = {
            "port_xmit_data": self.xmit_bytes[port] / 4,
            "port_rcv_data": self.rcv_bytes[port] / 4,
            "port_xmit_packets": self.xmit_packets[port],
            "port_rcv_packets": self.rcv_packets[port],
            "port_xmit_wait": self.xmit_wait[port],
            "symbol_error": self.symbol_error[port],
            "link_downed": self.link_downed[port],
        }
        widths = {"port_xmit_wait": 32, "symbol_error": 16, "link_downed": 8}
        value = int(raw[name])
        if (port, name) in self.saturated:
            value = (1 << widths.get(name, 32)) - 1
        if name in widths:
            value = min(value, (1 << widths[name]) - 1)
        return value
