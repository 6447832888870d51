"""The quota policy backtested on a family of fabric scenarios, judged by a ground truth it does not model.

```python
from simulator.quota_backtest import backtest, family, table
print(table(backtest(family(60))))          # python -m simulator.quota_backtest; benchmarks/quota_backtest.py
```

`scenarios` draws the seeded sets, `counters` gives the policy only what Prometheus would show, `backtest`
runs static weights, the policy and the best fixed weights in hindsight, `report` makes the table. The sets,
the ground truth, the method and the figures: docs/quota_backtest.md ("The scenarios", "The ground truth").
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
