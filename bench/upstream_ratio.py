"""Speed against upstream: ./ovstest bench --upstream-tree DIR [-k EXPR] [--jobs N]
[--testsuite TARGET,...].

Given a configured and built OVS source tree (in-tree or out of tree: DIR is
the build directory, its tests/atconfig names the source), this

  1. runs this project's reproductions (every id with an `upstream` marker, or
     the -k selection of them) once, to learn which upstream tests they
     reproduce, file by file (results.json carries title and file);
  2. per upstream file, runs upstream's own testsuite for exactly those tests
     (`make check`'s tests/testsuite, or for the system-*.at files of
     check-system-userspace its tests/system-userspace-testsuite, each as
     `-C tests AUTOTEST_PATH=... -jN NUMBERS`), then this project's ids for the
     same tests, and times both;
  3. prints the wall times and upstream/ours per file and overall, with what
     each side checked.

Both sides use the same cores.  Upstream's main testsuite and ours run with
--jobs N (-jN, -n N).  check-system-userspace's files must run -j1 upstream
(its tests share names: namespaces, devices, addresses); ours need not, since
every id owns its names: they run both one id at a time (-n 0) and with the
suite's default concurrency, and both ratios are printed.

The main testsuite runs on the host (the tree's binaries are the host's).
check-system-userspace makes namespaces, veths and addresses in the namespace
it runs in, so it runs sealed in the runtime root (its own network namespace,
the runtime's ip, ethtool, ncat, curl), in a hard-linked copy of the build
directory beside it that is removed afterwards (its .dir is the only thing it
writes).  Our side is `./ovstest suite`, which seals itself as usual; for the
system files it runs the tree's own binaries (--ovs-bindir), as upstream does,
and only the `userspace` flavour (upstream's check-system-userspace; the `tso`
flavour is check-system-tso).  Both sides get GCOV_PREFIX (gcov_env()): a
coverage build's counters go to the seal's /tmp and vanish with it.

`--testsuite check-afxdp,check-dpdk` (or check-system-tso) measures instead
one testsuite per flavour of system-traffic.at, each with its own file first
(system-afxdp.at, system-dpdk.at, system-tap.at):

  1. which of our ids reproduce which titles, from a collection of cases/
     (bench/upstream_titles.py; nothing runs) or --from-results; an id
     belongs to the testsuite of its `flavour` parameter (afxdp, dpdk), one
     without it to the testsuite of the file only that testsuite runs;
  2. the titles' numbers from the tree's own `tests/SUITE -l`, matched by file
     and title (every testsuite numbers its tests itself);
  3. upstream's testsuite for those numbers, -j1 as its make target runs it,
     sealed as above; for check-dpdk with a hugetlbfs mounted in the seal and,
     while the host has no free hugepage, --hugepages N reserved on the host
     for that run and given back after it (its macros start DPDK without
     --no-huge, and OVS_DPDK_PRE_CHECK skips every test while /proc/meminfo
     says "HugePages_Free: 0");
  4. our ids of those titles with the default concurrency, on the tree's
     binaries (--ovs-bindir);
  5. one line per testsuite: titles compared, both wall times and their ratio,
     and per side how many titles passed, skipped and failed (ours: a title
     fails if one of its ids does), then why upstream's failed tests failed,
     grouped (the check and the output it did not expect).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.system_userspace import SYSTEM_USERSPACE  # noqa: E402  (stdlib only)
from harness.upstream import (  # noqa: E402
    DEFAULT_FILE,
    MAIN_SUITE_FILES,
    TESTSUITES,
    find,
    split_titles,
)

SYSTEM_SUITE = "system-userspace-testsuite"  # check-system-userspace's testsuite

AUTOTEST_PATH = "utilities:vswitchd:ovsdb:vtep:tests:ipsec:"


@dataclass
class FileRun:
    """One upstream .at file: its tests, our reproductions of them, and both sides'
    times."""

    file: str
    numbers: list[int] = field(default_factory=list)
    nodeids: list[str] = field(default_factory=list)
    upstream_seconds: float = 0.0
    upstream_summary: str = ""
    ours_seconds: float = 0.0
    ours_summary: str = ""
    ours_steps: int = 0
    serial_seconds: float = 0.0  # check-system-userspace's files: ours with -n 0 too


def ours(nodeids_or_args: list[str], out: Path, workers: str, extra: tuple[str, ...] = (),
         env: dict[str, str] | None = None) -> tuple[float, str, dict]:
    """Run `./ovstest suite -n WORKERS` on these ids ("0": one after another, "auto":
    the default concurrency); (wall seconds, pytest's last line, results).  `env`
    adds to the environment (GCOV_PREFIX crosses into the seal)."""
    rel = out.relative_to(ROOT)  # the sealed runtime sees the checkout only
    argv = [str(ROOT / "ovstest"), "suite", "-q", f"--out-dir={rel}", *extra,
            "-n", workers, *nodeids_or_args]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    wall = time.perf_counter() - started
    last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    results = out / "results.json"
    if not results.is_file():
        sys.exit(f"our run wrote no results (rc {proc.returncode}):\n{proc.stdout[-2000:]}"
                 f"\n{proc.stderr[-2000:]}")
    data = json.loads(results.read_text())
    bad = [c["nodeid"] for c in data["cases"] if c["outcome"] in ("failed", "error")]
    if bad:  # the run's directory goes with the benchmark: name them here
        print(f"ours: not passed: {' '.join(bad)}", flush=True)
    return wall, last.strip("= "), data


def source_of(tree: Path) -> Path:
    """The source directory of a build directory (its tests/atconfig's at_top_srcdir)."""
    m = re.search(r"^at_top_srcdir='(.*)'$", (tree / "tests" / "atconfig").read_text(), re.M)
    return (tree / "tests" / m.group(1)).resolve() if m else tree


def suite_of(file: str) -> str:
    """The testsuite an upstream file's tests run in."""
    return SYSTEM_SUITE if file in SYSTEM_USERSPACE else "testsuite"


def verdict_of(output: str, rc: int) -> str:
    """The testsuite's verdict lines (or its exit status when it printed none),
    from its stdout and stderr (where it says ERROR: ... failed)."""
    verdict = [ln.strip() for ln in output.splitlines()
               if re.search(r"tests? (were|was) (successful|run|skipped)|failed", ln)
               and not RESULT.match(ln) and "Subject:" not in ln]  # a title may say "failed"
    return "; ".join(verdict) or f"rc {rc}"


def upstream(tree: Path, numbers: list[int], jobs: int, suite: str = "testsuite"
             ) -> tuple[float, str]:
    """Upstream's testsuite for these test numbers; (wall seconds, its verdict line)."""
    # check-system-userspace runs -j1 whatever TESTSUITEFLAGS say (tests/automake.mk):
    # its tests share the namespace they run in (ovs-netdev, at_ns0, ovs-p0, ...).
    argv = suite_argv(tree, suite, 1 if suite == SYSTEM_SUITE else jobs, numbers)
    if suite == SYSTEM_SUITE:
        run = upstream_sealed(tree, argv, suite)
        return run.wall, run.verdict
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=tree, capture_output=True, text=True)
    return time.perf_counter() - started, verdict_of(proc.stdout + proc.stderr, proc.returncode)


def suite_argv(tree: Path, suite: str, jobs: int, numbers: list[int]) -> list[str]:
    """The command line of upstream's testsuite `suite` for these tests, run in the
    build directory as its make target runs it."""
    return ["sh", str(source_of(tree) / "tests" / suite), "-C", "tests",
            f"AUTOTEST_PATH={AUTOTEST_PATH}", f"-j{jobs}", *map(str, numbers)]


def gcov_env(tree: Path) -> dict[str, str]:
    """A coverage build's processes write their .gcda files under the seal's own
    /tmp (a tmpfs that goes with it), not into the build's cached counters; any
    other build ignores these variables."""
    return {"GCOV_PREFIX": SEALED_GCDA, "GCOV_PREFIX_STRIP": str(len(tree.parts) - 1)}


# Starts the testsuite inside the seal: mounts a hugetlbfs first when asked
# (check-dpdk: DPDK's EAL, as upstream's macros start it, takes its memory from
# one), in the seal's own mount namespace, so it goes with the seal.  The
# runtime root has no mount(8); its Python has ctypes.
SEALED_START = r"""
import ctypes, os, sys
cwd, hugetlbfs, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if hugetlbfs:
    os.makedirs(hugetlbfs, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"nodev", hugetlbfs.encode(), b"hugetlbfs", 0, b"pagesize=2M") != 0:
        sys.exit(f"mount -t hugetlbfs {hugetlbfs}: {os.strerror(ctypes.get_errno())}")
os.chdir(cwd)
os.execvp(argv[0], argv)
"""
SEALED_HUGETLBFS = "/run/ovstest-hugepages"
SEALED_GCDA = "/tmp/ovstest-gcda"


@dataclass
class SealedRun:
    """One sealed run of an upstream testsuite: its wall time (every invocation's),
    the verdict, and each test's result line (RESULTS' words) by number."""

    wall: float
    verdict: str
    results: dict[int, str]
    failures: dict[int, str] = field(default_factory=dict)  # failure_reasons()


@contextmanager
def linked_copy(tree: Path) -> Iterator[Path]:
    """A hard-linked copy of the build directory beside it (its relative paths to
    the source hold), for a sealed testsuite to write in, removed after the
    block.  Its Python scripts and atlocal name the runtime's Python.  A rebuild
    of the tree meanwhile (./ovstest mutate) writes new files (the linker
    replaces its output) and leaves the copy's binaries as they were."""
    copy = Path(tempfile.mkdtemp(prefix=f"{tree.name}-ratio-", dir=tree.parent))
    try:
        link_copy(tree, copy)
        # The runtime's Python runs upstream's helpers (test-l7.py), not the one
        # configure found on the host; a new file, not a write through the link.
        atlocal = copy / "tests" / "atlocal"
        text = re.sub(r"^PYTHON3=.*$", "PYTHON3='/usr/bin/python3'", atlocal.read_text(),
                      flags=re.M)
        atlocal.unlink()
        atlocal.write_text(text)
        runtime_python(copy)
        yield copy
    finally:
        subprocess.run(["rm", "-rf", str(copy)], check=False)


def upstream_sealed(tree: Path, argv: list[str], suite: str = SYSTEM_SUITE,
                    hugetlbfs: bool = False, copy: Path | None = None) -> SealedRun:
    """A system testsuite (check-system-userspace's, check-afxdp's, ...) sealed in
    the runtime root, in a linked_copy() of the build directory (`copy`, or one
    of its own), with gcov_env().  `hugetlbfs`: a hugetlbfs mounted in the seal
    first.

    A test can end the testsuite itself: "datapath - ping over vxlan tunnel"
    and its vxlan6 twin get SIGTERM during their cleanup here ("caught signal
    TERM, bailing out": the signal goes to the testsuite's whole process
    group), and the make target would stop there.  The run then
    goes on with the tests after that one, in a new invocation, as if the
    target had been restarted; the time of every invocation counts, the
    verdict names the tests that ended it, and their result is "ended"."""
    if copy is None:
        with linked_copy(tree) as own:
            return upstream_sealed(tree, argv, suite, hugetlbfs, own)
    from harness.runtime import provision, sealed_argv
    numbers = [int(a) for a in argv if a.isdigit()]
    head = [a for a in argv if not a.isdigit()]
    wall, verdicts, failed, ended = 0.0, [], [], []
    results: dict[int, str] = {}
    failures: dict[int, str] = {}
    root = provision()
    log = copy / "tests" / f"{suite}.log"
    while numbers:
        inner = ["/usr/bin/python3", "-c", SEALED_START, str(copy),
                 SEALED_HUGETLBFS if hugetlbfs else "", *head, *map(str, numbers)]
        # ro: the source, and the build itself (its libtool wrappers name its libraries)
        sealed, env = sealed_argv(root, inner, ro=(source_of(tree), tree), rw=(copy,),
                                  extra_env=gcov_env(tree))
        started = time.perf_counter()
        # Its own process group: the signal that ends the testsuite goes to
        # the whole group it runs in, which would otherwise be ours.
        proc = subprocess.run(sealed, env=env, capture_output=True, text=True,
                              start_new_session=True)
        wall += time.perf_counter() - started
        results.update(result_lines(proc.stdout))
        text = log.read_text(errors="replace") if log.is_file() else ""
        failed += re.findall(r"^\s*(\d+)\. .*: FAILED", text, re.M)
        failures.update(failure_reasons(text))
        if "bailing out" not in text:
            verdicts.append(verdict_of(proc.stdout + proc.stderr, proc.returncode))
            if not text:  # it never started: say why
                verdicts.append(f"no {log.name}: {proc.stderr.strip()[-500:]}")
            break
        # -j1 runs the tests in order: every test up to the last one that
        # started ran (a result line, or the directory a failed or
        # interrupted test leaves behind; at-groups/ lists them all before
        # they run), and that one ended the testsuite.
        rundir = copy / "tests" / f"{suite}.dir"
        begun = {int(n) for n in re.findall(r"^\s*(\d+)\. ", text, re.M)} | \
            {int(d.name) for d in rundir.iterdir() if d.name.isdigit()}
        last = max((n for n in begun if n in numbers), default=numbers[0])
        ended.append(last)
        results[last] = "ended"
        numbers = [n for n in numbers if n > last]
    verdict = "; ".join(verdicts) + \
        (f" (failed: {' '.join(failed)})" if failed else "") + \
        (f" (ended the testsuite, rerun from the next test: {' '.join(map(str, ended))})"
         if ended else "")
    return SealedRun(wall, verdict, results, failures)


# What another run of a testsuite in the build itself writes while it runs
# (./ovstest coverage --baseline-upstream runs make check there): its files may
# go between cp's listing and its link.
RUN_OUTPUT = re.compile(r"^tests/[^/]*(\.dir/.*|\.log)$")


def link_copy(tree: Path, copy: Path) -> None:
    """`cp -al TREE/. COPY`, tolerating only files of a testsuite run in TREE
    that went while cp ran (not_linked() names them)."""
    proc = subprocess.run(["cp", "-al", f"{tree}/.", str(copy)], capture_output=True, text=True)
    missed = not_linked(proc.stderr, tree)
    if proc.returncode != 0 and (missed is None or not missed):
        sys.exit(f"cp -al {tree} {copy} failed: {proc.stderr.strip()[-2000:]}")


def not_linked(stderr: str, tree: Path) -> list[str] | None:
    """The paths (relative to TREE) cp's complaints name, when every one is a
    testsuite run's output (RUN_OUTPUT); None when another is among them."""
    paths = []
    for line in stderr.splitlines():
        quoted = re.findall(r"'([^']*)'", line)  # the source is the last one
        rel = quoted[-1].removeprefix(f"{tree}/").removeprefix("./") if quoted else ""
        if not RUN_OUTPUT.match(rel):
            return None
        paths.append(rel)
    return paths


def runtime_python(copy: Path) -> None:
    """Point the build's Python scripts (ovs-pcap, ovs-tcpdump, ...) at the
    runtime's Python: configure wrote the host's into their #! lines, which the
    sealed root does not have (a test using one would wait out its timeouts and
    fail, and upstream's time would count that).  New files, not writes
    through the hard links."""
    for path in copy.rglob("*"):
        if not path.is_file() or path.is_symlink() or path.suffix in (".o", ".a", ".so", ".lo"):
            continue
        with path.open("rb") as f:
            first = f.readline(200)
        if not first.startswith(b"#!") or b"python" not in first \
                or first.split()[0] in (b"#!/usr/bin/python3", b"#!/usr/bin/env"):
            continue
        data = b"#!/usr/bin/python3\n" + path.read_bytes()[len(first):]
        mode = path.stat().st_mode
        path.unlink()
        path.write_bytes(data)
        path.chmod(mode)


def selected(cases: list[dict], select: str) -> list[dict]:
    """The cases a plain -k "a or b" of module or test names selects (all without one)."""
    words = [w for w in re.split(r"\W+", select) if w not in ("", "or", "and", "not")]
    return [c for c in cases if any(w in c["nodeid"] for w in words)] if words else cases


def discover(results: dict) -> dict[str, FileRun]:
    """Per upstream file: the test numbers our ids reproduce, and those ids."""
    runs: dict[str, FileRun] = {}
    for case in results["cases"]:
        titles = [t.strip() for t in (case.get("upstream") or "").split(";") if t.strip()]
        file = case.get("upstream_file") or DEFAULT_FILE
        if file not in MAIN_SUITE_FILES and file not in SYSTEM_USERSPACE:
            continue  # another testsuite (system-dpdk.at, system-afxdp.at)
        flavour = (case.get("params") or {}).get("flavour")
        if file in SYSTEM_USERSPACE and flavour not in (None, "userspace"):
            continue  # another flavour's testsuite: check-system-tso, check-afxdp, check-dpdk
        tests = [find(t, file) for t in titles]
        if not titles or any(t is None for t in tests):
            continue
        run = runs.setdefault(file, FileRun(file))
        run.numbers += [t.number for t in tests if t is not None and t.number not in run.numbers]
        run.nodeids.append(case["nodeid"])
    for run in runs.values():
        run.numbers.sort()
    return runs


# ----------------------------------------------------------------------------
# --testsuite: upstream's testsuites of one flavour of system-traffic.at
# (check-system-tso, check-afxdp, check-dpdk), each with a file of its own first

# Make target -> its testsuite script (tests/automake.mk).
SUITE_SCRIPTS = {"check-system-userspace": SYSTEM_SUITE,
                 "check-system-tso": "system-tso-testsuite",
                 "check-afxdp": "system-afxdp-testsuite",
                 "check-dpdk": "system-dpdk-testsuite"}
FLAVOUR_TARGETS = ("check-system-tso", "check-afxdp", "check-dpdk")
# `testsuite -l`: " NUM: FILE-NAME:LINE TEST-GROUP-NAME" (then a line of keywords).
LISTING = re.compile(r"^\s*(\d+): (\S+?\.at):\d+\s+(.*?)\s*$")
# A test's result line on the testsuite's stdout, " NUM: TITLE   RESULT".
RESULT = re.compile(r"^\s*(\d+): .*?\s(ok|skipped|FAILED|expected failure|UNEXPECTED PASS)"
                    r"(?: \([^()]*\))?\s*$")
# A result word (ours, or upstream's result line) -> passed, skipped, xfailed, failed.
OUTCOME = {"ok": "passed", "passed": "passed", "skipped": "skipped",
           "expected failure": "xfailed", "xfailed": "xfailed",
           "FAILED": "failed", "UNEXPECTED PASS": "failed", "ended": "failed",
           "failed": "failed", "error": "failed", "xpassed": "failed"}
TALLY_ORDER = ("passed", "xfailed", "skipped", "failed", "not run")
# check-dpdk's macros start DPDK without --no-huge and skip every test
# (OVS_DPDK_PRE_CHECK) while /proc/meminfo says "HugePages_Free: 0".
DEFAULT_HUGEPAGES = 1024  # 2 MB pages: the vswitchd's mempools and testpmd's --socket-mem=512


def listing_numbers(listing: str) -> dict[tuple[str, str], int]:
    """(file, title) -> test number, from a testsuite's `-l` output.  The numbers
    are the testsuite's own (system-traffic.at's first test is 3 in
    check-afxdp's, 29 in check-dpdk's)."""
    out: dict[tuple[str, str], int] = {}
    for line in listing.splitlines():
        m = LISTING.match(line)
        if m:
            out.setdefault((m.group(2), m.group(3)), int(m.group(1)))
    return out


def result_lines(stdout: str) -> dict[int, str]:
    """Test number -> its result word, from a testsuite's output (-j1 or -jN)."""
    out: dict[int, str] = {}
    for line in stdout.splitlines():
        m = RESULT.match(line)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


# A failed test's part of the testsuite's log ("Detailed failed tests"): from its
# "N. FILE:LINE: testing TITLE ..." to its "N. ...: FAILED (FILE:LINE)".
FAILED_PART = re.compile(r"^(\d+)\. \S+: testing [^\n]*$(.*?)^\1\. [^\n]*: FAILED \(([^()\n]*)\)$",
                         re.M | re.S)
# A vswitchd log line's time and sequence number, which differ from test to test.
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z\|\d+\|")


def failure_reasons(log: str) -> dict[int, str]:
    """Test number -> why it failed, from a testsuite's log: the check at the
    line it failed at (its first line), and the lines that check's output had
    beyond the expected (a diff's added lines, a log line's time and number
    left out).  Through check_logs (OVS_VSWITCHD_STOP) that is the log lines no
    allowlist took."""
    out: dict[int, str] = {}
    for m in FAILED_PART.finditer(log):
        number, body, where = int(m.group(1)), m.group(2), m.group(3)
        lines = body.splitlines()
        at = [i for i, ln in enumerate(lines) if re.match(rf"^\S*\b{re.escape(where)}: ", ln)]
        check = lines[at[-1]].split(f"{where}: ", 1)[1] if at else ""
        added: list[str] = []
        for ln in lines[at[-1] if at else 0:]:
            if ln.startswith("+++ "):
                added = []
            elif ln.startswith("+") and not ln.startswith("+++"):
                added.append(LOG_PREFIX.sub("", ln[1:]))
        what = "check_logs" if check.startswith("check_logs") else check[:80]
        out[number] = f"{where} {what}" + (f": {' / '.join(dict.fromkeys(added))}"
                                          if added else "")
    return out


def failure_summary(failures: dict[int, str]) -> list[tuple[str, int]]:
    """failure_reasons() grouped by the check and what it saw, whatever the line
    (each test has its own OVS_TRAFFIC_VSWITCHD_STOP): ("CHECK: LINES (FILE:LINE,
    ...)", count), the commonest first."""
    groups: dict[str, list[str]] = {}
    for number in sorted(failures):
        where, _, what = failures[number].partition(" ")
        groups.setdefault(what, []).append(where)
    return sorted(((f"{what} ({', '.join(wheres[:3])}{', ...' if len(wheres) > 3 else ''})",
                    len(wheres)) for what, wheres in groups.items()), key=lambda g: -g[1])


def suite_cases(cases: list[dict], target: str) -> dict[tuple[str, str], list[str]]:
    """(file, title) -> the ids that reproduce it in testsuite `target`, in the
    cases' order.  An id with a `flavour` parameter belongs to its flavour's
    testsuite; one without, to the testsuite of a file no other testsuite runs
    (system-afxdp.at, system-dpdk.at, system-tap.at)."""
    suite = next(ts for ts in TESTSUITES if ts.target == target)
    shared = {f for ts in TESTSUITES if ts is not suite for f in ts.files}
    out: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        file = case.get("upstream_file") or DEFAULT_FILE
        flavour = (case.get("params") or {}).get("flavour")
        if file not in suite.files or (flavour != suite.flavour if flavour
                                       else file in shared):
            continue
        for title in split_titles(case.get("upstream")):
            if find(title, file) is not None:
                out.setdefault((file, title), []).append(case["nodeid"])
    return out


def title_outcome(outcomes: list[str]) -> str:
    """One title's outcome from its ids' (ours): failed if any id failed, else
    passed if any passed, else xfailed if any xfailed (a known OVS bug), else
    skipped; "not run" when none of its ids has a result."""
    kinds = {OUTCOME.get(o, "failed") for o in outcomes}
    for kind in ("failed", "passed", "xfailed", "skipped"):
        if kind in kinds:
            return kind
    return "not run"


def tally(outcomes: list[str]) -> str:
    """"150 passed, 25 skipped, 0 failed": passed, skipped and failed always,
    xfailed and not run when there are any."""
    counts = {kind: outcomes.count(kind) for kind in TALLY_ORDER}
    return ", ".join(f"{counts[k]} {k}" for k in TALLY_ORDER
                     if counts[k] or k in ("passed", "skipped", "failed"))


def collected_cases(stdout: str) -> list[dict]:
    """The records bench/upstream_titles.py printed (a --collect-only run)."""
    from bench.upstream_titles import PREFIX
    return [json.loads(line[len(PREFIX):]) for line in stdout.splitlines()
            if line.startswith(PREFIX)]


def collect(select: str) -> list[dict]:
    """Every id of cases/ with an upstream marker (and -k SELECT), collected, not run."""
    argv = [str(ROOT / "ovstest"), "suite", "--collect-only", "-q", "-p", "bench.upstream_titles",
            "-m", "upstream", *(["-k", select] if select else []), "cases"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    cases = collected_cases(proc.stdout)
    if proc.returncode != 0 or not cases:
        sys.exit(f"collecting our ids failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}"
                 f"\n{proc.stderr[-2000:]}")
    return cases


@contextmanager
def hugepages(pages: int) -> Iterator[str]:
    """With no free hugepage, `pages` of the default size reserved on the host
    for the block (nr_hugepages; the kernel's, not a namespace's), and the old
    count put back after it; yields what was done, for the report."""
    meminfo = Path("/proc/meminfo").read_text()
    m = re.search(r"^HugePages_Free:\s*(\d+)", meminfo, re.M)
    free = int(m.group(1)) if m else 0
    if free or pages <= 0:
        yield f"HugePages_Free: {free}, none reserved"
        return
    knob = Path("/proc/sys/vm/nr_hugepages")
    before = knob.read_text().strip()
    knob.write_text(f"{pages}\n")
    try:
        got = knob.read_text().strip()
        yield f"HugePages_Free was 0: {got} hugepages reserved for it (nr_hugepages " \
              f"{before} -> {got}), {before} again after"
    finally:
        knob.write_text(f"{before}\n")


@dataclass
class SuiteRun:
    """One flavour testsuite: our titles in it, their numbers there, both sides."""

    target: str
    titles: dict[tuple[str, str], list[str]]  # (file, title) -> our ids
    numbers: dict[tuple[str, str], int] = field(default_factory=dict)
    unlisted: list[tuple[str, str]] = field(default_factory=list)  # not in its -l
    upstream: SealedRun | None = None
    ours_seconds: float = 0.0
    ours_summary: str = ""
    ours_outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> outcome
    note: str = ""

    @property
    def nodeids(self) -> list[str]:
        return list(dict.fromkeys(n for ids in self.titles.values() for n in ids))

    def upstream_titles(self) -> list[str]:
        results = self.upstream.results if self.upstream else {}
        return [OUTCOME.get(results.get(n, ""), "not run") for n in self.numbers.values()]

    def our_titles(self) -> list[str]:
        return [title_outcome([self.ours_outcomes[i] for i in self.titles[key]
                               if i in self.ours_outcomes]) for key in self.numbers]

    def line(self) -> str:
        files = ", ".join(f"{f} {n}" for f, n in Counter(f for f, _ in self.numbers).items())
        up = self.upstream
        up_s = up.wall if up else 0.0
        ratio = up_s / self.ours_seconds if self.ours_seconds else float("nan")
        return (f"{self.target}: {len(self.numbers)} titles ({files}); upstream "
                f"tests/{SUITE_SCRIPTS[self.target]} -j1 {up_s:.1f} s "
                f"[titles: {tally(self.upstream_titles())}; {up.verdict if up else 'not run'}]"
                f"; ours {len(self.nodeids)} ids, default concurrency, {self.ours_seconds:.1f} s "
                f"[titles: {tally(self.our_titles())}; {self.ours_summary}]; "
                f"ratio upstream/ours {ratio:.1f}x" + (f" ({self.note})" if self.note else ""))


def testsuite_listing(tree: Path, target: str) -> str:
    """`tests/SUITE -l` of the tree's source (the testsuite made there first, in the
    toolchain root, if the build never made it)."""
    script = source_of(tree) / "tests" / SUITE_SCRIPTS[target]
    if not script.is_file():
        from tooling.ovsbuild import toolchain_root, toolchain_run
        m = re.search(r"^srcdir = (.*)$", (tree / "Makefile").read_text(), re.M)
        srcdir = m.group(1).strip() if m else "."
        rc = toolchain_run(toolchain_root(), ["make", f"{srcdir}/tests/{script.name}"],
                           cwd=tree, rw=(source_of(tree), tree))
        if rc != 0 or not script.is_file():
            sys.exit(f"{script}: missing, and make did not make it (rc {rc})")
    return subprocess.run(["sh", str(script), "-l"], cwd=tree, capture_output=True, text=True,
                          check=True).stdout


def run_testsuites(tree: Path, targets: list[str], cases: list[dict], out: Path,
                   pages: int) -> list[SuiteRun]:
    """Each flavour testsuite: upstream's run of our titles, -j1 (as its make target
    runs it), then our ids of them with the default concurrency, on the tree's
    binaries; one line each."""
    runs = []
    for target in targets:
        run = SuiteRun(target, suite_cases(cases, target))
        listed = listing_numbers(testsuite_listing(tree, target))
        for key in run.titles:
            if key in listed:
                run.numbers[key] = listed[key]
            else:
                run.unlisted.append(key)
        run.numbers = dict(sorted(run.numbers.items(), key=lambda kv: kv[1]))
        run.titles = {k: run.titles[k] for k in run.numbers}
        if run.unlisted:
            print(f"{target}: not in tests/{SUITE_SCRIPTS[target]} -l, left out: "
                  + "; ".join(f"{f}: {t}" for f, t in run.unlisted), flush=True)
        if not run.numbers:
            print(f"{target}: none of our ids reproduces a test of it", flush=True)
            continue
        argv = suite_argv(tree, SUITE_SCRIPTS[target], 1, list(run.numbers.values()))
        dpdk = target == "check-dpdk"
        print(f"{target}: {len(run.numbers)} titles, upstream's run from "
              f"{time.strftime('%H:%M:%S')}", flush=True)
        before = os.getloadavg()[0]
        # Both sides on the binaries of one copy: a rebuild of the tree meanwhile
        # changes neither.
        with linked_copy(tree) as copy:
            with hugepages(pages if dpdk else 0) as note:
                run.upstream = upstream_sealed(tree, argv, SUITE_SCRIPTS[target], dpdk, copy)
            between = os.getloadavg()[0]
            run.ours_seconds, run.ours_summary, res = ours(
                run.nodeids, out / target, "auto", ("--ovs-bindir", str(copy)), gcov_env(tree))
        # The machine's 1-minute load average as each side began and ended:
        # other jobs on it slow either side.
        run.note = "; ".join(filter(None, [note if dpdk else "", (
            f"load average {before:.1f} -> {between:.1f} (upstream), "
            f"-> {os.getloadavg()[0]:.1f} (ours)")]))
        run.ours_outcomes = {c["nodeid"]: c["outcome"] for c in res["cases"]}
        print(run.line(), flush=True)
        for reason, count in failure_summary(run.upstream.failures):
            print(f"  upstream: {count} failed at {reason}", flush=True)
        runs.append(run)
    return runs


def main() -> None:
    """Time upstream's tests and ours, per upstream file, and print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream-tree", required=True, type=Path,
                    help="a configured, built OVS source tree (a copy: the testsuite writes there)")
    ap.add_argument("-k", dest="select", default="",
                    help="which of our reproductions (pytest -k); default: all of them")
    ap.add_argument("--jobs", type=int, default=1, help="parallel jobs for both sides (default 1; "
                    "check-system-userspace's files always run -j1, as upstream's make target "
                    "runs them, and ours both -n 0 and with the default concurrency beside them)")
    ap.add_argument("--from-results", type=Path, default=None, metavar="FILE",
                    help="learn which upstream tests our ids reproduce from a results.json of an "
                         "earlier run (e.g. the main job's reports/out/results.json) instead of "
                         "running them all once first; -k then selects among its ids")
    ap.add_argument("--no-serial", action="store_true",
                    help="check-system-userspace's files: ours with the default concurrency only, "
                         "not also one id at a time")
    ap.add_argument("--testsuite", action="append", default=[], metavar="TARGET",
                    help="instead: upstream's testsuite of make target TARGET "
                         f"({', '.join(FLAVOUR_TARGETS)}; repeat it, or a comma list) for the "
                         "titles our ids of its flavour reproduce, -j1, against those ids with "
                         "the default concurrency, on the tree's binaries; ids and titles from "
                         "a collection of cases/ (or --from-results)")
    ap.add_argument("--hugepages", type=int, default=DEFAULT_HUGEPAGES, metavar="N",
                    help="check-dpdk: when the host has no free hugepage, reserve N (of the "
                         "default size) for upstream's run and give them back after it "
                         f"(default {DEFAULT_HUGEPAGES}; 0: leave the host alone, and upstream's "
                         "OVS_DPDK_PRE_CHECK skips every test that calls it)")
    args = ap.parse_args()
    tree = args.upstream_tree.resolve()
    if not (tree / "tests" / "atconfig").is_file() or not (tree / "vswitchd" / "ovs-vswitchd").is_file():
        sys.exit(f"{tree}: not a built OVS tree (tests/atconfig, vswitchd/ovs-vswitchd)")
    targets = [t for arg in args.testsuite for t in arg.split(",") if t]
    if any(t not in FLAVOUR_TARGETS for t in targets):
        sys.exit(f"--testsuite: one of {', '.join(FLAVOUR_TARGETS)}, not {targets}")
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ovstest-ratio-", dir=ROOT / "build") as tmp:
        out = Path(tmp)
        if targets:
            cases = selected(json.loads(args.from_results.read_text())["cases"], args.select) \
                if args.from_results else collect(args.select)
            print(f"ours: ids and titles from {args.from_results or 'a collection of cases/'}",
                  flush=True)
            run_testsuites(tree, targets, cases, out, args.hugepages)
            return
        if args.from_results:
            results = json.loads(args.from_results.read_text())
            results["cases"] = selected(results["cases"], args.select)
            runs = discover(results)
            print(f"ours: ids and titles from {args.from_results}")
        else:
            select = ["-m", "upstream", *(["-k", args.select] if args.select else []), "cases"]
            wall_all, last, results = ours(select, out / "all", "auto")
            runs = discover(results)
            print(f"ours, every selected id in one run: {wall_all:.1f} s ({last})")
        for run in runs.values():
            suite = suite_of(run.file)
            run.upstream_seconds, run.upstream_summary = upstream(tree, run.numbers, args.jobs,
                                                                  suite)
            own = ("--ovs-bindir", str(tree)) if suite == SYSTEM_SUITE else ()
            env = gcov_env(tree) if suite == SYSTEM_SUITE else None
            workers = "auto" if suite == SYSTEM_SUITE else str(args.jobs if args.jobs > 1 else 0)
            run.ours_seconds, run.ours_summary, res = ours(run.nodeids, out / run.file, workers, own,
                                                           env)
            if suite == SYSTEM_SUITE and not args.no_serial:
                run.serial_seconds = ours(run.nodeids, out / f"{run.file}-serial", "0", own,
                                          env)[0]
            run.ours_steps = sum(len(c.get("steps", [])) for c in res["cases"])
            report(run)
    total_up = sum(r.upstream_seconds for r in runs.values())
    total_ours = sum(r.ours_seconds for r in runs.values())
    print(f"overall: upstream {total_up:.1f} s for {sum(len(r.numbers) for r in runs.values())} "
          f"tests, ours {total_ours:.1f} s for {sum(len(r.nodeids) for r in runs.values())} ids "
          f"(-j{args.jobs}; check-system-userspace's files -j1 upstream, concurrent here): "
          f"ratio upstream/ours = {total_up / total_ours if total_ours else float('nan'):.1f}x")
    system = [r for r in runs.values() if suite_of(r.file) == SYSTEM_SUITE]
    if system:
        up = sum(r.upstream_seconds for r in system)
        conc, serial = sum(r.ours_seconds for r in system), sum(r.serial_seconds for r in system)
        alone = (f"ours one id at a time {serial:.1f} s ({up / serial:.1f}x), " if serial
                 else "")
        print(f"check-system-userspace: upstream -j1 {up:.1f} s; {alone}concurrent "
              f"{conc:.1f} s ({up / conc if conc else float('nan'):.1f}x)")


def report(run: FileRun) -> None:
    """Print one file's line: test counts, both wall times, and their ratio."""
    ratio = run.upstream_seconds / run.ours_seconds if run.ours_seconds else float("nan")
    print(f"{run.file}: {len(run.numbers)} upstream tests "
          f"({run.numbers[0]}-{run.numbers[-1]}), upstream {run.upstream_seconds:.1f} s "
          f"[{run.upstream_summary}]; ours {len(run.nodeids)} ids {run.ours_seconds:.1f} s "
          f"[{run.ours_summary}; {run.ours_steps} send-and-compare steps]; "
          f"ratio {ratio:.1f}x" + (f"; ours one id at a time {run.serial_seconds:.1f} s"
                                   if run.serial_seconds else ""))


if __name__ == "__main__":
    main()
