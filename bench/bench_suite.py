"""Benchmarks that print figures (no assertions): run with `./ovstest bench`.

1. sandbox start + stop, median of N;
2. one send-capture-compare step (send_and_expect) on p1 -> br1 -> p2, median and p95;
3. the reproduced upstream cases under pytest: per-case median and wall time;
   with --upstream-seconds S (upstream's wall time for the same tests on this
   machine, measured separately) also the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datapath import model  # noqa: E402
from datapath.backends.dummy import DummyPort  # noqa: E402
from datapath.expect import send_and_expect  # noqa: E402
from datapath.model.actions import mod_tp_dst, ofctl_actions, output  # noqa: E402
from datapath.offloads import CsumState, RxFlags, TxOffloads  # noqa: E402
from evidence.tshark import Tshark, TsharkError  # noqa: E402
from fixtures.frames import compose  # noqa: E402
from harness.install import OvsInstall  # noqa: E402
from harness.sandbox import Sandbox  # noqa: E402


def pct(values: list[float], q: float) -> float:
    """The q-quantile of `values` (0.5 the median, 0.95 the p95): the sorted value at q*n."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_sandbox(install: OvsInstall, n: int) -> list[float]:
    """Seconds to start a sandbox, add a bridge and stop it, `n` times."""
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            t0 = time.perf_counter()
            sb = Sandbox(install, Path(tmp) / f"r{i}").start()
            sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy")
            sb.stop()
            times.append(time.perf_counter() - t0)
    return times


def bench_step(install: OvsInstall, n: int, tshark: Tshark | None = None) -> list[float]:
    """Seconds of one send_and_expect step (p1 -> br1 -> p2, tcp_dst rewritten), `n` times."""
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        sb = Sandbox(install, Path(tmp) / "run").start()
        try:
            sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy")
            p1, p2 = DummyPort(sb, "br1", "p1", 1), DummyPort(sb, "br1", "p2", 2)
            actions = [mod_tp_dst(2222), output("p2")]
            sb.ofctl("add-flow", "br1", f"in_port=p1,tcp,actions={ofctl_actions(actions)}")
            rx, tx = RxFlags(l4=CsumState.PARTIAL), TxOffloads()
            p1.configure(rx=rx)
            frame = compose("tcp", 4)
            for _ in range(n):
                t0 = time.perf_counter()
                send_and_expect(p1, [frame], p2, model.forward(frame, actions, tx, rx),
                                second_opinion=tshark)
                times.append(time.perf_counter() - t0)
        finally:
            sb.stop()
    return times


def bench_cases(out: Path, select: str) -> tuple[float, list[float], int]:
    """Run the upstream-marked cases under pytest: wall time, per-case durations, id count."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "cases", "-m", "upstream", "-k", select, f"--out-dir={out}"],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        raise SystemExit(f"the cases failed (rc {proc.returncode}); no figures")
    data = json.loads((out / "results.json").read_text())
    durations = [c["duration"] for c in data["cases"]]
    return wall, durations, len(durations)


def main() -> None:
    """Print the three benchmarks' figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="steps to time")
    ap.add_argument("--upstream-seconds", type=float,
                    help="upstream autotest wall time for the same tests, for the ratio")
    ap.add_argument("-k", dest="select", default="not tunnel and not tso and not vxlan",
                    help="which reproduced upstream cases to time (pytest -k); the default is "
                         "the non-tunnel, non-TSO ones (upstream tests 1093, 1114, 1116-1121)")
    args = ap.parse_args()
    install = OvsInstall.locate(os.environ.get("OVS_BINDIR"),
                                chosen_by=os.environ.get("OVSTEST_OVS_CHOSEN", ""))
    print(f"ovs: {install.describe()}; {len(install.dummy_options)} netdev-dummy offload options")
    sb = bench_sandbox(install, 20)
    print(f"sandbox start+bridge+stop: median {statistics.median(sb) * 1000:.1f} ms, "
          f"p95 {pct(sb, .95) * 1000:.1f} ms (n={len(sb)})")
    st = bench_step(install, args.n)
    print(f"send-capture-compare step: median {statistics.median(st) * 1000:.2f} ms, "
          f"p95 {pct(st, .95) * 1000:.2f} ms (n={len(st)})")
    try:
        checker = Tshark()
    except TsharkError as exc:
        print(f"step with tshark second opinion: not measured ({exc})")
    else:
        st = bench_step(install, args.n, checker)
        checker.close()
        print(f"step with tshark second opinion: median {statistics.median(st) * 1000:.2f} ms, "
              f"p95 {pct(st, .95) * 1000:.2f} ms (n={len(st)})")
    with tempfile.TemporaryDirectory() as tmp:
        wall, durations, count = bench_cases(Path(tmp), args.select)
    print(f"reproduced upstream cases: {count} ids, wall {wall:.1f} s, per-case median "
          f"{statistics.median(durations) * 1000:.0f} ms, max {max(durations) * 1000:.0f} ms")
    if args.upstream_seconds:
        print(f"upstream autotest for the same tests: {args.upstream_seconds:.1f} s; "
              f"ratio upstream/ours = {args.upstream_seconds / wall:.1f}x")


if __name__ == "__main__":
    main()
