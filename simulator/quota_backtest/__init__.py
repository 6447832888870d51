"""The quota policy backtested on a family of fabric scenarios, judged by a ground truth it does not model.

```python
from simulator.quota_backtest import backtest, family, table
print(table(backtest(family(60))))          # python -m simulator.quota_backtest; benchmarks/quota_backtest.py
```

`scenarios` draws the family (seeded; even indices the development set, odd the first held-out set, a
second seed the fresh held-out set, a third seed the third held-out set, twenty more seeds extra
development scenarios),
`counters` gives the policy only what Prometheus would show (port and per-VL counters, pools, GPU
utilization, the QoS tables), `backtest` replays a scenario with static weights, with the policy and with
the best fixed weights in hindsight, `report` makes the table. The model shares links with the same
weighted max-min the policy predicts with (`foundation.maxmin`), plus what a real fabric adds
(`simulator.cluster.effects`: packet-granular arbitration, credit stalls, head-of-line blocking).
docs/quota_backtest.md has the method and the figures.
"""

from simulator.quota_backtest.backtest import HINDSIGHT, POLICY, STATIC, Outcome, hindsight, run
from simulator.quota_backtest.report import Row, backtest, summary, table
from simulator.quota_backtest.scenarios import QuotaScenario, family, fresh, fresh2, pick, scenario

__all__ = [
    "HINDSIGHT",
    "POLICY",
    "STATIC",
    "Outcome",
    "QuotaScenario",
    "Row",
    "backtest",
    "family",
    "fresh",
    "fresh2",
    "hindsight",
    "pick",
    "run",
    "scenario",
    "summary",
    "table",
]
