"""Replaying the shipped alert rules over recorded series with a real rule engine (vmalert).

```python
rules = RuleSet.load([Path("alerts")])                       # the rule files as they ship
result = replay_lines(series_jsonl_gz, rules, start, end)    # scratch VictoriaMetrics + vmalert -replay
for f in result.firings: f.name, f.severity, f.labels, f.start, f.end, f.duration()
```

`rules` reads and orders the rule files, `store` runs a private VictoriaMetrics, `vmalert` runs the replay
level by level and reads the firing runs back from `ALERTS`, `source` copies the rules' raw metrics from any
store a report reads (PromQL or InfluxDB 2) so a window of a live system, months old, can be replayed
too. No alert condition is evaluated in Python: every firing comes from vmalert. Without
`victoria-metrics` or `vmalert` installed, `ReplayUnavailableError` says so (Debian package
victoria-metrics); callers report that plainly and carry on without alerts.
"""

from postmortem.replay.errors import ReplayError, ReplayUnavailableError
from postmortem.replay.rules import Rule, RuleSet
from postmortem.replay.store import ScratchStore, gzip_lines
from postmortem.replay.vmalert import Firing, ReplayResult, replay, replay_lines

__all__ = [
    "Firing",
    "ReplayError",
    "ReplayResult",
    "ReplayUnavailableError",
    "Rule",
    "RuleSet",
    "ScratchStore",
    "gzip_lines",
    "replay",
    "replay_lines",
]
