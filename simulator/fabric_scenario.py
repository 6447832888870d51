"""The fabric scenario: two pools share an oversubscribed uplink; the high-priority all-reduce stalls.

In the simulated cluster (`scenarios.shared_uplink_spec`, one `chatty` job per pool) it measures the `hi`
job's iteration time alone, shared with the default weights, and shared after applying the quota policy's
recommended weights: the simulated cluster server runs in-process at real time, the embedded source scrapes
it, and each proposal's tables are applied with `model.set_vl_weights` until the policy has proposed
nothing for two cycles in a row.
Targets: `hi` within 10 % of its time alone; `lo` keeps at least the policy's minimum share of the link.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from proposals import targets
from recommender.policies.quota import QuotaParams, QuotaPolicy, QuotaState
from recommender.signals.embedded import EmbeddedSettings, EmbeddedSource
from simulator.cluster import scenarios
from simulator.cluster.model import ClusterModel
from simulator.serve.cluster_server import ClusterServer, ServerSettings
from simulator.serve.qos_reader import SimulatorQos

HIGH, LOW = "hi", "lo"
WARMUP_SECONDS = 10.0


@dataclass(frozen=True)
class ScenarioResult:
    """The figures the scenario reports."""

    alone_seconds: float
    shared_default_seconds: float
    shared_recommended_seconds: float
    low_share_default: float
    low_share_recommended: float
    min_share: float
    weights_default: str
    weights_recommended: str
    cycles: int
    proposals: list[str] = field(default_factory=list)

    @property
    def slowdown(self) -> float:
        """Recommended over alone."""
        return self.shared_recommended_seconds / self.alone_seconds

    def table(self) -> str:
        """The figures as a small table."""
        rows = [
            ("hi iteration alone", f"{self.alone_seconds * 1e3:.1f} ms", ""),
            (
                "hi iteration shared, default weights",
                f"{self.shared_default_seconds * 1e3:.1f} ms",
                f"x{self.shared_default_seconds / self.alone_seconds:.2f}; "
                f"lo share {self.low_share_default:.3f}",
            ),
            (
                "hi iteration shared, recommended weights",
                f"{self.shared_recommended_seconds * 1e3:.1f} ms",
                f"x{self.slowdown:.3f}; lo share {self.low_share_recommended:.3f} (min {self.min_share:.2f})",
            ),
        ]
        lines = [f"{a:<42} {b:>10}  {c}" for a, b, c in rows]
        lines.append(
            f"vlarb_low {self.weights_default} -> {self.weights_recommended} in {self.cycles} cycles"
        )
        lines += [f"  {p}" for p in self.proposals]
        return "\n".join(lines)


def _iteration(model: ClusterModel, pool: str) -> tuple[float, float]:
    job = model.job_metrics(pool)[0]
    return job.iteration_seconds, job.bottleneck_share


def _model(pools: tuple[str, ...]) -> ClusterModel:
    model = ClusterModel(scenarios.shared_uplink_spec(), [scenarios.chatty(p) for p in pools])
    model.advance(WARMUP_SECONDS)
    return model


def recommend_weights(
    model: ClusterModel,
    params: QuotaParams,
    window_seconds: float = 3.0,
    max_cycles: int = 8,
    quiet_cycles: int = 2,
) -> tuple[int, list[str]]:
    """Run cycles against `model` served in-process; apply every weight proposal until `quiet_cycles`
    cycles in a row propose none (one quiet cycle can be a noisy scrape window, as a live recommender
    would see at its next cycle); (cycles, proposals)."""
    applied: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ibpool-fabric-scenario-") as work:
        settings = ServerSettings(listen_address="127.0.0.1:0", speed=1.0, workdir=Path(work))
        server = ClusterServer(model, settings)
        server.start()
        try:
            base = f"http://127.0.0.1:{server.port}"
            source = EmbeddedSource(
                EmbeddedSettings(f"{base}/targets", window_seconds=window_seconds),
                SimulatorQos(f"{base}/-/model"),
            )
            policy, state = QuotaPolicy(params), QuotaState()
            quiet = 0
            for cycle in range(1, max_cycles + 1):
                decision = policy.propose(source.fetch(), state)
                state = decision.state
                weights = [p for p in decision.proposals if p.kind == "set_vl_weights"]
                quiet = 0 if weights else quiet + 1
                if quiet >= quiet_cycles:
                    return cycle, applied
                for proposal in weights:
                    tables = {c.target: c.after for c in proposal.changes}
                    qos = model.qos()
                    high = tables.get(targets.VLARB_HIGH, targets.format_vlarb(qos.vlarb_high))
                    low = tables.get(targets.VLARB_LOW, targets.format_vlarb(qos.vlarb_low))
                    server.runner.change(partial(_apply, high=high, low=low))
                    applied.append(f"{low}: {proposal.expected_effect}")
                source.reset()
            return max_cycles, applied
        finally:
            server.close()


def _apply(model: ClusterModel, high: str, low: str) -> str:
    model.set_vl_weights(high, low)
    return "applied"


def run(params: QuotaParams | None = None) -> ScenarioResult:
    """Measure the three cases."""
    params = params or QuotaParams(priorities={HIGH: 1}, persistence_seconds=0.0, cooldown_seconds=0.0)
    alone, _ = _iteration(_model((HIGH,)), HIGH)
    shared = _model((HIGH, LOW))
    default_hi, _ = _iteration(shared, HIGH)
    default_lo = _iteration(shared, LOW)[1]
    default_weights = targets.format_vlarb(shared.qos().vlarb_low)
    cycles, proposals = recommend_weights(shared, params)
    tuned_hi, _ = _iteration(shared, HIGH)
    tuned_lo = _iteration(shared, LOW)[1]
    return ScenarioResult(
        alone_seconds=alone,
        shared_default_seconds=default_hi,
        shared_recommended_seconds=tuned_hi,
        low_share_default=default_lo,
        low_share_recommended=tuned_lo,
        min_share=params.min_share,
        weights_default=default_weights,
        weights_recommended=targets.format_vlarb(shared.qos().vlarb_low),
        cycles=cycles,
        proposals=proposals,
    )


def main() -> int:
    """Print the scenario's figures."""
    print(run().table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
