"""CPU-seconds of a command's threads, grouped by thread name: a sampler over
/proc/*/task/*/stat, for work whose wall time depends on the machine's load.

    python3 bench/cpu_sample.py [--interval S] [--json FILE] -- COMMAND...

Stdlib only: it runs on the host, around `./ovstest ...`.  Every `interval`
seconds it reads utime+stime of every thread on the machine.  A thread is the
command's when its process descends from the command or shares the PID
namespace of one that does (the launcher's seal: unshare --pid); the others
(kernel threads, other jobs) are summed apart.  A thread's CPU is its last
sample minus its first (0 for one born after the sampling began), so what a
thread burns after its last sample is lost: at most one interval each.
Threads are grouped by name with digits folded (`pmd-c01/id:8` -> `pmd-c*/id:*`)
and by role: the process's name for a thread of ovs-vswitchd (the plain
build's `ovs-vswitchd`, the DPDK build's `ovs-vswitchd-dp`), else `other`.
The machine's own total (/proc/stat) is printed beside, so what the sampler
missed shows.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")
HOST_NS = os.readlink("/proc/self/ns/pid")  # the sampler's own: not the seal's


@dataclass(frozen=True)
class Task:
    """One thread's line of /proc/PID/task/TID/stat, the fields used here."""

    tid: int
    comm: str
    ppid: int
    ticks: int  # utime + stime
    start: int  # starttime, ticks since boot


def parse_stat(text: str) -> Task:
    """A stat line: `tid (comm) state ppid ...`; comm may hold spaces and ')'."""
    head, _, rest = text.rpartition(")")
    tid, _, comm = head.partition(" (")
    f = rest.split()
    # rest starts at field 3 (state): utime is field 14, stime 15, starttime 22.
    return Task(int(tid), comm, int(f[1]), int(f[11]) + int(f[12]), int(f[19]))


def fold(comm: str) -> str:
    """A thread name with its digits folded, so that instances group."""
    return re.sub(r"\d+", "*", comm)


def role(leader_comm: str) -> str:
    """The process's name for ovs-vswitchd's threads (`ovs-vswitchd`, or
    `ovs-vswitchd-dp`: the DPDK build's, cut to 15 characters), else `other`."""
    return leader_comm if leader_comm.startswith("ovs-vswitchd") else "other"


def machine_ticks() -> tuple[int, int]:
    """(busy, idle) ticks of the machine since boot, /proc/stat's cpu line."""
    f = [int(x) for x in PROC.joinpath("stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + f[4]  # idle, iowait
    return sum(f[:8]) - idle, idle


@dataclass
class Sampler:
    """The samples: each thread's first and last ticks, its group, and whether it is ours."""

    root: int  # the command's pid
    first: dict[tuple[int, int], int] = field(default_factory=dict)  # (tid, start) -> ticks
    last: dict[tuple[int, int], int] = field(default_factory=dict)
    group: dict[tuple[int, int], tuple[str, str, int]] = field(default_factory=dict)
    ours: set[tuple[int, int]] = field(default_factory=set)
    our_ns: set[str] = field(default_factory=set)
    began: int = 0  # ticks since boot at the first sample
    samples: int = 0

    def sample(self) -> None:
        now_ticks = int(float(PROC.joinpath("uptime").read_text().split()[0]) * TICK)
        if not self.samples:
            self.began = now_ticks
        self.samples += 1
        parent: dict[int, int] = {}
        leader: dict[int, str] = {}
        pidns: dict[int, str] = {}
        tasks: list[tuple[int, Task]] = []
        for pdir in PROC.iterdir():
            if not pdir.name.isdigit():
                continue
            pid = int(pdir.name)
            try:
                lead = parse_stat((pdir / "stat").read_text())
                pidns[pid] = os.readlink(pdir / "ns" / "pid")
                parent[pid], leader[pid] = lead.ppid, lead.comm
                for tdir in (pdir / "task").iterdir():
                    tasks.append((pid, parse_stat((tdir / "stat").read_text())))
            except (OSError, ValueError, IndexError):
                continue  # gone while read
        for pid in parent:
            p, seen = pid, 0
            while p > 1 and seen < 64:
                if p == self.root:
                    if pidns.get(pid) not in (None, HOST_NS):  # the seal's
                        self.our_ns.add(pidns[pid])
                    break
                p, seen = parent.get(p, 0), seen + 1
        for pid, t in tasks:
            key = (t.tid, t.start)
            if key not in self.first:
                self.first[key] = t.ticks if t.start < self.began else 0
                mine = pidns.get(pid) in self.our_ns or self._descends(pid, parent)
                if mine:
                    self.ours.add(key)
                self.group[key] = (role(leader.get(pid, "")), fold(t.comm), pid)
            self.last[key] = t.ticks

    def _descends(self, pid: int, parent: dict[int, int]) -> bool:
        p, seen = pid, 0
        while p > 1 and seen < 64:
            if p == self.root:
                return True
            p, seen = parent.get(p, 0), seen + 1
        return False

    def totals(self) -> dict[str, dict[str, float]]:
        """CPU-s by 'role comm' for ours, and by comm for the rest ('elsewhere')."""
        out: dict[str, dict[str, float]] = {"ours": defaultdict(float),
                                             "elsewhere": defaultdict(float)}
        for key, ticks in self.last.items():
            r, comm, _ = self.group[key]
            side = "ours" if key in self.ours else "elsewhere"
            name = f"{r} {comm}" if side == "ours" else comm
            out[side][name] += (ticks - self.first[key]) / TICK
        return {k: dict(v) for k, v in out.items()}

    def processes(self) -> dict[str, int]:
        """How many processes of ours each thread-group name had (vswitchd starts)."""
        seen: dict[str, set[int]] = defaultdict(set)
        for key in self.ours:
            r, comm, pid = self.group[key]
            if key[0] == pid:
                seen[f"{r} {comm}"].add(pid)
        return {k: len(v) for k, v in seen.items()}


def main(argv: list[str]) -> int:
    """Run the command, sampling; print the CPU-s (and write --json); its exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command")
    busy0, idle0 = machine_ticks()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd)
    s = Sampler(proc.pid)
    while proc.poll() is None:
        s.sample()
        time.sleep(args.interval)
    s.sample()
    wall = time.monotonic() - t0
    busy1, idle1 = machine_ticks()
    totals = s.totals()
    ours = totals["ours"]
    vsw = sum(v for k, v in ours.items() if k.startswith("ovs-vswitchd"))
    result = {
        "command": cmd, "rc": proc.returncode, "wall_s": round(wall, 1),
        "machine_busy_cpu_s": round((busy1 - busy0) / TICK, 1),
        "machine_idle_cpu_s": round((idle1 - idle0) / TICK, 1),
        "ours_cpu_s": round(sum(ours.values()), 1), "vswitchd_cpu_s": round(vsw, 1),
        "elsewhere_cpu_s": round(sum(totals["elsewhere"].values()), 1),
        "processes": s.processes(), "samples": s.samples,
        "ours": {k: round(v, 2) for k, v in sorted(ours.items(), key=lambda kv: -kv[1])},
        "elsewhere": {k: round(v, 2) for k, v in sorted(totals["elsewhere"].items(),
                                                       key=lambda kv: -kv[1])[:15]},
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"cpu_sample: wall {result['wall_s']} s; machine busy {result['machine_busy_cpu_s']} "
          f"CPU-s, idle {result['machine_idle_cpu_s']}; ours {result['ours_cpu_s']} "
          f"(vswitchd {result['vswitchd_cpu_s']}), elsewhere {result['elsewhere_cpu_s']}",
          file=sys.stderr)
    for name, v in list(result["ours"].items())[:16]:
        print(f"  {v:8.2f}  {name}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
