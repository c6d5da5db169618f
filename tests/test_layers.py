"""The floors of the tree: each top-level package imports only those below it.

From the bottom:
- harness: process control (the sandbox, the daemons, the control channel,
  waiting, records, the runtime root); nothing about packets;
- evidence: packet evidence (pcap files, the field-by-field frame diff,
  tshark's second opinion);
- datapath: the ports (backends), the model (our oracle), the known-bug
  layer above it (deviations), and the one verdict path;
- fixtures: the pytest glue: suite-wide plugins, the case records, and each
  upstream file's helpers;
- perf: throughput measurement on top of the fixtures;
- cases: the test modules;
- reports: the record of a run rendered (it reads what the floors below wrote);
- tooling, export, bench: ./ovstest's modes, the upstream exports and the
  benchmarks, which may use everything.
A package imports its own modules freely; tests/ (the framework's own unit
tests) may import anything.  Then, within datapath: the model, the catalogue
and the deviations (issue 18)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOORS = [{"harness"}, {"evidence"}, {"datapath"}, {"fixtures"}, {"perf"}, {"cases"},
          {"reports"}, {"tooling", "export", "bench"}]
FLOOR = {pkg: n for n, pkgs in enumerate(FLOORS) for pkg in pkgs}
# Imports that still point up a floor, (module, package): the set only shrinks.
UPWARD: set[tuple[str, str]] = set()


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in a module, at the
    top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module.split(".")[0]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[0]) for a in node.names]
    return sorted(found)


def upward() -> dict[tuple[str, str], list[str]]:
    """(module, imported package) -> where, for each import that points up."""
    hits: dict[tuple[str, str], list[str]] = {}
    for pkg, floor in FLOOR.items():
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for line, top in imports(path):
                if top in FLOOR and FLOOR[top] > floor:
                    hits.setdefault((rel, top), []).append(f"{rel}:{line} imports {top}")
    return hits


def test_every_package_is_on_a_floor() -> None:
    """Every top-level folder of Python modules (but the unit tests and the
    build output) has its floor."""
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert folders - {"tests", "build"} == set(FLOOR)


def test_imports_point_down() -> None:
    hits = upward()
    new = [w for key, where in hits.items() if key not in UPWARD for w in where]
    assert not new, "imports that point up a floor:\n" + "\n".join(new)
    assert not UPWARD - set(hits), f"no longer point up: {sorted(UPWARD - set(hits))}"


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import os\ndef f():\n    from reports.plugin import record_for\n")
    assert imports(probe) == [(1, "os"), (3, "reports")]


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


# -- cases/ and fixtures/ by upstream suite (issue 27) --------------------------

# cases/ folder -> the upstream files its modules reproduce (each module's docstring names one)
SUITES: dict[str, set[str]] = {
    "dpif_netdev": {"dpif-netdev.at"},
    "pmd": {"pmd.at"},
    "alb": {"alb.at"},
    "dpctl": {"dpctl.at"},
    "drop_stats": {"drop-stats.at"},
    "tunnel_push_pop": {"tunnel-push-pop.at", "tunnel-push-pop-ipv6.at"},
    "system_userspace": set(),  # the files of check-system-userspace (harness/system_userspace.py)
    "system_dpdk": {"system-dpdk.at"},
    "system_afxdp": {"system-afxdp.at"},
}
OURS = {"matrices", "exploration", "real_ports", "throughput"}


def _suites() -> dict[str, set[str]]:
    from harness.system_userspace import SYSTEM_USERSPACE
    # system_userspace/ holds the tap-port suites built from system-traffic.at:
    # check-system-userspace's files, and check-system-tso's own system-tap.at.
    return {**SUITES, "system_userspace": set(SYSTEM_USERSPACE) | {"system-tap.at"}}


def test_every_case_module_is_in_a_suite_folder() -> None:
    """cases/ holds folders only: one per upstream suite, whose modules name
    one of its files, and ours beside them; no module sits loose or deeper."""
    cases = ROOT / "cases"
    loose = sorted(p.name for p in cases.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"case modules outside a suite folder: {loose}"
    suites = _suites()
    misplaced = []
    for path in sorted(cases.rglob("*.py")):
        parts = path.relative_to(cases).parts
        if len(parts) == 1:
            continue
        if len(parts) != 2 or parts[0] not in set(suites) | OURS:
            misplaced.append(str(path.relative_to(ROOT)))
        elif parts[0] in suites and path.name != "__init__.py":
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            if not any(name in doc for name in suites[parts[0]]):
                misplaced.append(f"{path.relative_to(ROOT)}: its docstring names none of "
                                 f"{sorted(suites[parts[0]])}")
    assert not misplaced, misplaced
    assert all((cases / d / "__init__.py").is_file() for d in set(suites) | OURS if (cases / d).is_dir())


def test_fixtures_subpackages_are_suites() -> None:
    """fixtures/ itself is the suite-wide glue; a subpackage holds one upstream
    suite's helpers and has that suite's cases/ folder name."""
    subs = {p.name for p in (ROOT / "fixtures").iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert subs <= set(SUITES), sorted(subs - set(SUITES))
    assert all((ROOT / "fixtures" / s / "__init__.py").is_file() for s in subs)
