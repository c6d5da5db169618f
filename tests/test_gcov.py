"""./ovstest coverage without OVS: a patch's changed lines, the side-by-side
table, the id groups of --patch, and the pages, on synthetic gcovr JSON."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from tooling import gcov_pages
from tooling.gcovrun import datapath_files, gcda_matches, upstream_numbers
from tooling.idgroups import Group, modules, next_group, part_label, split
from tooling.idselect import keep_listed
from tooling.patchlines import parse_diff, reached, read_patch, states

pytest_plugins = ["pytester"]

PATCH = """From 1234 Mon Sep 17 00:00:00 2001
Subject: [PATCH] dpif-netdev: something

---
 lib/dpif-netdev.c | 5 +++--
diff --git a/lib/dpif-netdev.c b/lib/dpif-netdev.c
index 1111111..2222222 100644
--- a/lib/dpif-netdev.c
+++ b/lib/dpif-netdev.c
@@ -10,4 +10,5 @@ static int f(void)
 a;
-b;
+B;
+C;
 d;
 e;
@@ -30,3 +31,2 @@ static int g(void)
 x;
--- a removed line that looks like a header
 y;
diff --git a/lib/new.c b/lib/new.c
new file mode 100644
--- /dev/null
+++ b/lib/new.c
@@ -0,0 +1,2 @@
+int n;
+int m;
diff --git a/lib/gone.c b/lib/gone.c
deleted file mode 100644
--- a/lib/gone.c
+++ /dev/null
@@ -1,2 +0,0 @@
-int gone;
-int gone2;
diff --git a/lib/tail.c b/lib/tail.c
--- a/lib/tail.c
+++ b/lib/tail.c
@@ -7,2 +6,0 @@
-int p;
-int q;
-- \n2.39.0
"""


def test_patch_lines_are_the_new_sides_added_and_after_deletion_lines() -> None:
    changes = parse_diff(PATCH)
    assert sorted(changes) == ["lib/dpif-netdev.c", "lib/new.c", "lib/tail.c"]
    dp = changes["lib/dpif-netdev.c"]
    assert sorted(dp.added) == [11, 12]
    assert sorted(dp.after_deletion) == [32]  # the removed "-- ..." line sat before "y;"
    assert changes["lib/new.c"].lines == [1, 2]
    assert changes["lib/tail.c"].lines == [7]  # a pure removal: the line that follows it


def test_git_diff_with_zero_context() -> None:
    text = ("diff --git a/lib/flow.c b/lib/flow.c\n--- a/lib/flow.c\n+++ b/lib/flow.c\n"
            "@@ -5 +5 @@ f\n-x\n+y\n@@ -9,0 +10,2 @@\n+p\n+q\n")
    assert parse_diff(text)["lib/flow.c"].lines == [5, 10, 11]


def test_read_patch_refuses_what_is_neither_a_file_nor_a_range(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="neither a file nor a REV..REV"):
        read_patch("no-such.patch", tmp_path, tmp_path)
    (tmp_path / "p.diff").write_text(PATCH)
    assert read_patch("p.diff", tmp_path, tmp_path) == (PATCH, str(tmp_path / "p.diff"))


def report(files: dict[str, dict[int, int]], functions: dict[str, list[tuple[str, int, int]]]
           | None = None, names: dict[str, dict[int, str]] | None = None,
           branches: dict[str, dict[int, list[int]]] | None = None) -> dict[str, Any]:
    """A gcovr JSON report: {file: {line: count}}, functions (name, lineno, calls)."""
    out = []
    for path, lines in files.items():
        rows = []
        for n, count in sorted(lines.items()):
            row: dict[str, Any] = {"line_number": n, "count": count, "gcovr/noncode": False,
                                   "branches": [{"count": c, "fallthrough": False,
                                                 "throw": False}
                                                for c in (branches or {}).get(path, {}).get(n, [])]}
            name = (names or {}).get(path, {}).get(n)
            if name:
                row["function_name"] = name
            rows.append(row)
        rows.append({"line_number": 999, "count": 0, "gcovr/noncode": True, "branches": []})
        out.append({"file": path, "lines": rows, "functions": [
            {"name": name, "lineno": first, "execution_count": calls}
            for name, first, calls in (functions or {}).get(path, [])]})
    return {"gcovr/format_version": "0.11", "files": out}


def test_changed_lines_against_a_report() -> None:
    changes = parse_diff(PATCH)
    rep = report({"lib/dpif-netdev.c": {11: 3, 12: 0, 32: 1}, "lib/new.c": {1: 0}})
    got = {(s.path, s.line): (s.code, s.reached) for s in states(changes, rep)}
    assert got == {("lib/dpif-netdev.c", 11): (True, True),
                   ("lib/dpif-netdev.c", 12): (True, False),
                   ("lib/dpif-netdev.c", 32): (True, True),
                   ("lib/new.c", 1): (True, False), ("lib/new.c", 2): (False, False),
                   ("lib/tail.c", 7): (False, False)}
    assert reached(changes, rep) == {("lib/dpif-netdev.c", 11), ("lib/dpif-netdev.c", 32)}


OURS = report({"lib/a.c": {1: 1, 2: 1, 3: 0, 10: 5, 11: 0},
               "lib/b.c": {1: 0, 2: 0}},
              functions={"lib/a.c": [("f", 1, 1), ("g", 10, 5)], "lib/b.c": [("h", 1, 0)]},
              names={"lib/a.c": {1: "f", 2: "f", 3: "f", 10: "g", 11: "g"}},
              branches={"lib/a.c": {2: [1, 0]}})
UPSTREAM = report({"lib/a.c": {1: 2, 2: 0, 3: 4, 10: 0, 11: 0},
                   "lib/b.c": {1: 1, 2: 1}},
                  functions={"lib/a.c": [("f", 1, 2), ("g", 10, 0)], "lib/b.c": [("h", 1, 1)]},
                  names={"lib/a.c": {1: "f", 2: "f", 3: "f", 10: "g", 11: "g"}},
                  branches={"lib/a.c": {2: [1, 1]}})


def test_side_by_side_per_file_and_function() -> None:
    rows = {r.path: r for r in gcov_pages.side_by_side(OURS, UPSTREAM, ["lib/a.c", "lib/b.c",
                                                                  "lib/c.c"])}
    a = rows["lib/a.c"]
    assert (a.lines, a.ours.covered, a.upstream.covered) == (5, 3, 2)
    assert (a.ours.percent, a.upstream.percent) == (60.0, 40.0)
    assert a.ours_only == [2, 10] and a.upstream_only == [3]
    assert (a.ours_functions.covered, a.upstream_functions.covered) == (2, 1)
    assert (a.ours_branches.covered, a.ours_branches.total) == (1, 2)
    assert (a.upstream_branches.covered, a.upstream_branches.total) == (2, 2)
    assert a.verdict == "ours >= upstream"
    f = {fn.name: fn for fn in a.functions}
    assert (f["f"].lines, f["f"].ours, f["f"].upstream) == (3, 2, 2)
    assert (f["f"].ours_only, f["f"].upstream_only) == ([2], [3])
    assert (f["g"].ours_only, f["g"].upstream_only, f["g"].ours_calls) == ([10], [], 5)
    assert a.functions[0].name == "f"  # where upstream is ahead comes first
    b = rows["lib/b.c"]
    assert (b.ours.covered, b.upstream.covered, b.verdict) == (0, 2, "upstream ahead")
    assert b.upstream_only == [1, 2]
    assert not rows["lib/c.c"].built and rows["lib/c.c"].verdict == "not built"


def test_a_file_only_one_side_ran_counts_as_zero_on_the_other() -> None:
    ours = report({"lib/d.c": {1: 1, 2: 0}}, functions={"lib/d.c": [("d", 1, 1)]})
    row = gcov_pages.side_by_side(ours, report({}), ["lib/d.c"])[0]
    assert row.built and (row.ours.covered, row.upstream.covered, row.lines) == (1, 0, 2)
    assert row.upstream_only == [] and row.ours_only == [1]


def test_lines_without_function_names_go_to_the_function_before_them() -> None:
    rep = report({"lib/e.c": {2: 1, 3: 1, 8: 0}}, functions={"lib/e.c": [("e1", 1, 1),
                                                                         ("e2", 7, 0)]})
    row = gcov_pages.side_by_side(rep, rep, ["lib/e.c"])[0]
    assert {f.name: f.lines for f in row.functions} == {"e1": 2, "e2": 1}


def test_ranges() -> None:
    assert gcov_pages.ranges([3, 4, 5, 9, 11, 12]) == "3-5, 9, 11-12"
    assert gcov_pages.ranges([]) == ""


def test_group_splitting_goes_module_function_halves_ids() -> None:
    ids = ["cases/test_a.py::test_x[1]", "cases/test_a.py::test_x[2]",
           "cases/test_a.py::test_x[3]", "cases/test_a.py::test_y", "cases/test_b.py::test_z"]
    mods = modules(ids)
    assert [(g.label, len(g.nodeids)) for g in mods] == [("cases/test_a.py", 4),
                                                          ("cases/test_b.py", 1)]
    functions = split(mods[0], 0)
    assert [(g.label, g.level, g.parent) for g in functions] == [
        ("cases/test_a.py::test_x", "function", 0), ("cases/test_a.py::test_y", "function", 0)]
    halves = split(functions[0], 1)
    assert [(g.level, g.label, g.nodeids) for g in halves] == [
        ("part", "cases/test_a.py::test_x[1 .. 2] (2 ids)", ids[:2]), ("id", ids[2], [ids[2]])]
    assert [g.nodeids for g in split(halves[0], 2)] == [[ids[0]], [ids[1]]]
    assert split(Group("one", "id", [ids[4]]), 5) == []


def test_part_labels() -> None:
    assert part_label(["m.py::t[a]", "m.py::t[b]", "m.py::t[c]"]) == "m.py::t[a .. c] (3 ids)"
    assert part_label(["m.py::t[a]", "m.py::u"]) == "m.py::t[a] .. u (2 ids)"


def test_next_group_pins_each_reached_line_to_an_id_first() -> None:
    a, b = ("lib/a.c", 1), ("lib/b.c", 2)
    groups = [Group("m", "module", ["1", "2", "3", "4"], reached=[a, b]),
              Group("h1", "part", ["1", "2"], 0, reached=[a]),
              Group("h2", "part", ["3", "4"], 0, reached=[a, b])]
    queue = [Group("3", "id", ["3"], 2), Group("1", "id", ["1"], 1),
             Group("x", "part", ["5", "6", "7"], None)]
    # b has no id yet: only children of h2 (which reached b) help it
    assert next_group(queue, groups, {a, b}, {a}).label == "3"
    # every line pinned: the largest group left, for more ids
    assert next_group(queue, groups, {a, b}, {a, b}).label == "x"


def test_finest_groups_name_the_narrowest_run_that_reached_a_line() -> None:
    key = ["lib/a.c", 5]
    groups = [
        {"label": "m", "level": "module", "nodeids": ["i1", "i2", "i3"], "parent": None,
         "reached": [key, ["lib/a.c", 6]]},
        {"label": "f1", "level": "function", "nodeids": ["i1", "i2"], "parent": 0,
         "reached": [key]},
        {"label": "f2", "level": "function", "nodeids": ["i3"], "parent": 0,
         "reached": [key]},
        {"label": "i1", "level": "id", "nodeids": ["i1"], "parent": 1, "reached": []},
        {"label": "i2", "level": "id", "nodeids": ["i2"], "parent": 1, "reached": [key]},
    ]
    assert gcov_pages.finest(groups, ("lib/a.c", 5)) == [2, 4]
    assert gcov_pages.finest(groups, ("lib/a.c", 6)) == [0]  # no child run reached it
    assert gcov_pages.finest(groups, ("lib/a.c", 7)) == []


def test_upstream_numbers_from_the_testsuite_listing() -> None:
    listing = """openvswitch 4.0.0 test suite: tests.

 NUM: FILE-NAME:LINE     TEST-GROUP-NAME
      KEYWORDS

1077: dpif-netdev.at:91  dpif-netdev - netdev-dummy/receive
      dpif-netdev
1078: dpif-netdev.at:119 dpif-netdev - dummy interface
      dpif-netdev
 900: ofproto-dpif.at:3  ofproto-dpif - dump flows
1200: pmd.at:88  PMD - creating a thread/add-port
"""
    got = upstream_numbers(listing)
    assert got["dpif-netdev.at"] == [(1077, "dpif-netdev - netdev-dummy/receive"),
                                     (1078, "dpif-netdev - dummy interface")]
    assert got["pmd.at"] == [(1200, "PMD - creating a thread/add-port")]
    assert got["tunnel-push-pop.at"] == [] and "ofproto-dpif.at" not in got


def test_gcda_files_of_the_sources() -> None:
    srcs = ["lib/netdev.c", "lib/dpif-netdev-lookup-avx512-gather.c"]
    assert gcda_matches("netdev", srcs)
    assert gcda_matches("libopenvswitchavx512_la-dpif-netdev-lookup-avx512-gather", srcs)
    assert not gcda_matches("dpif-netdev", srcs)
    assert not gcda_matches("netdev-linux", srcs)
    assert gcda_matches("anything", ["lib/packets.h"])  # a header: every object


def test_datapath_files_globs(tmp_path: Path) -> None:
    for name in ("dpif-netdev.c", "dpif-netdev-private.h", "dpif-netdev-perf.c", "tnl-ports.c",
                 "netdev.c", "netdev-vport.c", "flow.c"):
        (tmp_path / "lib").mkdir(exist_ok=True)
        (tmp_path / "lib" / name).write_text("")
    assert datapath_files(tmp_path) == ["lib/dpif-netdev-perf.c", "lib/dpif-netdev.c",
                                        "lib/flow.c", "lib/netdev.c", "lib/tnl-ports.c"]


def test_keep_listed() -> None:
    assert keep_listed(["a", "b", "c"], {"c", "a", "z"}) == ([0, 2], [1])


def test_idselect_plugin_runs_only_the_listed_ids(pytester: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_sel="import pytest\n\n@pytest.mark.parametrize('n', [1, 2, 3])\n"
                                 "def test_n(n):\n    pass\n")
    (pytester.path / "ids.txt").write_text("test_sel.py::test_n[2]\n")
    monkeypatch.setenv("OVSTEST_IDS", str(pytester.path / "ids.txt"))
    monkeypatch.setenv("OVSTEST_IDS_OUT", str(pytester.path / "out.txt"))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test may run in a worker
    result = pytester.runpytest("-p", "tooling.idselect", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=2)
    assert (pytester.path / "out.txt").read_text() == "test_sel.py::test_n[2]\n"


def test_pages_and_json_from_an_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "upstream").mkdir()
    (tmp_path / "coverage.json").write_text(json.dumps(OURS))
    (tmp_path / "upstream" / "coverage.json").write_text(json.dumps(UPSTREAM))
    (tmp_path / "coverage.html").write_text(  # as gcovr 8 writes its index
        '<a class="" title="a.c" href="coverage.a.c.0123.html">a.c</a>\n'
        '<a href="coverage.functions.html">List of functions</a>')
    (tmp_path / "run.json").write_text(json.dumps(
        {"rc": 0, "seconds": 1.0, "build": "b", "pytest": ["-m", "pytest"],
         "files": ["lib/a.c", "lib/b.c"]}))
    (tmp_path / "upstream" / "run.json").write_text(json.dumps(
        {"rc": 0, "seconds": 2.0, "verdict": ["All 2 tests were successful."],
         "numbers": [1, 2]}))
    changes = {"lib/a.c": {"added": [2, 3], "after_deletion": [50]}}
    (tmp_path / "patch-runs.json").write_text(json.dumps(
        {"patch": "p.diff", "budget": 4, "changes": changes, "main_reached": [["lib/a.c", 2]],
         "groups": [{"label": "cases/test_a.py::test_q[1]", "level": "id",
                     "nodeids": ["cases/test_a.py::test_q[1]"], "parent": None,
                     "reached": [["lib/a.c", 2]], "rc": 0, "seconds": 1.0}]}))
    assert gcov_pages.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "lib/b.c" in out and "1 changed lines not reached" in out
    data = json.loads((tmp_path / "coverage-compare.json").read_text())
    assert [(f["path"], f["ours_percent"], f["upstream_percent"], f["verdict"])
            for f in data["files"]] == [("lib/a.c", 60.0, 40.0, "ours >= upstream"),
                                        ("lib/b.c", 0.0, 100.0, "upstream ahead")]
    page = (tmp_path / "coverage-compare.html").read_text()
    assert 'href="coverage.a.c.0123.html"' in page and "upstream ahead" in page
    patch = json.loads((tmp_path / "patch.json").read_text())
    assert [(ln["line"], ln["state"], [g["label"] for g in ln["groups"]])
            for ln in patch["lines"]] == [(2, "reached", ["cases/test_a.py::test_q[1]"]),
                                          (3, "not reached", []), (50, "not code", [])]
    page = html.unescape((tmp_path / "patch.html").read_text())
    assert "./ovstest suite 'cases/test_a.py::test_q[1]'" in page
