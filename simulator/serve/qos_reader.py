"""The recommender's QoS reader for the simulated cluster: its `/-/model` JSON (the tables and every
pool's SL), in place of OpenSM's config file."""

from __future__ import annotations

import json

from recommender.signals.fetch import http_get
from recommender.signals.model import QosSignals
from recommender.signals.qos import QosError


class SimulatorQos:
    """The simulated cluster server's `/-/model` JSON (QoS tables and every pool's SL)."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout

    def read(self) -> QosSignals:
        """GET the model summary."""
        try:
            body = json.loads(http_get(self.url, self.timeout))
            qos = body["qos"]
            pool_sl = {name: int(p["service_level"]) for name, p in body["pools"].items()}
            sl2vl = tuple(int(v) for v in str(qos["sl2vl"]).split(",") if v)
            return QosSignals(str(qos["vlarb_high"]), str(qos["vlarb_low"]), sl2vl, pool_sl, 0.0)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise QosError(f"{self.url}: {exc}") from None
