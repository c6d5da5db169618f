"""The seal's edges: where a path the user typed appears inside the sealed run,
the mounts that takes, and running a sealed command so that signals reach it
and it cannot outlive the launcher.

Stdlib only, like the launcher (tooling/launcher.py) it serves.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.runtime import REPO_ROOT


def user_path(text: str) -> Path:
    """A path the user typed, relative to where they typed it."""
    base = Path(os.environ.get("OVSTEST_CWD") or os.getcwd())
    return (base / Path(text).expanduser()).resolve()


def out_dir_mounts(extra: list[str]) -> tuple[list[str], tuple[Path, ...]]:
    """Rewrite --out-dir to a path the sealed run sees, and the mounts that needs.

    Inside the checkout, the path is /src/...; elsewhere the directory is created
    on the host and mounted read-write at its own path."""
    args: list[str] = []
    rw: list[Path] = []
    i = 0
    while i < len(extra):
        arg = extra[i]
        value = None
        if arg == "--out-dir" and i + 1 < len(extra):
            value, i = extra[i + 1], i + 1
        elif arg.startswith("--out-dir="):
            value = arg.split("=", 1)[1]
        if value is None:
            args.append(arg)
        else:
            # One token: pytest takes a free-standing existing path for a test
            # path when it looks for its rootdir.
            args.append(f"--out-dir={sealed_path(Path(value), rw)}")
        i += 1
    return args, tuple(rw)


def results_mounts(extra: list[str], rw: list[Path]) -> list[str]:
    """export-at's --results FILE: the file's directory mounted, its path inside."""
    out = list(extra)
    for i, arg in enumerate(out[:-1]):
        if arg == "--results":
            path = user_path(out[i + 1])
            out[i + 1] = str(sealed_path(path.parent, rw) / path.name)
    return out


def sealed_path(value: Path, rw: list[Path]) -> Path:
    """Where a host directory the user named appears inside the seal (added to rw)."""
    path = user_path(str(value))
    if path == REPO_ROOT or REPO_ROOT in path.parents:
        return Path("/src") / path.relative_to(REPO_ROOT)
    path.mkdir(parents=True, exist_ok=True)
    rw.append(path)
    return path


def _die_with_parent() -> None:
    """In a child: get SIGKILL when the launcher dies (its seal then goes too)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_sealed(argv: list[str], env: dict[str, str], log: Path | None = None) -> int:
    """Run one sealed command to its end (compare and flaky run several), its
    output to `log` if given; Ctrl-C reaches it too, and we wait for it to clean up."""
    out = open(log, "w", encoding="utf-8") if log else None
    try:
        proc = subprocess.Popen(argv, env=env, preexec_fn=_die_with_parent, close_fds=False,
                                stdout=out, stderr=subprocess.STDOUT if out else None)
    finally:
        if out:
            out.close()  # the child has its own copy
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue


TERM_GRACE = 60.0  # seconds a terminated run has to clean up before it is killed


def exec_sealed(argv: list[str], env: dict[str, str]) -> int:
    """Run the sealed command and pass its exit status on.

    Ctrl-C reaches the whole foreground process group, pytest included, and we
    wait while it cleans up.  A SIGTERM sent to the launcher alone (a CI job's
    timeout, `kill PID`) would stop at unshare, which ignores it: it is passed
    on to the sealed run's first process, pytest, which stops as on Ctrl-C
    (fixtures/lifecycle.py), and after TERM_GRACE seconds the seal is killed
    outright.  If the launcher itself is
    killed, unshare gets SIGKILL and --kill-child takes the whole namespace
    down with it."""
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen(argv, env=env, preexec_fn=_die_with_parent, close_fds=False)

    def terminate(signum: int, frame: object) -> None:
        for pid in _children(proc.pid):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.alarm(int(TERM_GRACE))  # the main loop keeps waiting meanwhile

    def overdue(signum: int, frame: object) -> None:
        print(f"ovstest: the run did not stop within {TERM_GRACE:.0f} s of SIGTERM; "
              "killing it", file=sys.stderr)
        proc.kill()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGALRM, overdue)
    while True:
        try:
            code = proc.wait()
            return code if code >= 0 else 128 - code
        except KeyboardInterrupt:
            continue


def _children(pid: int) -> list[int]:
    """The direct children of a process (unshare's is the sealed run's PID 1)."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return found
