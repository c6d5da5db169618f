"""The sealed runtime: a Debian unstable root with OVS, DPDK and the Python
libraries, provisioned once and cached, and the namespaces a run is sealed in.

Stdlib only: this runs on the bare host before any dependency exists.

The root is built with mmdebstrap (about a minute) under $OVSTEST_CACHE (default
~/.cache/ovs-dpif-pytest).  A run happens inside
`unshare --mount --net --pid --ipc --uts --fork --kill-child` plus chroot: when
it ends, however it ends, the kernel removes every process, network device,
namespace and mount it made.  An OVS build of the user's is bind-mounted
read-only at its own path, so its libtool wrappers and compiled-in paths hold.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.install import MIN_OVS, fmt_version

SUITE = "unstable"
REPO_ROOT = Path(__file__).resolve().parent.parent

# Debian unstable packages of the runtime root.  Changing this list changes the
# cache key, so the next run provisions a fresh root.
PACKAGES = [
    "openvswitch-switch", "openvswitch-switch-dpdk", "dpdk", "dpdk-dev",
    "librte-net-tap26", "librte-net-pcap26", "librte-net-null26",
    "librte-net-virtio26", "librte-net-vhost26", "librte-bus-vdev26",
    "iproute2", "ethtool", "tcpdump", "tshark", "iperf3", "procps", "kmod",
    "iputils-ping", "ncat", "curl", "lftp", "python3-pyftpdlib", "tftpd-hpa",
    "net-tools",  # netstat: upstream's own system tests (the ratio benchmark) wait on it
    "python3", "python3-pytest", "python3-scapy", "python3-pexpect",
    "python3-jinja2", "python3-pyshark", "python3-pytest-xdist", "python3-pytest-timeout",
    "python3-hypothesis", "python3-matplotlib", "gdb", "ruff", "mypy",
    # ovs.flow: the OpenFlow parser the model's pipeline reads flow tables with
    # (datapath/model/openflow/); netaddr is what its decoders import
    "python3-openvswitch", "python3-netaddr",
    # pip and setuptools: tests/test_install_venv.py installs the checkout, offline,
    # into a clean venv that sees these (pyproject.toml's package list, as a user's
    # `pip install .` reads it)
    "python3-pip", "python3-setuptools",
    "chromium", "fonts-dejavu-core",
]

# The packages whose exact versions provisioning records and prints.
VERSIONED = ("openvswitch-switch", "openvswitch-switch-dpdk", "dpdk", "tshark", "python3-scapy",
             "python3-pytest")
OVS_PACKAGE = "openvswitch-switch"
PRUNE_AFTER_DAYS = 3  # a root of another key that no run used this long is removed
APT_TIMEOUT = 600  # seconds, each apt-get call on the host
MMDEBSTRAP_TIMEOUT = 1800  # seconds, building the root

# Variables that may cross into the sealed runtime.  GCOV_PREFIX(_STRIP): where a
# coverage build's processes write their .gcda files instead of the build tree
# (bench/upstream_ratio.py points both sides of its measurement at a throwaway place).
PASS_ENV = ("TERM", "CI", "PYTEST_ADDOPTS", "OVSTEST_KEEP", "COLUMNS", "GCOV_PREFIX",
            "GCOV_PREFIX_STRIP",
            "OVSTEST_OF_DIFF")  # the OpenFlow differential record (system_ct.OfDiff)


class LaunchError(Exception):
    """A problem the user must fix; printed as one line, exit code 2."""


# ----------------------------------------------------------------------------
# Runtime root


def cache_dir() -> Path:
    """The directory the runtime roots and builds are cached in."""
    base = os.environ.get("OVSTEST_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ovs-dpif-pytest"


def runtime_key(packages: list[str] | None = None) -> str:
    """The cache key of a runtime root: the suite, its packages and the layout version."""
    text = "\n".join([SUITE, *sorted(PACKAGES if packages is None else packages), "layout-1"])
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
    """Install mmdebstrap and unshare on the host if missing (as root), or say how."""
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
        try:
            rc = subprocess.run(argv, stdout=subprocess.DEVNULL, timeout=APT_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            raise LaunchError(f"'{' '.join(argv)}' did not finish within {APT_TIMEOUT} s "
                              "(is the mirror reachable?); install mmdebstrap by hand") from None
        if rc != 0:
            raise LaunchError(f"'{' '.join(argv)}' failed; install mmdebstrap by hand")


def provision(force: bool = False) -> Path:
    """Return the ready runtime root, building it first if needed."""
    if os.geteuid() != 0:
        raise LaunchError("the provisioned runtime needs root (namespaces, chroot); "
                          "run as root, or use your own OVS >= "
                          f"{fmt_version(MIN_OVS)} with --ovs-bindir")
    return provision_root("runtime", PACKAGES, force)


def provision_root(kind: str, packages: list[str], force: bool = False) -> Path:
    """Return the ready root of this kind ("runtime", or another root such as the
    coverage toolchain's) holding these Debian unstable packages, building it
    first if needed; cached under <kind>-<key of the packages>."""
    if os.geteuid() != 0:
        raise LaunchError(f"provisioning the {kind} root needs root (mmdebstrap, chroot)")
    base = cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    key = runtime_key(packages)
    final = base / f"{kind}-{key}"
    # One lock per kind: provisioning one root does not hold up runs of another.
    with open(base / (".lock" if kind == "runtime" else f".lock-{kind}"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "ready").exists() and not force:
            return final / "root"
        ensure_host_tools()
        if final.exists():
            shutil.rmtree(final)
        work = base / f"building-{kind}-{key}"
        if work.exists():
            shutil.rmtree(work)
        work.mkdir()
        mirror = host_mirror()
        print(f"ovstest: provisioning the {kind} root (Debian {SUITE}) into {final}",
              file=sys.stderr)
        started = time.monotonic()
        argv = [
            "mmdebstrap", "--variant=apt", "--mode=root", "--quiet",
            "--aptopt=Acquire::Check-Valid-Until \"false\"",
            "--aptopt=Acquire::Check-Date \"false\"",
            "--include=" + ",".join(packages),
            SUITE, str(work / "root"), mirror,
        ]
        with open(work / "mmdebstrap.log", "w") as log:
            try:
                rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=MMDEBSTRAP_TIMEOUT).returncode
            except subprocess.TimeoutExpired:
                raise LaunchError(f"mmdebstrap did not finish within {MMDEBSTRAP_TIMEOUT} s "
                                  f"(is the mirror {mirror} reachable?); its log: "
                                  f"{work / 'mmdebstrap.log'}") from None
        if rc != 0:
            tail = (work / "mmdebstrap.log").read_text(errors="replace").splitlines()[-15:]
            raise LaunchError("mmdebstrap failed (rc %d); last lines:\n  %s"
                              % (rc, "\n  ".join(tail)))
        for sub in ("src", "out"):
            (work / "root" / sub).mkdir(exist_ok=True)
        versions = package_versions(work / "root")
        (work / "versions.json").write_text(json.dumps(versions, indent=1) + "\n")
        (work / "ready").write_text(f"{key}\npackages: {' '.join(packages)}\n")
        work.rename(final)
        print(f"ovstest: {kind} root ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
        prune(base, keep=final, kind=kind)
        return final / "root"


def prune(base: Path, keep: Path, idle_days: float = PRUNE_AFTER_DAYS,
          kind: str = "runtime") -> None:
    """Remove roots of other keys that no run used for `idle_days` (another
    checkout may still want its own key's root), and never one a run holds."""
    for old in base.glob(f"{kind}-*"):
        mark = old / ".in-use"
        if old == keep or (mark.exists() and time.time() - mark.stat().st_mtime
                           < idle_days * 86400):
            continue
        try:
            with open(mark, "a") as held:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(old, ignore_errors=True)
        except OSError:  # a sealed run holds it (shared lock): leave it for later
            continue


def hold(root: Path) -> int:
    """A shared lock on the root, inherited by the sealed run: while it lives,
    provisioning of another key does not remove this root (nor for
    PRUNE_AFTER_DAYS after).  Returns the fd."""
    mark = root.parent / ".in-use"
    fd = os.open(mark, os.O_WRONLY | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    os.utime(mark)
    os.set_inheritable(fd, True)
    return fd


def package_versions(root: Path) -> dict[str, str]:
    """Installed versions of the VERSIONED packages, from the root's dpkg status."""
    try:
        text = (root / "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return {}
    found: dict[str, str] = {}
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if ": " in line and not line.startswith(" "))
        if fields.get("Package") in VERSIONED and "installed" in fields.get("Status", ""):
            found[fields["Package"]] = fields.get("Version", "")
    return {p: found[p] for p in VERSIONED if p in found}


def runtime_versions(root: Path) -> dict[str, str]:
    """What provisioning recorded (or, for an older root, what dpkg says)."""
    try:
        data = json.loads((root.parent / "versions.json").read_text())
        if isinstance(data, dict) and data:
            return {str(k): str(v) for k, v in data.items()}
    except (OSError, ValueError):
        pass
    return package_versions(root)


def upstream_version(debian_version: str) -> str:
    """'1:4.0.0-2' -> '4.0.0': the upstream part of a Debian version."""
    version = debian_version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


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
# Extra mounts, "ro:PATH" or "rw:PATH", each at its own path, up to "--".
while [ "$1" != "--" ]; do
    mode="${1%%:*}"; d="${1#*:}"; shift
    mkdir -p "$R$d"
    mount --bind "$d" "$R$d"
    if [ "$mode" = ro ]; then mount -o remount,bind,ro "$R$d"; fi
done
shift
chroot "$R" /usr/sbin/ip link set lo up
cd /
exec chroot "$R" /bin/sh -c 'cd /src && exec "$@"' sh "$@"
"""


def host_path(path: str) -> str:
    """Inside the sealed runtime the checkout is /src; say where it is on the host."""
    host = os.environ.get("OVSTEST_HOST_SRC")
    if host and (path == "/src" or path.startswith("/src/")):
        return host + path[len("/src"):]
    return path


SEALED_PYCACHE = "/var/cache/ovstest-pycache"  # inside the runtime root


def sealed_argv(root: Path, inner: list[str], *, ro: tuple[Path, ...] = (),
                rw: tuple[Path, ...] = (),
                extra_env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command that runs `inner` sealed in `root`, with the checkout at /src
    and the directories `ro` (read-only) and `rw` at their own paths."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update({
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        # Compiled modules (and pytest's rewritten test modules) are kept inside
        # the runtime root, not beside the checkout's sources: every pytest
        # process and xdist worker would otherwise compile the framework again,
        # about 1.3 s of CPU each.  Writes are atomic, so concurrent runs share it.
        "PYTHONPYCACHEPREFIX": SEALED_PYCACHE,
        "OVSTEST_SEALED": "1",
        "OVSTEST_HOST_SRC": str(REPO_ROOT),
        **(extra_env or {}),
    })
    mounts = [f"ro:{d}" for d in ro] + [f"rw:{d}" for d in rw]
    argv = ["unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork",
            "--kill-child", "sh", "-c", SEAL_SCRIPT, "seal", str(root),
            str(REPO_ROOT), *mounts, "--", *inner]
    return argv, env


