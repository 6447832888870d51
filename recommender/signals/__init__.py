"""Signals: one typed snapshot of the cluster, from Prometheus (PromQL) or an embedded scrape."""

from recommender.signals.model import (
    LINKS,
    NODES,
    POOLS,
    QOS,
    LinkSignals,
    Missing,
    NodeSignals,
    PoolSignals,
    QosSignals,
    Signals,
)
from recommender.signals.source import SignalsError, SignalSource

__all__ = [
    "LINKS",
    "NODES",
    "POOLS",
    "QOS",
    "LinkSignals",
    "Missing",
    "NodeSignals",
    "PoolSignals",
    "QosSignals",
    "SignalSource",
    "Signals",
    "SignalsError",
]
