"""`./ovstest coverage`: which lines of the datapath a selection reaches.

Stdlib only: this drives everything from the host.

1. The coverage build (tooling/ovsbuild.py): the user's tree (--ovs-src) or
   Debian's source of the runtime's version, `--enable-coverage`, cached.
2. Our run: the selection, sealed in the runtime as usual, against that build
   (mounted read-only).  GCOV_PREFIX and GCOV_PREFIX_STRIP send every
   process's .gcda files to OUT/gcda instead of the build tree.
3. The report: gcovr (Debian's, in the toolchain root, with the gcov of the gcc
   that compiled the build) writes coverage.html (per file, uncovered lines
   marked) and coverage.json over the datapath's sources (DATAPATH_FILES).
4. --baseline-upstream: upstream's own testsuite in the same build, for the
   tests of the files we reproduce (UPSTREAM_FILES; their numbers come from
   the tree's `testsuite -l`), as `make check TESTSUITEFLAGS=<numbers>`, its
   .gcda files under OUT/upstream/gcda; reported the same way, cached per build.
5. --patch FILE|REV..REV: the patch's changed lines, reached or not; which
   ids reach them comes from more runs, each of a group of the selection's ids
   with a .gcda directory of its own: the modules first, then the functions of
   a module that reached a changed line, then halves of a function's ids, down
   to single ids while the budget (--patch-runs) lasts, first along one path
   per reached line (next_group).  A line's finest group is what the report
   names: one id where the budget sufficed.

The side-by-side and patch pages are rendered by tooling/gcov_pages.py, sealed in the
runtime (it needs jinja2); this module only runs it.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.concurrency import default_workers
from harness.runtime import LaunchError
from tooling.idgroups import Group, modules, next_group, split
from tooling.ovsbuild import Build, toolchain_run
from tooling.patchlines import FileChange, parse_diff, reached, read_patch

DEFAULT_OUT = "reports/out-coverage"
DEFAULT_PATCH_RUNS = 24
# The datapath's sources the report covers (globs under the tree's top).
DATAPATH_FILES = (
    "lib/dpif-netdev*.c", "lib/dp-packet*.c", "lib/packets.c", "lib/netdev-native-tnl.c",
    "lib/odp-execute*.c", "lib/conntrack*.c", "lib/ipf.c", "lib/netdev-dummy.c", "lib/tnl-*.c",
    "lib/flow.c", "lib/netdev.c", "lib/netdev-linux.c", "lib/netdev-dpdk.c",
    "lib/netdev-afxdp.c",
)
# Upstream's testsuite files this project reproduces (README: What it covers).
UPSTREAM_FILES = ("dpif-netdev.at", "pmd.at", "tunnel-push-pop.at", "tunnel-push-pop-ipv6.at")
# tooling/idselect.py (a pytest plugin, loaded in the seal) reads these.
IDS_ENV = "OVSTEST_IDS"
IDS_OUT_ENV = "OVSTEST_IDS_OUT"
LISTING = re.compile(r"^\s*(\d+): (\S+?\.at):\d+\s+(.*?)\s*$")

# (inner argv, extra environment, read-write host dirs, host log or None) -> exit code:
# one pytest (or other command) sealed in the runtime with the coverage build mounted.
RuntimeSeal = Callable[[list[str], dict[str, str], tuple[Path, ...], Path | None], int]


@dataclass
class Options:
    """`./ovstest coverage`'s options: the source tree, configure flags, upstream baseline, patch."""

    ovs_src: str | None = None
    configure: str | None = None
    baseline_upstream: bool = False
    patch: str | None = None
    patch_runs: int = DEFAULT_PATCH_RUNS
    cwd: Path = Path(".")  # where a relative --patch FILE is


def say(line: str) -> None:
    """Print a line of progress to stderr, prefixed."""
    print(f"ovstest coverage: {line}", file=sys.stderr, flush=True)


def sealed(path: Path) -> Path:
    """Where a host path appears in a seal: the checkout is /src there."""
    from harness.runtime import REPO_ROOT
    if path == REPO_ROOT or REPO_ROOT in path.parents:
        return Path("/src") / path.relative_to(REPO_ROOT)
    return path


def outside_checkout(path: Path) -> tuple[Path, ...]:
    """The rw mounts a host directory needs (none inside the checkout: /src)."""
    from harness.runtime import REPO_ROOT
    return () if path == REPO_ROOT or REPO_ROOT in path.parents else (path,)


def datapath_files(src: Path) -> list[str]:
    """The datapath's sources present in this tree, relative to its top."""
    found: set[str] = set()
    for pattern in DATAPATH_FILES:
        found.update(str(p.relative_to(src)) for p in src.glob(pattern) if p.is_file())
    return sorted(found)


def gcda_matches(stem: str, sources: list[str]) -> bool:
    """Whether an object's .gcda (lib/flow.gcda, lib/libfoo_la-flow.gcda) is of
    one of these sources; a header among them needs every object."""
    if any(not s.endswith(".c") for s in sources):
        return True
    return any(re.search(rf"(?:^|_la-){re.escape(Path(s).stem)}$", stem) for s in sources)


def shadow(build: Build, gcda: Path, dest: Path, sources: list[str]) -> int:
    """A directory gcov can read: each .gcda of these sources from the run,
    beside a link to its .gcno in the build.  Returns how many."""
    shutil.rmtree(dest, ignore_errors=True)
    count = 0
    for data in gcda.rglob("*.gcda"):
        if not gcda_matches(data.stem, sources):
            continue
        rel = data.relative_to(gcda)
        notes = build.build / rel.with_suffix(".gcno")
        if not notes.is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data, dest / rel)
        (dest / rel.with_suffix(".gcno")).symlink_to(notes)
        count += 1
    return count


def gcovr(toolchain: Path, build: Build, gcda: Path, out: Path, sources: list[str],
          title: str, html: bool = True) -> dict[str, object]:
    """gcovr over the .gcda files in `gcda`: out/coverage.json (and coverage.html
    with a page per file).  Returns the JSON report."""
    work = out / "gcov-shadow"
    n = shadow(build, gcda, work, sources)
    if n == 0:
        raise LaunchError(f"no .gcda files of the datapath's sources under {gcda}: did "
                          "ovs-vswitchd run, and exit normally?")
    # gcov runs in the (writable) shadow: the tree is read-only in the seal, and
    # gcovr would otherwise run gcov, which writes its output, at --root first.
    argv = ["gcovr", "--root", str(build.src), "-j", str(os.cpu_count() or 1),
            "--gcov-object-directory", str(sealed(work)), "--merge-lines",
            # a build without -fprofile-update=atomic (--ovs-configure) may race
            "--gcov-ignore-parse-errors=negative_hits.warn_once_per_file",
            *[a for s in sources for a in ("--filter", re.escape(str(build.src / s)) + "$")],
            "--json", str(sealed(out / "coverage.json")), "--json-pretty",
            "--json-summary", str(sealed(out / "coverage-summary.json")), "--json-summary-pretty"]
    if html:
        argv += ["--html-details", str(sealed(out / "coverage.html")), "--html-title", title]
    argv.append(str(sealed(work)))
    log = out / "gcovr.log"
    log.unlink(missing_ok=True)
    rw = outside_checkout(out)
    rc = toolchain_run(toolchain, argv, cwd=build.build, ro=(build.build, build.src), rw=rw,
                       log=log, timeout=1800)
    shutil.rmtree(work, ignore_errors=True)
    if rc != 0:
        tail = log.read_text(errors="replace").splitlines()[-10:]
        raise LaunchError("gcovr failed; its last lines:\n  " + "\n  ".join(tail))
    report: dict[str, object] = json.loads((out / "coverage.json").read_text())
    return report


def gcov_env(build: Build, gcda: Path) -> dict[str, str]:
    """The environment that makes the coverage build write its .gcda files under GCDA."""
    return {"GCOV_PREFIX": str(sealed(gcda)), "GCOV_PREFIX_STRIP": str(build.gcov_strip)}


def fresh(path: Path) -> Path:
    """An empty directory at PATH, whatever was there."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def our_run(build: Build, pytest_cmd: list[str], out: Path, seal: RuntimeSeal) -> int:
    """The selection once, its .gcda files in out/gcda, its report in out/run."""
    gcda = fresh(out / "gcda")
    argv = [*pytest_cmd, f"--out-dir={sealed(out / 'run')}"]
    return seal(argv, gcov_env(build, gcda), outside_checkout(out), None)


# ----------------------------------------------------------------------------
# Upstream's testsuite


def upstream_numbers(listing: str, files: tuple[str, ...] = UPSTREAM_FILES
                     ) -> dict[str, list[tuple[int, str]]]:
    """{file: [(number, title)]} from `testsuite -l` output, for these files."""
    out: dict[str, list[tuple[int, str]]] = {f: [] for f in files}
    for line in listing.splitlines():
        m = LISTING.match(line)
        if m and m.group(2) in out:
            out[m.group(2)].append((int(m.group(1)), m.group(3)))
    return out


def upstream_run(toolchain: Path, build: Build, out: Path, jobs: int) -> dict[str, object]:
    """Upstream's tests of UPSTREAM_FILES under `make check` in the build, their
    coverage in out/ (cached beside the build, per build stamp and numbers)."""
    out.mkdir(parents=True, exist_ok=True)
    listing_log = out / "testsuite-list.txt"
    listing_log.unlink(missing_ok=True)
    rw = (build.build.parent, build.src, *outside_checkout(out))
    rc = toolchain_run(toolchain, ["sh", str(build.src / "tests" / "testsuite"), "-l"],
                       cwd=build.build / "tests", rw=rw, log=listing_log, timeout=300)
    tests = upstream_numbers(listing_log.read_text(errors="replace"))
    numbers = sorted(n for found in tests.values() for n, _ in found)
    if rc != 0 or not numbers:
        raise LaunchError(f"the tree's testsuite lists none of {', '.join(UPSTREAM_FILES)} "
                          f"(testsuite -l: rc {rc}, see {listing_log})")
    (out / "tests.json").write_text(json.dumps(tests, indent=1) + "\n")
    stamp = (build.build.parent / "stamp.json").read_text()
    key = hash_text(stamp + " ".join(map(str, numbers)) + " recheck")
    cached = build.build.parent / f"upstream-{key}"
    with open(build.build.parent / ".lock-upstream", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one make check in a build tree at a time
        upstream_measure(toolchain, build, cached, tests, numbers, rw, jobs)
    for item in cached.iterdir():
        if item.is_file():
            shutil.copyfile(item, out / item.name)
    report: dict[str, object] = json.loads((out / "coverage.json").read_text())
    return report


def upstream_measure(toolchain: Path, build: Build, cached: Path,
                     tests: dict[str, list[tuple[int, str]]], numbers: list[int],
                     rw: tuple[Path, ...], jobs: int) -> None:
    """make check for these numbers and its gcovr report, into `cached` (kept)."""
    if (cached / "coverage.json").is_file():
        say(f"upstream's testsuite: cached ({cached})")
    else:
        say(f"upstream's testsuite: make check TESTSUITEFLAGS=<{len(numbers)} tests of "
            f"{', '.join(f'{f} ({len(t)})' for f, t in tests.items())}> (-j{jobs})")
        work = fresh(build.build.parent / "upstream-running")
        gcda = fresh(work / "gcda")
        log = work / "make-check.log"
        started = time.monotonic()
        flags = f"-j{jobs} " + " ".join(map(str, numbers))
        # RECHECK=yes: tests that failed run once more (upstream's CI does so
        # too); timing-bound ones (meters, revalidators) fail on a busy machine.
        rc = toolchain_run(toolchain, ["make", f"-j{os.cpu_count() or 1}", "check",
                                       f"TESTSUITEFLAGS={flags}",
                                       "RECHECK=yes"],
                           cwd=build.build, rw=rw, env=gcov_env(build, gcda), log=log)
        seconds = time.monotonic() - started
        verdict = [ln for ln in log.read_text(errors="replace").splitlines()
                   if re.search(r"tests? (were|was) (successful|run|skipped)|failed", ln)]
        say(f"upstream's testsuite: rc {rc} in {seconds:.0f} s: {'; '.join(verdict[-3:])}")
        (work / "run.json").write_text(json.dumps(
            {"rc": rc, "seconds": round(seconds, 1), "verdict": verdict[-3:],
             "numbers": numbers}, indent=1) + "\n")
        gcovr(toolchain, build, gcda, work, datapath_files(build.src),
              f"upstream's testsuite ({len(numbers)} tests), {build.origin}")
        shutil.rmtree(gcda, ignore_errors=True)
        shutil.rmtree(cached, ignore_errors=True)
        work.rename(cached)


def hash_text(text: str) -> str:
    """A short stable hash of a text (12 hex digits of its SHA-256)."""
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------
# --patch: which ids reach the changed lines


def collect(pytest_cmd: list[str], out: Path, seal: RuntimeSeal) -> list[str]:
    """The selection's node ids, as pytest collects them in the seal."""
    listing = out / "collected.txt"
    listing.unlink(missing_ok=True)
    seal([*pytest_cmd, "-p", "tooling.idselect", "--collect-only",
          f"--out-dir={sealed(out / 'collect')}"], {IDS_OUT_ENV: str(sealed(listing))},
         outside_checkout(out), out / "collect.log")
    ids = listing.read_text().split() if listing.is_file() else []
    if not ids:
        raise LaunchError(f"--patch: the selection collected no ids (see {out / 'collect.log'})")
    return ids


def patch_runs(toolchain: Path, build: Build, changes: dict[str, FileChange],
               main_report: dict[str, object], pytest_cmd: list[str], out: Path,
               seal: RuntimeSeal, budget: int) -> list[Group]:
    """Run groups of ids, finer where a changed line was reached, within budget."""
    targets = reached(changes, main_report)
    if not targets:
        say("--patch: no changed line was reached; no group runs needed")
        return []
    queue = modules(collect(pytest_cmd, out, seal))
    if len(queue) == 1:  # one module: start at its functions
        queue = split(queue[0], None)
    groups: list[Group] = []
    pinned: set[tuple[str, int]] = set()  # lines a single id is known to reach
    sources = sorted(changes)
    while queue and len(groups) < budget:
        group = next_group(queue, groups, targets, pinned)
        index = len(groups)
        groups.append(group)
        work = fresh(out / "groups" / f"g{index:03d}")
        (work / "ids.txt").write_text("".join(f"{n}\n" for n in group.nodeids))
        say(f"--patch: run {index + 1} of at most {budget}: {group.label} "
            f"({len(group.nodeids)} ids)")
        started = time.monotonic()
        gcda = fresh(work / "gcda")
        group.rc = seal([*pytest_cmd, "-p", "tooling.idselect",
                         f"--out-dir={sealed(work / 'run')}"],
                        {**gcov_env(build, gcda), IDS_ENV: str(sealed(work / "ids.txt"))},
                        outside_checkout(out), work / "pytest.log")
        group.seconds = round(time.monotonic() - started, 1)
        try:
            report = gcovr(toolchain, build, gcda, work, sources, group.label, html=False)
        except LaunchError:  # no .gcda of the patch's files: nothing reached
            report = {"files": []}
        shutil.rmtree(gcda, ignore_errors=True)
        group.reached = sorted(reached(changes, report) & targets)
        if len(group.nodeids) == 1:
            pinned.update(group.reached)
        if group.reached:
            queue += split(group, index)
    return groups


def write_patch_data(out: Path, what: str, changes: dict[str, FileChange],
                     groups: list[Group], main_report: dict[str, object], budget: int) -> None:
    """Write patch-runs.json: the patch's lines, those the main run reached, and each group's run."""
    data = {
        "patch": what,
        "budget": budget,
        "changes": {p: {"added": sorted(c.added), "after_deletion": sorted(c.after_deletion)}
                    for p, c in sorted(changes.items())},
        "main_reached": sorted(reached(changes, main_report)),
        "groups": [{"label": g.label, "level": g.level, "nodeids": g.nodeids,
                    "parent": g.parent, "reached": g.reached, "rc": g.rc,
                    "seconds": g.seconds} for g in groups],
    }
    (out / "patch-runs.json").write_text(json.dumps(data, indent=1) + "\n")


def drive(options: Options, toolchain: Path, build: Build, pytest_cmd: list[str],
          host_out: Path, seal: RuntimeSeal, render: Callable[[list[str]], int]) -> int:
    """The whole mode once the build exists; returns the exit code."""
    changes: dict[str, FileChange] = {}
    what = ""
    if options.patch:  # a bad --patch fails before the long run
        try:
            text, what = read_patch(options.patch, build.src, options.cwd)
        except ValueError as exc:
            raise LaunchError(str(exc)) from None
        changes = parse_diff(text)
        if not changes:
            raise LaunchError(f"--patch {options.patch}: the diff changes no line")
    host_out.mkdir(parents=True, exist_ok=True)
    for stale in ("coverage-compare.html", "coverage-compare.json", "patch.html", "patch.json",
                  "patch-runs.json", "run.json"):
        (host_out / stale).unlink(missing_ok=True)
    for old in host_out.glob("coverage*.html"):
        old.unlink()
    shutil.rmtree(host_out / "upstream", ignore_errors=True)
    shutil.rmtree(host_out / "groups", ignore_errors=True)
    sources = datapath_files(build.src)
    say(f"build: {build.describe()}")
    started = time.monotonic()
    rc = our_run(build, pytest_cmd, host_out, seal)
    seconds = time.monotonic() - started
    say(f"our run: pytest exit code {rc} in {seconds:.0f} s")
    gcovr_started = time.monotonic()
    report = gcovr(toolchain, build, host_out / "gcda", host_out,
                   sorted(set(sources) | set(changes)) if changes else sources,
                   f"ovs-dpif-pytest, {build.origin}")
    say(f"gcovr: {time.monotonic() - gcovr_started:.0f} s")
    (host_out / "run.json").write_text(json.dumps(
        {"rc": rc, "seconds": round(seconds, 1), "build": build.describe(),
         "src": str(build.src), "pytest": pytest_cmd, "files": sources}, indent=1) + "\n")
    if options.baseline_upstream:
        # Upstream's tests of these files wait (OVS_WAIT_UNTIL polls, daemons
        # starting and stopping) far more than they compute: as many at once as
        # our own ids (harness/concurrency.py); make itself builds with the cores.
        upstream_run(toolchain, build, host_out / "upstream", jobs=default_workers())
    if options.patch:
        groups = patch_runs(toolchain, build, changes, report, pytest_cmd, host_out, seal,
                            options.patch_runs)
        write_patch_data(host_out, what, changes, groups, report, options.patch_runs)
    rendered = render([str(sealed(host_out))])
    if rendered != 0:
        return rendered
    return rc
