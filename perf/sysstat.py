"""CPU time from /proc: per thread of a process, and per machine.

Thread times come from /proc/PID/task/TID/stat (utime + stime, in clock
ticks: 10 ms at 100 Hz, so a 2 s window is good to about half a percent).
The machine's times come from the first line of /proc/stat, which counts every
process on the host, also those outside this run's PID namespace: what is busy
there and not ours is `foreign` load (other jobs on a shared machine, and the
hypervisor's steal time).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable

TICK = 1.0 / os.sysconf("SC_CLK_TCK")


def parse_task_stat(text: str) -> tuple[str, float]:
    """(comm, CPU seconds) from one /proc/.../stat line; comm may hold spaces and
    parentheses, so it is cut at the last ')'."""
    start, end = text.index("("), text.rindex(")")
    fields = text[end + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return text[start + 1:end], (int(fields[11]) + int(fields[12])) * TICK


def thread_times(pid: int) -> dict[int, tuple[str, float]]:
    """{tid: (thread name, CPU seconds so far)} of a live process ({} if it is gone)."""
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="utf-8",
                      errors="replace") as f:
                out[int(tid)] = parse_task_stat(f.read())
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return out


def group_delta(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                classify: Callable[[str], str]) -> dict[str, float]:
    """CPU seconds per class of thread between two thread_times() snapshots.
    A thread born in between counts from zero."""
    out: dict[str, float] = {}
    for tid, (comm, t1) in after.items():
        t0 = before.get(tid, (comm, 0.0))[1]
        key = classify(comm)
        out[key] = out.get(key, 0.0) + max(0.0, t1 - t0)
    return out


def ovs_thread_class(comm: str) -> str:
    """'pmd' for ovs-vswitchd's PMD threads (pmd-c00/id:7), 'other' for the rest."""
    return "pmd" if comm.startswith("pmd") else "other"


@dataclass(frozen=True)
class MachineTimes:
    """Seconds of CPU time of the whole machine, summed over its CPUs."""

    busy: float  # user, nice, system, irq, softirq
    softirq: float
    steal: float
    idle: float  # idle and iowait

    def minus(self, earlier: "MachineTimes") -> "MachineTimes":
        return MachineTimes(self.busy - earlier.busy, self.softirq - earlier.softirq,
                            self.steal - earlier.steal, self.idle - earlier.idle)


def parse_proc_stat(text: str) -> MachineTimes:
    """The machine's CPU seconds from /proc/stat's text."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) * TICK for x in line.split()[1:]]
            v += [0.0] * (10 - len(v))
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            return MachineTimes(user + nice + system + irq + softirq, softirq, steal,
                                idle + iowait)
    raise ValueError("no 'cpu ' line in /proc/stat")


def machine_times() -> MachineTimes:
    """The machine's CPU seconds now."""
    with open("/proc/stat", encoding="utf-8") as f:
        return parse_proc_stat(f.read())


def pin_threads(pid: int, cpus: Iterable[int], skip: Callable[[str], bool]) -> list[str]:
    """Set the CPU affinity of every thread of `pid` whose name `skip` does not
    select; returns the names of the threads pinned."""
    pinned: list[str] = []
    for tid, (comm, _) in thread_times(pid).items():
        if skip(comm):
            continue
        try:
            os.sched_setaffinity(tid, set(cpus))
            pinned.append(comm)
        except OSError:
            continue
    return pinned


BPFFS = "/sys/fs/bpf"


def bpffs_mounted(mounts_text: str, path: str = BPFFS) -> bool:
    """Whether /proc/mounts' text has bpffs on `path`."""
    return any(line.split()[1:3] == [path, "bpf"] for line in mounts_text.splitlines()
               if len(line.split()) >= 3)


def ensure_bpffs() -> str:
    """Mount bpffs on /sys/fs/bpf where it is missing (AF_XDP's libxdp pins its
    programs there).  Only inside the sealed runtime, whose mount namespace is
    private and goes with the run; elsewhere the host's own mounts are left
    alone.  Returns what was done, in words."""
    import ctypes
    with open("/proc/mounts", encoding="utf-8") as f:
        if bpffs_mounted(f.read()):
            return "bpffs already mounted on /sys/fs/bpf"
    if not os.environ.get("OVSTEST_SEALED"):
        return "bpffs is not mounted on /sys/fs/bpf (left alone outside the sealed runtime)"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"bpf", BPFFS.encode(), b"bpf", 0, None) != 0:
        err = ctypes.get_errno()
        return f"could not mount bpffs on {BPFFS}: {os.strerror(err)}"
    return f"mounted bpffs on {BPFFS} (in the run's own mount namespace)"
