"""The layers stay layered: harness imports nothing of the project above it,
datapath nothing of fixtures, cases, reports or perf (README, module table)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ABOVE = {"harness": {"datapath", "fixtures", "cases", "reports", "perf", "export", "bench"},
         "datapath": {"fixtures", "cases", "reports", "perf", "export", "bench"}}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files
    wrong = {f"{path.relative_to(ROOT)}: {', '.join(sorted(imported(path) & ABOVE[layer]))}"
             for path in files if imported(path) & ABOVE[layer]}
    assert not wrong, sorted(wrong)
