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


# -- the model, the bug catalogue and the deviations (issue 18) ----------------

MODEL = ROOT / "datapath" / "model"
CATALOGUE = MODEL / "bugs.py"


def _targets(path: Path) -> set[str]:
    """Every module `path` imports, fully named (`from a import b` gives a and a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_bug_catalogue_imports_nothing() -> None:
    """Pure data: not even the standard library (the launcher reads it by path)."""
    tree = ast.parse(CATALOGUE.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_the_model_imports_neither_the_catalogue_nor_the_deviations() -> None:
    """The correct expectation is computed with none of OVS's bugs in view."""
    wrong = {f"{path.relative_to(ROOT)}: {name}"
             for path in sorted(MODEL.rglob("*.py")) if path != CATALOGUE
             for name in _targets(path)
             if name == "datapath.model.bugs" or name.startswith("datapath.deviations")}
    assert not wrong, sorted(wrong)


def test_the_deviations_stand_on_the_model_and_the_catalogue() -> None:
    files = sorted((ROOT / "datapath" / "deviations").rglob("*.py"))
    names = set().union(*(_targets(path) for path in files))
    assert "datapath.model.bugs" in names and any(n.startswith("datapath.model.") for n in names)


def test_without_the_deviations_the_model_names_no_bug_and_its_frames_stay() -> None:
    """The same correct frames with or without OVS's deviations in view; only
    with them does an expectation name a bug and say what OVS sends."""
    from datapath import model
    from datapath.deviations.observer import OvsObserver
    from datapath.model import hooks
    from datapath.model.actions import output
    from datapath.model.bugs import GRE_CSUM_AT_PUSH, GSO_CWR_EVERY_SEGMENT
    from datapath.offloads import CsumState, RxFlags, TxOffloads
    from fixtures.frames import compose, with_l4_csum
    from fixtures.tunnel import INNERS, model_actions, spec
    frame = with_l4_csum(compose("tcp", 4), 0xDEAD)
    gre = model_actions(INNERS["tcp4"], spec("gre", 4, True))
    cwr = bytearray(compose("tcp", 4, payload=bytes(3000)))
    cwr[14 + 20 + 13] |= 0x80
    runs = [(frame, gre, RxFlags.parse("l4=good"), GRE_CSUM_AT_PUSH),
            (bytes(cwr), [output("p2")], RxFlags(l4=CsumState.PARTIAL, tso_segsz=1000),
             GSO_CWR_EVERY_SEGMENT)]
    for data, actions, rx, bug in runs:
        with hooks.observing(hooks.Observer()):
            alone = model.forward(data, actions, TxOffloads(), rx)
        with hooks.observing(OvsObserver()):
            ovs = model.forward(data, actions, TxOffloads(), rx)
        assert alone.frames == ovs.frames and alone.csum_state == ovs.csum_state
        assert not alone.bugs and not alone.deviates
        assert bug in ovs.bugs and ovs.deviates
