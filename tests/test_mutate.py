"""./ovstest mutate without OVS: which lines are worth mutants, mutants read back
from universalmutator's files, dedup by object code, sampling, reach, the report,
and the one-line refusals of bad input."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.runtime import LaunchError
from tooling import cli, mutate
from tooling.mutate import Mutant

ORIGINAL = "int f(int a)\n{\n    int b = a + 1;\n\x0c\n    return b;\n}\n"


def test_lines_not_worth_a_reviewers_time() -> None:
    for text in ("", "   ", "    /* a comment */", "// note", " * more of a comment",
                 '    VLOG_WARN("x %d", y);', "    VLOG_DBG_RL(&rl, \"x\");",
                 "    ovs_assert(n < 3);"):
        assert not mutate.worth_mutating(text), text
    for text in ("    n_batches = 0;", "    if (!ovs_assert_ok) {", "    vlog_x(1);",
                 "    return b; /* done */"):
        assert mutate.worth_mutating(text), text


def test_lines_split_at_newlines_only() -> None:
    # OVS's sources have form feeds between sections: str.splitlines would shift lines.
    assert mutate.source_lines(ORIGINAL)[4] == "    return b;\n"
    assert mutate.source_lines("a\nb") == ["a\n", "b"]


def test_mutants_read_back_one_line_each_and_deduplicated() -> None:
    one = ORIGINAL.replace("a + 1", "a - 1")
    two = ORIGINAL.replace("a + 1", "a - 1").replace("return b", "return 0")
    found = mutate.mutants_of(ORIGINAL, [one, one, two, "short\n"], "lib/x.c")
    assert [(m.line, m.mutated) for m in found] == [(3, "    int b = a - 1;\n")]
    assert found[0].diff == "-    int b = a + 1;\n+    int b = a - 1;"


def test_lines_of_functions() -> None:
    source = "static int\nf(int a)\n{\n    x;\n    y;\n}\n\nvoid\ng(void)\n{\n    z;\n}\n"
    assert mutate.lines_of_functions(source, ["f"]) == {4, 5}
    assert mutate.lines_of_functions(source, ["g", "f"]) == {4, 5, 11}
    assert mutate.lines_of_functions(source, ["h"]) == set()


def _mutants(n: int) -> list[Mutant]:
    return [Mutant("lib/x.c", i, "a\n", f"b{i}\n") for i in range(1, n + 1)]


def test_sample_is_reproducible_and_seeded() -> None:
    first = [m.line for m in mutate.sample(_mutants(40), 5, seed=7)]
    assert first == [m.line for m in mutate.sample(_mutants(40), 5, seed=7)]
    assert len(set(first)) == 5 and first == sorted(first)
    others = {tuple(m.line for m in mutate.sample(_mutants(40), 5, seed=s)) for s in range(5)}
    assert len(others) > 1
    assert len(mutate.sample(_mutants(3), 5, seed=1)) == 3
    assert len(mutate.sample(_mutants(3), None, seed=1)) == 3


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("objdump")),
                    reason="needs gcc and objdump (the host has them; the runtime root not)")
def test_object_code_tells_equivalent_mutants(tmp_path: Path) -> None:
    def code(text: str, name: str) -> str:
        (tmp_path / f"{name}.c").write_text(text)
        subprocess.run(["gcc", "-O2", "-g", "-c", f"{name}.c"], cwd=tmp_path, check=True)
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"{name}.o"],
                             cwd=tmp_path, capture_output=True, text=True, check=True).stdout
        return mutate.code_text(out)

    base = code(ORIGINAL, "orig")
    assert code(ORIGINAL.replace("a + 1", "1 + a"), "same") == base  # equivalent: dropped
    assert code(ORIGINAL.replace("a + 1", "a - 1"), "other") != base


def test_reach_starts_with_the_finest_groups_ids() -> None:
    runs = {"groups": [
        {"label": "m", "nodeids": ["t.py::a", "t.py::b"], "parent": None,
         "reached": [["lib/x.c", 3], ["lib/x.c", 5]]},
        {"label": "a", "nodeids": ["t.py::a"], "parent": 0, "reached": [["lib/x.c", 3]]},
        {"label": "b", "nodeids": ["t.py::b"], "parent": 0, "reached": []},
    ]}
    assert mutate.line_reach(runs, ("lib/x.c", 3)) == ["t.py::a"]
    assert mutate.line_reach(runs, ("lib/x.c", 5)) == ["t.py::a", "t.py::b"]
    assert mutate.line_reach(runs, ("lib/x.c", 9)) == []


def test_reach_goes_on_to_the_ids_the_bisection_did_not_run_alone() -> None:
    # m reached line 3; of its halves only h1 ran (the budget), and of h1's ids
    # only a: b, c and d may reach the line too and run after a; e's own run
    # did not reach it.
    runs = {"groups": [
        {"label": "m", "nodeids": ["t::a", "t::b", "t::c", "t::d", "t::e"], "parent": None,
         "reached": [["lib/x.c", 3]]},
        {"label": "h1", "nodeids": ["t::a", "t::b"], "parent": 0, "reached": [["lib/x.c", 3]]},
        {"label": "a", "nodeids": ["t::a"], "parent": 1, "reached": [["lib/x.c", 3]]},
        {"label": "e", "nodeids": ["t::e"], "parent": 0, "reached": []},
    ]}
    assert mutate.line_reach(runs, ("lib/x.c", 3)) == ["t::a", "t::b", "t::c", "t::d"]


def test_killer_is_the_first_failed_id() -> None:
    log = "....\nFAILED cases/a.py::test_x[1] - AssertionError\nFAILED cases/a.py::test_y\n"
    assert mutate.killer(log) == "cases/a.py::test_x[1]"
    assert mutate.killer("ERROR cases/a.py::test_z - fixture\n") == "cases/a.py::test_z"
    assert mutate.killer("3 passed\n") is None


def test_report_survivors_first_scores_and_exit_code(tmp_path: Path) -> None:
    ms = _mutants(4)
    ms[0].state, ms[0].killed_by = "killed", "t.py::a"
    ms[1].state = "survived"
    ms[2].state = "equivalent"
    ms[3].state = "killed"
    reach = {("lib/x.c", 2): ["t.py::a", "t.py::b"]}
    data = mutate.report(ms, reach, "--patch p", "test")
    assert [m["state"] for m in data["mutants"]] == ["survived", "killed", "killed", "equivalent"]
    assert data["mutants"][0]["rerun"] == "./ovstest suite -x 't.py::a' 't.py::b'"
    assert data["scores"]["lib/x.c"] == {"killed": 2, "survived": 1, "dropped": 1, "score": 66.7}
    mutate.write_report(tmp_path, data)
    assert json.loads((tmp_path / "mutate.json").read_text()) == data
    page = (tmp_path / "mutate.html").read_text()
    assert page.index("survived") < page.index("killed by t.py::a")
    assert "66.7%" in page and "-a\n+b2" in page
    assert mutate.exit_code(ms) == 1
    ms[1].state = "killed"
    assert mutate.exit_code(ms) == 0


def test_restore_puts_the_original_back(tmp_path: Path) -> None:
    path = tmp_path / "x.c"
    path.write_text(ORIGINAL)
    with pytest.raises(RuntimeError):
        with mutate.Restore(path):
            path.write_text("mutant\n")
            raise RuntimeError("the build failed")
    assert path.read_text() == ORIGINAL


def test_restore_on_sigint(tmp_path: Path) -> None:
    import os
    import signal
    path = tmp_path / "x.c"
    path.write_text(ORIGINAL)
    with pytest.raises(KeyboardInterrupt):
        with mutate.Restore(path) as restore:
            path.write_text("mutant\n")
            os.kill(os.getpid(), signal.SIGINT)
    assert restore.interrupted and path.read_text() == ORIGINAL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class _Build:
    def __init__(self, src: Path) -> None:
        self.src = src


def test_bad_input_one_line(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "dpif-netdev.c").write_text(ORIGINAL)
    dp = ["lib/dpif-netdev.c"]
    build = _Build(src)

    def refused(**kw: object) -> str:
        with pytest.raises(LaunchError) as exc:
            mutate.changed_lines(mutate.Options(cwd=tmp_path, **kw), build, dp)  # type: ignore[arg-type]
        assert "\n" not in str(exc.value)
        return str(exc.value)

    (tmp_path / "other.patch").write_text(
        "--- a/lib/util.c\n+++ b/lib/util.c\n@@ -1,0 +2,1 @@\n+x\n")
    assert "no datapath file" in refused(patch="other.patch")
    assert "neither a file" in refused(patch="nothing.patch")
    assert "no such file" in refused(file="lib/nope.c")
    assert "none in" in refused(file="lib/dpif-netdev.c", functions=["nope"])
    if not shutil.which("git"):  # the runtime root has none; mutate runs it on the host
        return
    (tmp_path / "stale.patch").write_text(
        "--- a/lib/dpif-netdev.c\n+++ b/lib/dpif-netdev.c\n@@ -2,0 +3,1 @@\n+    int c = 2;\n")
    assert "not applied" in refused(patch="stale.patch")
    (tmp_path / "good.patch").write_text(
        "--- a/lib/dpif-netdev.c\n+++ b/lib/dpif-netdev.c\n@@ -2,0 +3,1 @@\n+    int b = a + 1;\n")
    changes, _ = mutate.changed_lines(mutate.Options(patch="good.patch", cwd=tmp_path),
                                      build, dp)  # type: ignore[arg-type]
    assert changes["lib/dpif-netdev.c"].lines == [3]


def test_cli_refuses_mutate_without_patch_or_file() -> None:
    with pytest.raises(LaunchError, match="--patch FILE"):
        cli.parse(["mutate"])
    with pytest.raises(LaunchError, match="--functions goes with --file"):
        cli.parse(["mutate", "--patch", "x.patch", "--functions", "f"])
    args, extra = cli.parse(["mutate", "--file", "lib/flow.c", "--sample", "3", "-k", "x"])
    assert (args.file, args.sample, extra) == ("lib/flow.c", "3", ["-k", "x"])
