"""The labels a scrape would add, added by the push too: one schema for a metric in the long-term store.

Prometheus stores a scraped sample with the exporter's labels plus its target labels (`job`, `instance`,
and the discovery's `node`, `cluster`, ...); a scraped label of the same name as a target label becomes
`exported_<name>` (scrape configs without `honor_labels`, as ibpool ships them). The push writes the same
series: `--influx.labels job=ibpool-node,instance=node0001,node=node0001,cluster=gpu-a`, applied with the
same renaming (`apply`), so a pushed point and a forwarded sample of one metric are one series.

Defaults (`with_defaults`): `job=ibpool-node` (the shipped scrape configs' job) and `instance` and `node`
the short host name (what `ibpool targets` gives a Slurm node); a given key overrides its default, `key=`
(empty) leaves it out. `pool` is no default: it changes when a node moves, and the shipped remote write
keeps it off node series (deploy/prometheus/prometheus.yml).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence

Labels = tuple[tuple[str, str], ...]

NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
DEFAULT_JOB = "ibpool-node"


def parse(text: str) -> tuple[Labels, list[str]]:
    """`k=v,k=v` -> (labels in the given order, problems); `k=` keeps the key with an empty value."""
    labels: list[tuple[str, str]] = []
    problems: list[str] = []
    seen: set[str] = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            problems.append(f"{item!r} is not name=value")
        elif not NAME.fullmatch(key) or key.startswith("__"):
            problems.append(f"{key!r} is not a label name (letters, digits, _; no leading __)")
        elif key in seen:
            problems.append(f"{key!r} given twice")
        else:
            seen.add(key)
            labels.append((key, value.strip()))
    return tuple(labels), problems


def short_hostname() -> str:
    """This host's name up to the first dot."""
    return socket.gethostname().split(".", 1)[0]


def with_defaults(given: Labels, host: str) -> Labels:
    """`given` over the defaults (job, instance, node), sorted, empty values left out."""
    merged = {"job": DEFAULT_JOB, "instance": host, "node": host}
    merged.update(dict(given))
    return tuple(sorted((k, v) for k, v in merged.items() if v))


def apply(own: Sequence[tuple[str, str]], target: Labels) -> list[tuple[str, str]]:
    """A series' own labels with the target labels added; a clashing own label becomes `exported_<name>`
    (again prefixed while that name is taken too), as a scrape without `honor_labels` does."""
    if not target:
        return list(own)
    out = dict(own)
    for key, _ in target:
        if key in out:
            value = out.pop(key)
            renamed = f"exported_{key}"
            while renamed in out or renamed in dict(target):
                renamed = f"exported_{renamed}"
            out[renamed] = value
    out.update((k, v) for k, v in target if v)
    return list(out.items())
