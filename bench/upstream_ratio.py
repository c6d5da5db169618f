"""Speed against upstream: ./ovstest bench --upstream-tree DIR [-k EXPR] [--jobs N].

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
flavour is check-system-tso).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.system_userspace import SYSTEM_USERSPACE  # noqa: E402  (stdlib only)
from harness.upstream import DEFAULT_FILE, MAIN_SUITE_FILES, find  # noqa: E402

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


def ours(nodeids_or_args: list[str], out: Path, workers: str, extra: tuple[str, ...] = ()
         ) -> tuple[float, str, dict]:
    """Run `./ovstest suite -n WORKERS` on these ids ("0": one after another, "auto":
    the default concurrency); (wall seconds, pytest's last line, results)."""
    rel = out.relative_to(ROOT)  # the sealed runtime sees the checkout only
    argv = [str(ROOT / "ovstest"), "suite", "-q", f"--out-dir={rel}", *extra,
            "-n", workers, *nodeids_or_args]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
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


def verdict_of(stdout: str, rc: int) -> str:
    """The testsuite's verdict lines (or its exit status when it printed none)."""
    verdict = [ln for ln in stdout.splitlines()
               if re.search(r"tests? (were|was) (successful|run|skipped)|failed", ln)]
    return "; ".join(verdict) or f"rc {rc}"


def upstream(tree: Path, numbers: list[int], jobs: int, suite: str = "testsuite"
             ) -> tuple[float, str]:
    """Upstream's testsuite for these test numbers; (wall seconds, its verdict line)."""
    script = source_of(tree) / "tests" / suite
    # check-system-userspace runs -j1 whatever TESTSUITEFLAGS say (tests/automake.mk):
    # its tests share the namespace they run in (ovs-netdev, at_ns0, ovs-p0, ...).
    argv = ["sh", str(script), "-C", "tests", f"AUTOTEST_PATH={AUTOTEST_PATH}",
            f"-j{1 if suite == SYSTEM_SUITE else jobs}", *map(str, numbers)]
    if suite == SYSTEM_SUITE:
        return upstream_sealed(tree, argv)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=tree, capture_output=True, text=True)
    return time.perf_counter() - started, verdict_of(proc.stdout, proc.returncode)


def upstream_sealed(tree: Path, argv: list[str]) -> tuple[float, str]:
    """check-system-userspace sealed in the runtime root, in a hard-linked copy of
    the build directory beside it (its relative paths to the source hold).

    A test can end the testsuite itself: "datapath - ping over vxlan tunnel"
    and its vxlan6 twin get SIGTERM during their cleanup here ("caught signal
    TERM, bailing out": the signal goes to the testsuite's whole process
    group), and the make target would stop there.  The run then
    goes on with the tests after that one, in a new invocation, as if the
    target had been restarted; the time of every invocation counts, and the
    verdict names the tests that ended it."""
    from harness.runtime import provision, sealed_argv
    copy = Path(tempfile.mkdtemp(prefix=f"{tree.name}-ratio-", dir=tree.parent))
    numbers = [int(a) for a in argv if a.isdigit()]
    head = [a for a in argv if not a.isdigit()]
    wall, verdicts, failed, ended = 0.0, [], [], []
    try:
        subprocess.run(["cp", "-al", f"{tree}/.", str(copy)], check=True)
        # The runtime's Python runs upstream's helpers (test-l7.py), not the one
        # configure found on the host; a new file, not a write through the link.
        atlocal = copy / "tests" / "atlocal"
        text = re.sub(r"^PYTHON3=.*$", "PYTHON3='/usr/bin/python3'", atlocal.read_text(),
                      flags=re.M)
        atlocal.unlink()
        atlocal.write_text(text)
        runtime_python(copy)
        root = provision()
        log = copy / "tests" / f"{SYSTEM_SUITE}.log"
        while numbers:
            inner = ["/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(copy), *head,
                     *map(str, numbers)]
            # ro: the source, and the build itself (its libtool wrappers name its libraries)
            sealed, env = sealed_argv(root, inner, ro=(source_of(tree), tree), rw=(copy,))
            started = time.perf_counter()
            # Its own process group: the signal that ends the testsuite goes to
            # the whole group it runs in, which would otherwise be ours.
            proc = subprocess.run(sealed, env=env, capture_output=True, text=True,
                                  start_new_session=True)
            wall += time.perf_counter() - started
            text = log.read_text(errors="replace") if log.is_file() else ""
            failed += re.findall(r"^\s*(\d+)\. .*: FAILED", text, re.M)
            if "bailing out" not in text:
                verdicts.append(verdict_of(proc.stdout, proc.returncode))
                break
            # -j1 runs the tests in order: every test up to the last one that
            # started ran (a result line, or the directory a failed or
            # interrupted test leaves behind; at-groups/ lists them all before
            # they run), and that one ended the testsuite.
            rundir = copy / "tests" / f"{SYSTEM_SUITE}.dir"
            begun = {int(n) for n in re.findall(r"^\s*(\d+)\. ", text, re.M)} | \
                {int(d.name) for d in rundir.iterdir() if d.name.isdigit()}
            last = max((n for n in begun if n in numbers), default=numbers[0])
            ended.append(last)
            numbers = [n for n in numbers if n > last]
        return wall, "; ".join(verdicts) + \
            (f" (failed: {' '.join(failed)})" if failed else "") + \
            (f" (ended the testsuite, rerun from the next test: {' '.join(map(str, ended))})"
             if ended else "")
    finally:
        subprocess.run(["rm", "-rf", str(copy)], check=False)


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


def discover(results: dict) -> dict[str, FileRun]:
    """Per upstream file: the test numbers our ids reproduce, and those ids."""
    runs: dict[str, FileRun] = {}
    for case in results["cases"]:
        titles = [t.strip() for t in (case.get("upstream") or "").split(";") if t.strip()]
        file = case.get("upstream_file") or DEFAULT_FILE
        if file not in MAIN_SUITE_FILES and file not in SYSTEM_USERSPACE:
            continue  # another testsuite (system-dpdk.at, system-afxdp.at)
        if file in SYSTEM_USERSPACE and "[tso" in case["nodeid"]:
            continue  # check-system-tso's flavour
        tests = [find(t, file) for t in titles]
        if not titles or any(t is None for t in tests):
            continue
        run = runs.setdefault(file, FileRun(file))
        run.numbers += [t.number for t in tests if t is not None and t.number not in run.numbers]
        run.nodeids.append(case["nodeid"])
    for run in runs.values():
        run.numbers.sort()
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
    args = ap.parse_args()
    tree = args.upstream_tree.resolve()
    if not (tree / "tests" / "atconfig").is_file() or not (tree / "vswitchd" / "ovs-vswitchd").is_file():
        sys.exit(f"{tree}: not a built OVS tree (tests/atconfig, vswitchd/ovs-vswitchd)")
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ovstest-ratio-", dir=ROOT / "build") as tmp:
        out = Path(tmp)
        if args.from_results:
            results = json.loads(args.from_results.read_text())
            words = [w for w in re.split(r"\W+", args.select) if w not in ("", "or", "and", "not")]
            if words:  # a plain -k "a or b" of module or test names
                results["cases"] = [c for c in results["cases"]
                                    if any(w in c["nodeid"] for w in words)]
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
            workers = "auto" if suite == SYSTEM_SUITE else str(args.jobs if args.jobs > 1 else 0)
            run.ours_seconds, run.ours_summary, res = ours(run.nodeids, out / run.file, workers, own)
            if suite == SYSTEM_SUITE and not args.no_serial:
                run.serial_seconds = ours(run.nodeids, out / f"{run.file}-serial", "0", own)[0]
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
