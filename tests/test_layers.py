"""The layers (docs/architecture.md), enforced: a package imports only from the layers below it.

foundation < exporter, proposals, dashboards < recommender, scheduler_hooks, postmortem < simulator
< demo, benchmarks < ibpool (the command). Packages of one layer do not import each other; tests may
import anything. Lazy imports inside functions count the same as top-level ones.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"foundation"}),
    frozenset({"exporter", "proposals", "dashboards"}),
    frozenset({"recommender", "scheduler_hooks", "postmortem"}),
    frozenset({"simulator"}),
    frozenset({"demo", "benchmarks"}),
    frozenset({"ibpool"}),
    frozenset({"tests"}),
)
RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}


def imported_packages(source: str) -> Iterator[tuple[int, str]]:
    """(line, top-level package) of every absolute import in `source`, nested ones included."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def violations(root: Path) -> list[str]:
    """Every import under `root` that goes sideways or up the layers, as `path:line: a -> b`."""
    found: list[str] = []
    for package, rank in RANK.items():
        if package == "tests":
            continue
        for path in sorted((root / package).rglob("*.py")):
            for line, target in imported_packages(path.read_text()):
                target_rank = RANK.get(target)
                if target_rank is None or target == package:
                    continue
                if target_rank >= rank:
                    found.append(f"{path.relative_to(root)}:{line}: {package} -> {target}")
    return found


def test_every_import_follows_the_layers() -> None:
    assert violations(REPO) == []


def test_every_package_has_a_layer() -> None:
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")}
    assert packages <= set(RANK), packages - set(RANK)


def test_a_wrong_way_import_is_caught(tmp_path: Path) -> None:
    for package in ("exporter", "simulator", "foundation", "recommender", "benchmarks"):
        (tmp_path / package).mkdir()
    (tmp_path / "exporter" / "wiring.py").write_text(
        "from foundation.settings import Option\n\ndef f():\n    from simulator.node import SimulatedNode\n"
    )
    (tmp_path / "foundation" / "logs.py").write_text("import exporter.catalog\n")
    (tmp_path / "recommender" / "cli.py").write_text("from scheduler_hooks.apply import cli\n")
    (tmp_path / "benchmarks" / "x.py").write_text("from tests.helpers import TRACE\nfrom . import y\n")
    assert violations(tmp_path) == [
        "foundation/logs.py:1: foundation -> exporter",
        "exporter/wiring.py:4: exporter -> simulator",
        "recommender/cli.py:1: recommender -> scheduler_hooks",
        "benchmarks/x.py:1: benchmarks -> tests",
    ]
