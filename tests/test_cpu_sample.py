"""bench/cpu_sample.py's pure parts: a thread's stat line, its group name and role,
and the sampler on a child of this process."""
from __future__ import annotations

import os
import select
import subprocess
import sys

from bench.cpu_sample import Sampler, fold, parse_stat, role


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
    sampler has taken its first sample (a line on its stdin), since the sampler
    counts from what it saw first (started at once, it had spent 0.11 s before
    that on CI's loaded machine: 0.39 counted); and it says when it is done (a
    line on its stdout), the event the sampling waits for: /proc's ticks are
    truncated per field, so 0.5 s of CPU can read 0.49 and never reach 0.5."""
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys, time\nsys.stdin.readline()\n"
                              "t = time.process_time()\n"
                              "while time.process_time() - t < 0.5: pass\n"
                              "print('done', flush=True)\nsys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    s = Sampler(child.pid)
    s.sample()
    child.stdin.write(b"go\n")
    child.stdin.flush()
    try:
        while not select.select([child.stdout], [], [], 0.05)[0]:  # until it is done
            s.sample()
        assert child.stdout.readline() == b"done\n"
    finally:
        s.sample()
        child.communicate(b"")
    ours = s.totals()["ours"]
    assert 0.4 <= sum(ours.values()) <= 2.0, ours
    assert all(k.startswith("other ") for k in ours)
    assert not any(key[0] == os.getpid() for key in s.ours)
