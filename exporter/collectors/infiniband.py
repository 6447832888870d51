"""InfiniBand collector: maps sysfs (and optional verbs) snapshots to the `ibpool_infiniband_*` families.

Every `node_infiniband_*` sample of node_exporter 1.5.0 has an `ibpool_infiniband_*` twin with the same
labels and value (the `MIRRORED` families); on top come port_info, link width, MTUs, hw_counters, 32-bit
saturation flags and the read-error counter. With `mirror=False` (`--no-collector.infiniband.mirror`,
for hosts where node_exporter's infiniband collector already runs) the mirrored families are left out and
only what node_exporter lacks is served; the counters are still read for the saturation flags. Label
strings are rendered once per port and reused, so a scrape appends (label string, value) pairs and
creates no other objects than the families and their lists.
"""

from __future__ import annotations

from exporter import catalog
from exporter.sources.ib_sysfs import DeviceInfo, InfinibandSnapshot, InfinibandSysfsSource, PortSnapshot
from exporter.sources.verbs import VerbsMtuSource
from foundation.exposition import MetricFamily, MetricSpec, render_labels

SATURATED_32 = (1 << 32) - 1
_PORT_LABELS = ("device", "port")
_SATURABLE = catalog.IB_32BIT_COUNTERS


class _PortLabels:
    """Rendered label strings of one port, built on first use."""

    __slots__ = ("base", "device", "hw", "info", "info_key", "port", "saturated")

    def __init__(self, device: str, port: str) -> None:
        self.device = device
        self.port = port
        self.base = render_labels(_PORT_LABELS, (device, port))
        self.hw: dict[str, str] = {}
        self.saturated: dict[str, str] = {}
        self.info_key: tuple[str, ...] = ()
        self.info = ""

    def hw_label(self, counter: str) -> str:
        """`{device=..,port=..,counter=..}` for a hw counter."""
        label = self.hw.get(counter)
        if label is None:
            label = render_labels(catalog.IB_HW_COUNTER.labels, (self.device, self.port, counter))
            self.hw[counter] = label
        return label

    def saturated_label(self, counter: str) -> str:
        """`{device=..,port=..,counter=..}` for a saturation flag."""
        label = self.saturated.get(counter)
        if label is None:
            label = render_labels(catalog.IB_COUNTER_SATURATED.labels, (self.device, self.port, counter))
            self.saturated[counter] = label
        return label

    def info_label(self, snap: PortSnapshot) -> str:
        """The port_info label string (re-rendered only when a static fact changed)."""
        dev = snap.device
        key = (
            snap.link_layer or "",
            dev.node_guid or "",
            snap.port_guid or "",
            dev.hca_type or "",
            dev.firmware_version or "",
            dev.board_id or "",
            snap.link_speed or "",
        )
        if key != self.info_key:
            self.info_key = key
            self.info = render_labels(catalog.IB_PORT_INFO.labels, (self.device, self.port, *key))
        return self.info


MIRRORED: frozenset[MetricSpec] = frozenset(
    {
        catalog.IB_INFO,
        catalog.IB_STATE_ID,
        catalog.IB_PHYSICAL_STATE_ID,
        catalog.IB_RATE,
        *(spec for spec, _ in catalog.IB_COUNTERS.values()),
        *(spec for spec, _ in catalog.IB_LEGACY_COUNTERS.values()),
    }
)  # the families node_exporter's infiniband collector also serves (as node_infiniband_*)


class InfinibandCollector:
    """The `infiniband` collector: one sysfs read (plus cached verbs MTUs) per scrape."""

    name = "infiniband"

    def __init__(
        self, source: InfinibandSysfsSource, verbs: VerbsMtuSource | None = None, *, mirror: bool = True
    ) -> None:
        self._source = source
        self._verbs = verbs if verbs is not None and verbs.available else None
        self._specs: list[MetricSpec] = [
            catalog.IB_INFO,
            catalog.IB_STATE_ID,
            catalog.IB_PHYSICAL_STATE_ID,
            catalog.IB_RATE,
            catalog.IB_PORT_INFO,
            catalog.IB_LINK_WIDTH,
            catalog.IB_ACTIVE_MTU,
            catalog.IB_MAX_MTU,
            catalog.IB_HW_COUNTER,
            catalog.IB_COUNTER_SATURATED,
            catalog.IB_READ_ERRORS,
        ]
        self._counter_plan = self._plan(catalog.IB_COUNTERS)
        self._legacy_plan = self._plan(catalog.IB_LEGACY_COUNTERS)
        self._labels: dict[tuple[str, int], _PortLabels] = {}
        self._device_labels: dict[DeviceInfo, str] = {}
        self._served = [mirror or spec not in MIRRORED for spec in self._specs]

    def _plan(self, table: dict[str, tuple[MetricSpec, int]]) -> dict[str, tuple[int, int]]:
        """sysfs file -> (index of its family in self._specs, multiplier)."""
        plan: dict[str, tuple[int, int]] = {}
        for file_name, (spec, multiplier) in table.items():
            if spec not in self._specs:
                self._specs.append(spec)
            plan[file_name] = (self._specs.index(spec), multiplier)
        return plan

    def collect(self) -> list[MetricFamily]:
        """Read the sysfs tree once and map it."""
        snapshot = self._source.read()
        families = [MetricFamily(spec) for spec in self._specs]
        self._map_devices(snapshot, families[0].samples)
        for port in snapshot.ports:
            self._map_port(port, families)
        if self._verbs is not None:
            self._map_mtus(self._verbs, snapshot, families)
        errors = families[10]
        for reason, count in self._source.read_errors().items():
            errors.add((reason,), count)
        return [family for family, served in zip(families, self._served, strict=True) if served]

    def close(self) -> None:
        """Close the sources' handles."""
        self._source.close()
        if self._verbs is not None:
            self._verbs.close()

    def _map_devices(self, snapshot: InfinibandSnapshot, out: list[tuple[str, float]]) -> None:
        for info in snapshot.devices:
            label = self._device_labels.get(info)
            if label is None:
                if len(self._device_labels) > len(snapshot.devices) * 4:
                    self._device_labels.clear()
                label = render_labels(
                    catalog.IB_INFO.labels,
                    (info.name, info.board_id or "", info.firmware_version or "", info.hca_type or ""),
                )
                self._device_labels[info] = label
            out.append((label, 1))

    def _port_labels(self, device: str, port: int) -> _PortLabels:
        labels = self._labels.get((device, port))
        if labels is None:
            labels = self._labels[(device, port)] = _PortLabels(device, str(port))
        return labels

    def _map_port(self, port: PortSnapshot, families: list[MetricFamily]) -> None:
        labels = self._port_labels(port.device.name, port.port)
        base = labels.base
        if port.state_id is not None:
            families[1].samples.append((base, port.state_id))
        if port.phys_state_id is not None:
            families[2].samples.append((base, port.phys_state_id))
        if port.rate_bytes_per_second is not None:
            families[3].samples.append((base, port.rate_bytes_per_second))
        families[4].samples.append((labels.info_label(port), 1))
        if port.link_width_lanes is not None:
            families[5].samples.append((base, port.link_width_lanes))
        self._map_counters(labels, port.counters, self._counter_plan, families)
        self._map_counters(labels, port.counters_ext, self._legacy_plan, families)
        hw_labels = labels.hw
        append = families[8].samples.append
        for name, value in port.hw_counters.items():
            label = hw_labels.get(name)
            if label is None:
                label = labels.hw_label(name)
            append((label, value))

    def _map_counters(
        self,
        labels: _PortLabels,
        values: dict[str, int],
        plan: dict[str, tuple[int, int]],
        families: list[MetricFamily],
    ) -> None:
        """Counters times their multiplier into their families; a 0/1 saturation flag for each 32-bit one."""
        base = labels.base
        saturated = families[9].samples.append
        for name, value in values.items():
            step = plan.get(name)
            if step is None:
                continue
            families[step[0]].samples.append((base, value * step[1]))
            if name in _SATURABLE:
                saturated((labels.saturated_label(name), 1 if value == SATURATED_32 else 0))

    def _map_mtus(
        self,
        verbs: VerbsMtuSource,
        snapshot: InfinibandSnapshot,
        families: list[MetricFamily],
    ) -> None:
        mtus = verbs.mtus()
        if not mtus:
            return
        for port in snapshot.ports:
            mtu = mtus.get((port.device.name, port.port))
            if mtu is None:
                continue
            base = self._port_labels(port.device.name, port.port).base
            if mtu.active_bytes is not None:
                families[6].samples.append((base, mtu.active_bytes))
            if mtu.max_bytes is not None:
                families[7].samples.append((base, mtu.max_bytes))
