"""Launcher: find or provision an OVS runtime, then run pytest in a sealed namespace.

Stdlib only: this runs on the bare host before any dependency exists.

    ./ovstest suite [PYTEST ARGS]   the dummy-backend suite (cases/), report in reports/out/
    ./ovstest test  [PYTEST ARGS]   everything: framework unit tests and the cases
    ./ovstest bench [ARGS]          benchmarks: print timing figures (bench/)
    ./ovstest bench --upstream-tree DIR [-k EXPR] [--jobs N]
                                    upstream's testsuite against ours, per upstream file
    ./ovstest provision             only build (or check) the cached runtime root
    ./ovstest shell                 an interactive shell inside the sealed runtime

OVS selection, in order:
  1. --ovs-bindir DIR or OVS_BINDIR: must hold ovs-vswitchd >= MIN_OVS, else exit 2.
  2. ovs-vswitchd on PATH if it is >= MIN_OVS.
  3. Otherwise a runtime root built with mmdebstrap from Debian unstable (OVS 4.0,
     DPDK 25.11), cached under $OVSTEST_CACHE (default ~/.cache/ovs-dpif-pytest).
In case 3 pytest runs inside `unshare --mount --net --pid --fork --kill-child`
plus chroot: when the run ends, however it ends, the kernel removes every
process, network device, namespace and mount it made.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.install import MIN_OVS, parse_ovs_version

SUITE = "unstable"
REPO_ROOT = Path(__file__).resolve().parent.parent

# Debian unstable packages of the runtime root.  Changing this list changes the
# cache key, so the next run provisions a fresh root.
PACKAGES = [
    "openvswitch-switch", "openvswitch-switch-dpdk", "dpdk", "dpdk-dev",
    "librte-net-tap26", "librte-net-pcap26", "librte-net-null26",
    "librte-net-virtio26", "librte-net-vhost26", "librte-bus-vdev26",
    "iproute2", "ethtool", "tcpdump", "tshark", "iperf3", "procps", "kmod",
    "python3", "python3-pytest", "python3-scapy", "python3-pexpect",
    "python3-jinja2", "python3-pyshark", "python3-openvswitch",
    "python3-pyroute2", "python3-pytest-xdist", "python3-pytest-timeout",
    "chromium", "fonts-dejavu-core",
]

# Variables that may cross into the sealed runtime.
PASS_ENV = ("TERM", "CI", "PYTEST_ADDOPTS", "OVSTEST_KEEP", "COLUMNS")


class LaunchError(Exception):
    """A problem the user must fix; printed as one line, exit code 2."""


def probe_ovs(bindir: Path) -> tuple[int, ...]:
    exe = bindir / "ovs-vswitchd"
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise LaunchError(f"no executable ovs-vswitchd in {bindir}")
    try:
        out = subprocess.run([str(exe), "--version"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"{exe} --version failed: {exc}") from None
    version = parse_ovs_version(out)
    if version is None:
        raise LaunchError(f"{exe} --version printed no Open vSwitch version")
    return version


def fmt(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def choose_host_ovs(explicit: str | None) -> Path | None:
    """The host OVS bindir to use, or None when a runtime root must be used."""
    if explicit:
        bindir = Path(explicit).resolve()
        version = probe_ovs(bindir)
        if version < MIN_OVS:
            raise LaunchError(
                f"{bindir}/ovs-vswitchd is Open vSwitch {fmt(version)}; this suite needs "
                f">= {fmt(MIN_OVS)}. Point --ovs-bindir at a newer build, or drop it to "
                "use the provisioned OVS 4.0 runtime.")
        return bindir
    found = shutil.which("ovs-vswitchd")
    if found:
        bindir = Path(found).resolve().parent
        version = probe_ovs(bindir)
        if version >= MIN_OVS:
            return bindir
        print(f"ovstest: ignoring {found} (Open vSwitch {fmt(version)} < {fmt(MIN_OVS)}); "
              "using the provisioned runtime", file=sys.stderr)
    return None


# ----------------------------------------------------------------------------
# Runtime root


def cache_dir() -> Path:
    base = os.environ.get("OVSTEST_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ovs-dpif-pytest"


def runtime_key() -> str:
    text = "\n".join([SUITE, *sorted(PACKAGES), "layout-1"])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def host_mirror() -> str:
    """The Debian mirror the host's apt already uses (never a hard-coded host)."""
    override = os.environ.get("OVSTEST_MIRROR")
    if override:
        return override
    candidates = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for path in candidates:
        for block in path.read_text(errors="replace").split("\n\n"):
            fields = dict(
                (k.strip(), v.strip())
                for k, _, v in (ln.partition(":") for ln in block.splitlines()
                                if ":" in ln and not ln.startswith("#")))
            suites = fields.get("Suites", "")
            if fields.get("URIs") and "security" not in suites and "deb" in fields.get("Types", ""):
                return fields["URIs"].split()[0]
    sources = Path("/etc/apt/sources.list")
    if sources.exists():
        for line in sources.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in line:
                uri = next((p for p in parts[1:] if "://" in p), None)
                if uri:
                    return uri
    raise LaunchError("cannot find a Debian mirror in the host's apt configuration; "
                      "set OVSTEST_MIRROR to one")


def ensure_host_tools() -> None:
    missing = [t for t in ("mmdebstrap", "unshare") if not shutil.which(t)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise LaunchError(f"missing {', '.join(missing)}; install mmdebstrap (as root: "
                          "apt-get install mmdebstrap) or pass --ovs-bindir")
    print(f"ovstest: installing {' '.join(missing)} on the host", file=sys.stderr)
    pkgs = ["mmdebstrap" if t == "mmdebstrap" else "util-linux" for t in missing]
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", *pkgs]):
        if subprocess.run(argv, stdout=subprocess.DEVNULL).returncode != 0:
            raise LaunchError(f"'{' '.join(argv)}' failed; install mmdebstrap by hand")


def provision(force: bool = False) -> Path:
    """Return the ready runtime root, building it first if needed."""
    if os.geteuid() != 0:
        raise LaunchError("the provisioned runtime needs root (namespaces, chroot); "
                          "run as root, or use your own OVS >= "
                          f"{fmt(MIN_OVS)} with --ovs-bindir")
    base = cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    key = runtime_key()
    final = base / f"runtime-{key}"
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "ready").exists() and not force:
            return final / "root"
        ensure_host_tools()
        if final.exists():
            shutil.rmtree(final)
        work = base / f"building-{key}"
        if work.exists():
            shutil.rmtree(work)
        work.mkdir()
        mirror = host_mirror()
        print(f"ovstest: provisioning the OVS runtime (Debian {SUITE}) into {final}",
              file=sys.stderr)
        started = time.monotonic()
        argv = [
            "mmdebstrap", "--variant=apt", "--mode=root", "--quiet",
            "--aptopt=Acquire::Check-Valid-Until \"false\"",
            "--aptopt=Acquire::Check-Date \"false\"",
            "--include=" + ",".join(PACKAGES),
            SUITE, str(work / "root"), mirror,
        ]
        with open(work / "mmdebstrap.log", "w") as log:
            rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            tail = (work / "mmdebstrap.log").read_text(errors="replace").splitlines()[-15:]
            raise LaunchError("mmdebstrap failed (rc %d); last lines:\n  %s"
                              % (rc, "\n  ".join(tail)))
        for sub in ("src", "out"):
            (work / "root" / sub).mkdir(exist_ok=True)
        (work / "ready").write_text(f"{key}\npackages: {' '.join(PACKAGES)}\n")
        work.rename(final)
        print(f"ovstest: runtime ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
        # Older roots of other keys are dead weight.
        for old in base.glob("runtime-*"):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        return final / "root"


# The script pid 1 of the sealed namespaces runs.  Every mount made here lives
# only in the private mount namespace, so nothing needs unmounting afterwards.
SEAL_SCRIPT = r"""
set -e
R="$1"; SRC="$2"; shift 2
mount --make-rprivate /
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
mount --rbind /dev "$R/dev"
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
mount -t tmpfs tmpfs "$R/run"
mount --bind "$SRC" "$R/src"
chroot "$R" /usr/sbin/ip link set lo up
cd /
exec chroot "$R" /bin/sh -c 'cd /src && exec "$@"' sh "$@"
"""


def sealed_argv(root: Path, inner: list[str]) -> tuple[list[str], dict[str, str]]:
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update({
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OVSTEST_SEALED": "1",
        "OVSTEST_HOST_SRC": str(REPO_ROOT),
    })
    argv = ["unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork",
            "--kill-child", "sh", "-c", SEAL_SCRIPT, "seal", str(root),
            str(REPO_ROOT), *inner]
    return argv, env


def inner_args(mode: str, extra: list[str]) -> list[str]:
    """python3's arguments for a mode."""
    if mode == "bench":
        return ["bench/bench_suite.py", *extra]
    targets = {"suite": ["cases"], "test": ["tests", "cases"]}[mode]
    # Explicit paths or node ids among the extra args replace the default targets.
    if any(not a.startswith("-") and (os.path.exists(a) or "::" in a) for a in extra):
        targets = []
    return ["-m", "pytest", *targets, *extra]


def run(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Become the command.  With exec, the process the user interrupts or kills
    is unshare itself: it ignores SIGINT while pytest cleans up, and if it is
    killed outright --kill-child takes the whole namespace down with it."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], argv, os.environ if env is None else env)
    return 127  # not reached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ovstest", description=__doc__.split("\n\n")[0],
        epilog="Extra arguments go to pytest, e.g. ./ovstest suite -k 'udp and rx_partial'.")
    parser.add_argument("mode", choices=["suite", "test", "bench", "provision", "shell"])
    parser.add_argument("--ovs-bindir", default=os.environ.get("OVS_BINDIR"),
                        help="use this OVS build (ovs-vswitchd >= %s) instead of the runtime"
                        % fmt(MIN_OVS))
    parser.add_argument("--rebuild-runtime", action="store_true",
                        help="provision the runtime root again even if cached")
    args, extra = parser.parse_known_args(argv)
    if args.mode == "bench" and any(a.startswith("--upstream-tree") for a in extra):
        # Upstream's testsuite runs on the host (its tree's binaries are the host's);
        # the script starts `ovstest suite` for our side.
        return run([sys.executable, str(REPO_ROOT / "bench" / "upstream_ratio.py"), *extra])
    try:
        host_bindir = None if args.mode == "provision" else choose_host_ovs(args.ovs_bindir)
        if host_bindir is not None:
            if args.mode == "shell":
                raise LaunchError("'shell' is for the provisioned runtime only")
            env = dict(os.environ, OVS_BINDIR=str(host_bindir))
            return run([sys.executable, *inner_args(args.mode, extra)], env)
        root = provision(force=args.rebuild_runtime)
        if args.mode == "provision":
            print(root)
            return 0
        inner = (["/bin/bash", "-i"] if args.mode == "shell"
                 else ["python3", *inner_args(args.mode, extra)])
        sealed, env = sealed_argv(root, inner)
        return run(sealed, env)
    except LaunchError as exc:
        print(f"ovstest: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
