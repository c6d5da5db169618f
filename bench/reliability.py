"""Reliability figures: interrupted runs, parallel runs, concurrent runs.

    python3 bench/reliability.py [--interrupts 50] [--xdist 10] [--select EXPR]

Runs ./ovstest on the host and prints, for each scenario, how many runs left
something behind (processes, network namespaces, links, mounts), how many
wrote a report that claims results it does not hold, and how many corrupted
another run's output:

1. runs interrupted at a random point by SIGINT (to the process group, as
   Ctrl-C), SIGTERM or SIGKILL (to the launcher alone);
2. runs with `-n 2` (pytest-xdist);
3. two runs at once on the same checkout, each with its own --out-dir.

It asserts nothing; it prints figures.  Needs root (the sealed runtime).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAEMONS = ("ovs-vswitchd", "ovsdb-server", "dpdk-testpmd", "iperf3", "tshark", "ovs-ofctl")


def snapshot() -> set[str]:
    """What a run could leave on the host: processes, namespaces, links, mounts."""
    found: set[str] = set()
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if any(d in args for d in DAEMONS) or args.startswith("unshare "):
            found.add(f"process {pid} {args[:150]}")
    for cmd, kind in ((["ip", "netns", "list"], "netns"), (["ip", "-o", "link", "show"], "link")):
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        for line in out.splitlines():
            name = line.split(":")[1].strip().split("@")[0] if kind == "link" else line.split()[0]
            found.add(f"{kind} {name}")
    for line in Path("/proc/mounts").read_text().splitlines():
        mount = line.split()[1]
        if "runtime-" in mount or mount.endswith("/src"):
            found.add(f"mount {mount}")
    return found


def leftovers(before: set[str], out_dir: Path, settle: float = 10.0) -> list[str]:
    """What appeared since `before` and is this run's (it names its out dir), or
    is a namespace, link or mount (the host has none of those of its own)."""
    deadline = time.monotonic() + settle
    while True:
        new = sorted(snapshot() - before)
        mine = [n for n in new if str(out_dir) in n or not n.startswith("process")]
        if not mine or time.monotonic() > deadline:
            return mine
        time.sleep(0.2)


def report_problems(out_dir: Path) -> list[str]:
    """A report that claims results it does not hold: results.json unreadable,
    or disagreeing with junit.xml, or an index without results."""
    results, junit, index = (out_dir / n for n in ("results.json", "junit.xml", "index.html"))
    problems: list[str] = []
    cases = None
    if results.exists():
        try:
            data = json.loads(results.read_text())
            cases = {c["nodeid"]: c["outcome"] for c in data["cases"]}
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"results.json unreadable: {exc}")
        if cases is not None and any(o == "unknown" for o in cases.values()):
            problems.append("results.json holds cases without an outcome")
    elif index.exists():
        problems.append("index.html without results.json")
    if junit.exists() and cases is not None:
        try:
            n = len(ET.parse(junit).getroot().findall(".//testcase"))
        except ET.ParseError as exc:
            problems.append(f"junit.xml unreadable: {exc}")
        else:
            ran = sum(1 for o in cases.values() if o != "deselected")
            if n != ran:
                problems.append(f"junit.xml has {n} test cases, results.json {ran}")
    return problems


def ovstest(args: list[str], out_dir: Path) -> subprocess.Popen[bytes]:
    """Start `./ovstest suite` in a session of its own, output discarded."""
    return subprocess.Popen(
        [str(ROOT / "ovstest"), "suite", "-q", "-p", "no:cacheprovider",
         f"--out-dir={out_dir}", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def interrupted(n: int, select: list[str], seed: int) -> dict[str, int]:
    """Interrupt `n` runs with SIGINT, SIGTERM or SIGKILL in turn at a random moment; tally
    what each left behind."""
    rng = random.Random(seed)
    tally = {"runs": 0, "left behind": 0, "bad reports": 0}
    signals = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
    for i in range(n):
        sig = signals[i % 3]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            before = snapshot()
            proc = ovstest(select, out)
            time.sleep(rng.uniform(0.5, 8.0))
            if sig == signal.SIGINT:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            left = leftovers(before, out)
            bad = report_problems(out)
            tally["runs"] += 1
            tally["left behind"] += bool(left)
            tally["bad reports"] += bool(bad)
            for line in left + bad:
                print(f"  run {i} ({sig.name}): {line}")
    return tally


def parallel(n: int, select: list[str]) -> dict[str, int]:
    """Run the selection `n` times under pytest -n 2; tally failures and what each left
    behind."""
    tally = {"runs": 0, "left behind": 0, "bad reports": 0, "failed": 0}
    for i in range(n):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            before = snapshot()
            rc = ovstest(["-n", "2", *select], out).wait()
            left, bad = leftovers(before, out), report_problems(out)
            tally["runs"] += 1
            tally["left behind"] += bool(left)
            tally["bad reports"] += bool(bad)
            tally["failed"] += rc not in (0,)
            for line in left + bad:
                print(f"  xdist run {i}: {line}")
    return tally


def concurrent(select: list[str]) -> dict[str, int]:
    """Two runs at once, each with its own output directory; tally what they did to each
    other."""
    tally = {"runs": 2, "left behind": 0, "bad reports": 0, "corrupted": 0, "failed": 0}
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / "a", Path(tmp) / "b"]
        before = snapshot()
        procs = [ovstest(select, out) for out in outs]
        codes = [p.wait() for p in procs]
        for out, rc in zip(outs, codes):
            tally["failed"] += rc != 0
            tally["left behind"] += bool(leftovers(before, out))
            bad = report_problems(out)
            tally["bad reports"] += bool(bad)
            for line in bad:
                print(f"  concurrent {out.name}: {line}")
        ids = []
        for out in outs:
            try:
                ids.append({c["nodeid"] for c in json.loads((out / "results.json").read_text())
                            ["cases"]})
            except (OSError, ValueError, KeyError):
                ids.append(set())
        tally["corrupted"] = int(ids[0] != ids[1] or not ids[0])
    return tally


def main() -> int:
    """Run the three trials and print their tallies (as root: inside the sealed runtime)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interrupts", type=int, default=50)
    ap.add_argument("--xdist", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--select",
                    default="cases/dpif_netdev/test_csum_offload.py "
                            "cases/dpif_netdev/test_tunnel_upstream.py",
                    help="what each run runs (pytest arguments)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("reliability: needs root (the sealed runtime)", file=sys.stderr)
        return 2
    select = args.select.split()
    started = time.monotonic()
    for name, tally in (("interrupted (SIGINT, SIGTERM, SIGKILL)",
                         interrupted(args.interrupts, select, args.seed)),
                        ("xdist -n 2", parallel(args.xdist, select)),
                        ("two runs at once", concurrent(select))):
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    print(f"reliability: {time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
