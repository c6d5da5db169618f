"""`./ovstest export --series` (export/series.py): every fix of export/fixes/ is a
commit in OVS's form, the series covers each root-cause group of a bug once, and
every patch applies, in order, to the source it was made against.

The apply tests need that source, Debian's openvswitch source of the runtime's
version as .ci/ovs-source-build or `./ovstest coverage` caches it (or the tree
$OVSTEST_SERIES_SRC names), and git: without them (the sealed runtime has no
git) they skip, saying so.  .ci/run runs this module on the host after
.ci/ovs-source-build (`python3 -m pytest --noconftest`: it needs neither scapy
nor the framework's plugins, and loads the catalogue, pure data, by path)."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from export import series

ROOT = Path(__file__).resolve().parent.parent


def _catalogue():  # type: ignore[no-untyped-def]
    """datapath/model/bugs.py without its package (whose __init__ needs scapy)."""
    spec = importlib.util.spec_from_file_location("_series_bugs",
                                                  ROOT / "datapath" / "model" / "bugs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bugs = _catalogue()

CACHE = Path(os.environ.get("OVSTEST_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ovs-dpif-pytest")
# OVS's own rule (utilities/checkpatch.py): the subject, "[PATCH n/m] " included,
# within 70 characters.
MAX_SUBJECT = 70 - len("[PATCH 1/9] ")


def test_the_series_lists_one_fix_per_root_cause_group_of_a_bug() -> None:
    fixes = series.load()
    groups: dict[str, set[str]] = {}
    for bug in bugs.ALL:
        groups.setdefault(bug.root_cause, set()).add(bug.key)
    with_bug = {b.root_cause for b in bugs.ALL if b.cls == "bug"}
    assert {f.group for f in fixes} >= with_bug
    for fix in fixes:
        assert set(fix.bugs) == groups[fix.group], fix.group


@pytest.mark.parametrize("fix", series.load(), ids=lambda f: f.group)
def test_a_fix_is_a_commit_in_ovs_form(fix: series.Fix) -> None:
    """A subject `area: Summary.` short enough for checkpatch, a body, at least one
    `Fixes: <12 hex> ("subject")` tag, no Signed-off-by (the sender adds it), and
    a diff that changes OVS's sources and adds or corrects a test of its
    testsuite."""
    assert re.fullmatch(r"[a-z0-9-]+: [A-Z].*\.", fix.subject), fix.subject
    assert len(fix.subject) <= MAX_SUBJECT, (len(fix.subject), fix.subject)
    assert fix.fixes_tags, "no Fixes: tag"
    assert all(re.fullmatch(r"[0-9a-f]{12}", sha) for sha, _ in fix.fixes_tags)
    assert not re.search(r"^(Signed-off-by|Co-authored-by):", fix.body, re.M)
    assert all(len(line) <= 79 for line in fix.body.splitlines()
               if not line.startswith("Fixes: ")), "a body line over 79 columns"
    code = [p for p in fix.paths if p.startswith(("lib/", "ofproto/", "vswitchd/"))]
    tests = [p for p in fix.paths if re.fullmatch(r"tests/[\w-]+\.at", p)]
    assert code and tests, fix.paths
    assert re.search(r"^\+AT_SETUP\(\[", fix.diff, re.M), "no new test"


def test_a_fix_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x.patch"
    bad.write_text("Subject: no Bugs line\n\nbody\n---\ndiff --git a/x b/x\n")
    with pytest.raises(series.SeriesError) as err:
        series.parse(bad)
    assert err.value.code == 2


def test_the_cover_letter_names_the_patches_for_the_security_team() -> None:
    fixes = series.load()
    subject, blurb = series.cover_letter(fixes, "4.0.0")
    assert "OVS 4.0.0" in subject
    guarded = [f for f in fixes if series.disclosure(f)]
    assert guarded, "no disclosure note for any fix"
    for fix in guarded:
        assert fix.subject in blurb
        for note in series.disclosure(fix):
            text = note.read_text()
            for heading in ("## Impact", "## Trigger", "## Affected releases", "## Workaround"):
                assert heading in text, (note.name, heading)
            assert all(sha in text for sha, _ in fix.fixes_tags), note.name


def cached_source() -> Path | None:
    """The source the series is made against, where a cache holds it."""
    given = os.environ.get("OVSTEST_SERIES_SRC")
    if given:
        return Path(given)
    candidates = [CACHE / "ovs-source" / "src",
                  *sorted(CACHE.glob("coverage/debian-openvswitch-*/src"))]
    return next((c for c in candidates if (c / "configure.ac").is_file()), None)


def test_every_patch_applies_to_the_source_it_was_made_against(tmp_path: Path) -> None:
    """The series written against Debian's source of the runtime's OVS: each patch
    applies in order (git apply refuses fuzz), and format-patch writes a cover
    letter, one numbered patch per fix, and the security notes."""
    src = cached_source()
    if src is None:
        pytest.skip("no cached OVS source (.ci/ovs-source-build or ./ovstest coverage fetches "
                    "it; or name one with OVSTEST_SERIES_SRC)")
    if shutil.which("git") is None:
        pytest.skip("no git here (export --series runs on the host)")
    out = tmp_path / "series"
    paths = series.write(src, out)
    fixes = series.load()
    assert [p.name[:5] for p in paths] == [f"{n:04d}-" for n in range(len(fixes) + 1)]
    for path, fix in zip(paths[1:], fixes):
        text = path.read_text()
        assert f"] {fix.subject}" in text.replace("\n ", " ")
        assert "Signed-off-by" not in text
        assert re.search(r"^index [0-9a-f]+\.\.[0-9a-f]+", text, re.M)  # made by git
    security = (out / "SECURITY.txt").read_text()
    assert all((out / "disclosures" / d.name).is_file() for f in fixes for d in series.disclosure(f))
    assert security.count(".patch:") == sum(1 for f in fixes if series.disclosure(f))


def test_a_patch_that_does_not_apply_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    """Against a tree whose files differ, export fails naming the patch."""
    src = cached_source()
    if src is None or shutil.which("git") is None:
        pytest.skip("no cached OVS source, or no git")
    fixes = series.load()
    tree = tmp_path / "tree"
    for rel in {p for f in fixes for p in f.paths}:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, tree / rel)
    (tree / "configure.ac").write_text("AC_INIT(openvswitch, 4.0.0)\n")
    first = fixes[0].paths[0]
    (tree / first).write_text("not the file the series was made against\n")
    proc = subprocess.run(["python3", str(Path(series.__file__)), "--series",
                           str(tmp_path / "out"), "--ovs-src", str(tree)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"patch 1 ({fixes[0].group}.patch) does not apply" in proc.stderr
