"""bench/cpu_sample.py's pure parts: a thread's stat line, its group name and role,
and the sampler on a child of this process."""
from __future__ import annotations

import os
import subprocess
import sys

from bench.cpu_sample import TICK, Sampler, fold, parse_stat, role


def test_stat_line_with_a_comm_that_holds_spaces_and_parens() -> None:
    """comm is everything between the first '(' and the last ')'; utime (14),
    stime (15) and starttime (22) count from there."""
    rest = " ".join(str(n) for n in range(3, 53))  # field k holds k
    t = parse_stat(f"4242 (a (b) c) {rest.replace('3', 'S', 1)}")
    assert (t.tid, t.comm, t.ppid, t.ticks, t.start) == (4242, "a (b) c", 4, 14 + 15, 22)


def test_names_fold_digits_and_roles_follow_the_process() -> None:
    assert fold("pmd-c01/id:8") == "pmd-c*/id:*"
    assert fold("revalidator12") == "revalidator*"
    assert (role("ovs-vswitchd"), role("ovs-vswitchd-dp")) == ("ovs-vswitchd", "ovs-vswitchd-dp")
    assert role("python3") == "other"


def test_sampler_counts_a_busy_child_as_ours() -> None:
    """A child that burns half a second of CPU is ours, with about that much;
    the sampler's own process is not.  The child starts burning only once the
    sampler has taken its first sample (a line on its stdin): the sampler counts
    from what it saw first, and on a loaded machine a child started burning at
    once had spent 0.11 s before that (CI: 0.39 counted)."""
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys, time\nsys.stdin.readline()\n"
                              "t = time.process_time()\n"
                              "while time.process_time() - t < 0.5: pass\n"
                              "sys.stdin.read()"], stdin=subprocess.PIPE)
    assert child.stdin is not None
    s = Sampler(child.pid)

    def ticks() -> int:
        with open(f"/proc/{child.pid}/stat") as f:
            return parse_stat(f.read()).ticks

    s.sample()
    base = ticks()
    child.stdin.write(b"go\n")
    child.stdin.flush()
    try:
        while (ticks() - base) / TICK < 0.5:  # until the child has spent its half second
            s.sample()
    finally:
        s.sample()
        child.communicate(b"")
    ours = s.totals()["ours"]
    assert 0.4 <= sum(ours.values()) <= 2.0, ours
    assert all(k.startswith("other ") for k in ours)
    assert not any(key[0] == os.getpid() for key in s.ours)
