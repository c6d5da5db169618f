"""An OVS build for coverage: the toolchain root, the source tree, the cached build.

Stdlib only: the launcher uses it on the bare host.

- **The toolchain root.**  OVS is compiled, and its coverage read back, inside a
  second cached Debian unstable root (compiler, autotools, DPDK and AF_XDP
  headers, gcovr), provisioned like the runtime root (harness/runtime.py).  Its
  gcc, glibc and DPDK are those the runtime runs, so a build of it runs sealed
  in the runtime with DPDK and AF_XDP compiled in, and gcov reads the .gcno its
  own gcc wrote.
- **The source.**  The user's tree (`--ovs-src DIR`), or Debian's source package
  of the runtime's Open vSwitch version, fetched once as .ci/ovs-source-build
  does (the host's apt, the mirror the host already uses) and cached.
- **The build.**  Out of tree, `--enable-coverage` plus the configure flags,
  cached under a key of the source tree's path and the flags.  `make` runs again
  only when a source file changed since the last build.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.runtime import (
    APT_TIMEOUT,
    OVS_PACKAGE,
    LaunchError,
    cache_dir,
    host_mirror,
    provision_root,
    runtime_key,
    runtime_versions,
    sealed_argv,
)

# The toolchain root's packages (Debian unstable).  Changing the list changes its key.
TOOLCHAIN_PACKAGES = [
    "build-essential", "autoconf", "automake", "libtool", "pkgconf", "python3",
    "python3-sortedcontainers", "libssl-dev", "openssl", "libcap-ng-dev", "libnuma-dev",
    "libdpdk-dev", "libxdp-dev", "libbpf-dev", "gcovr", "iproute2", "procps",
]
# Always given to configure; DEFAULT_FLAGS unless the user names others.  PMD,
# handler and revalidator threads run the same code at once: without atomic
# counter updates gcov's counts race (and can even come out negative).
COVERAGE_FLAG = "--enable-coverage"
DEFAULT_FLAGS = ("--with-dpdk=shared", "CFLAGS=-g -fprofile-update=atomic")
# What a change to means a rebuild (the build's own outputs are not looked at).
SOURCE_SUFFIXES = (".c", ".h", ".am", ".ac", ".m4", ".in", ".at", ".py", ".sh", ".xml")
BUILD_TIMEOUT = 4 * 3600  # seconds: a cold build on two busy cores


@dataclass(frozen=True)
class Build:
    """A configured and built coverage tree."""

    src: Path
    build: Path
    flags: tuple[str, ...]
    origin: str  # "--ovs-src DIR", "Debian openvswitch 4.0.0-2"

    @property
    def gcov_strip(self) -> int:
        """GCOV_PREFIX_STRIP that turns BUILD/lib/x.gcda into PREFIX/lib/x.gcda."""
        return len(self.build.parts) - 1

    def describe(self) -> str:
        return f"{self.origin}, built in {self.build} with {shlex.join(self.flags)}"


def toolchain_root(force: bool = False) -> Path:
    """The cached root with the toolchain that builds OVS, provisioned on first use."""
    return provision_root("toolchain", TOOLCHAIN_PACKAGES, force)


def toolchain_run(toolchain: Path, argv: list[str], *, cwd: Path, rw: tuple[Path, ...] = (),
                  ro: tuple[Path, ...] = (), env: dict[str, str] | None = None,
                  log: Path | None = None, timeout: float = BUILD_TIMEOUT) -> int:
    """Run argv in `cwd` sealed in the toolchain root; output to `log` (or ours)."""
    inner = ["/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(cwd), *argv]
    sealed, sealed_env = sealed_argv(toolchain, inner, ro=ro, rw=rw, extra_env=env)
    out = open(log, "a", encoding="utf-8") if log else None
    try:
        return subprocess.run(sealed, env=sealed_env, stdout=out, stderr=subprocess.STDOUT
                              if out else None, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        raise LaunchError(f"'{' '.join(argv)}' in {cwd} did not finish within {timeout:.0f} s"
                          + (f"; its log: {log}" if log else "")) from None
    finally:
        if out:
            out.close()


# ----------------------------------------------------------------------------
# The source


def source_version(debian_version: str) -> str:
    """'4.0.0-2+b1' -> '4.0.0-2': a binary package's source version (no binNMU)."""
    return re.sub(r"\+b\d+$", "", debian_version)


def _host_packages(names: list[str]) -> None:
    need = [p for p in names if not subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True
    ).stdout.endswith("ok installed")]
    if not need:
        return
    print(f"ovstest: installing {' '.join(need)} on the host", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *need]):
        if subprocess.run(argv, stdout=subprocess.DEVNULL, env=env,
                          timeout=APT_TIMEOUT).returncode != 0:
            raise LaunchError(f"'{' '.join(argv)}' failed; install {' '.join(need)} by hand")


def debian_source(runtime_root: Path) -> tuple[Path, str]:
    """Debian unstable's openvswitch source of the runtime's version, unpacked
    and cached; (tree, origin).  Falls back to unstable's current version, saying
    so, when the archive no longer has the runtime's."""
    wanted = source_version(runtime_versions(runtime_root).get(OVS_PACKAGE, ""))
    base = cache_dir() / "coverage"
    for done in sorted(base.glob("debian-openvswitch-*/done")):
        version = done.read_text().strip()
        if version == wanted or not wanted:
            return done.parent / "src", f"Debian openvswitch {version}"
    _host_packages(["dpkg-dev"])
    top = base / "fetching"
    shutil.rmtree(top, ignore_errors=True)
    for sub in ("apt/lists/partial", "apt/cache/archives/partial"):
        (top / sub).mkdir(parents=True)
    (top / "apt/sources.list").write_text(
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        f"{host_mirror()} unstable main\n")
    opts = ["-o", f"Dir::Etc::SourceList={top / 'apt/sources.list'}",
            "-o", "Dir::Etc::SourceParts=/dev/null", "-o", f"Dir::State::Lists={top / 'apt/lists'}",
            "-o", f"Dir::Cache={top / 'apt/cache'}", "-o", "Acquire::Check-Valid-Until=false"]
    print(f"ovstest: fetching Debian's openvswitch source {wanted or '(unstable)'}",
          file=sys.stderr)

    def apt(*args: str) -> int:
        return subprocess.run(["apt-get", *opts, *args], cwd=top, stdout=subprocess.DEVNULL,
                              timeout=APT_TIMEOUT).returncode

    if apt("update", "-qq") != 0:
        raise LaunchError("apt-get update of Debian unstable's sources failed")
    got = wanted and apt("source", "--download-only", "-qq", f"openvswitch={wanted}") == 0
    if not got:
        print(f"ovstest: note: unstable no longer has openvswitch {wanted}; taking its current "
              "source instead", file=sys.stderr)
        if apt("source", "--download-only", "-qq", "openvswitch") != 0:
            raise LaunchError("apt-get source openvswitch failed")
    dsc = sorted(top.glob("openvswitch_*.dsc"))[-1]
    version = dsc.stem.split("_", 1)[1]
    if subprocess.run(["dpkg-source", "-x", "--no-check", dsc.name, "src"], cwd=top,
                      stdout=subprocess.DEVNULL).returncode != 0:
        raise LaunchError(f"dpkg-source -x {dsc} failed")
    (top / "done").write_text(version + "\n")
    final = base / f"debian-openvswitch-{version}"
    shutil.rmtree(final, ignore_errors=True)
    top.rename(final)
    return final / "src", f"Debian openvswitch {version}"


def source_digest(src: Path, skip: tuple[Path, ...] = ()) -> str:
    """A digest of the tree's source files (path, size, mtime): what a rebuild follows."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and here / d not in skip and d != "testsuite.dir")
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                st = (here / name).stat()
                digest.update(f"{here / name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


# ----------------------------------------------------------------------------
# The build


def build_key(src: Path, flags: tuple[str, ...]) -> str:
    """The cache key of a build: the source path, the configure flags and the toolchain."""
    text = "\n".join([str(src.resolve()), *flags, runtime_key(TOOLCHAIN_PACKAGES)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def configure_flags(extra: str | None) -> tuple[str, ...]:
    """--enable-coverage, then the user's flags (a shell-like string) or the defaults."""
    chosen = tuple(shlex.split(extra)) if extra is not None else DEFAULT_FLAGS
    return (COVERAGE_FLAG, *[f for f in chosen if f != COVERAGE_FLAG])


def build(toolchain: Path, src: Path, origin: str, flags: tuple[str, ...],
          boot: bool = False) -> Build:
    """Configure (once) and make the coverage build of `src`; returns it when built.
    `boot`: run ./boot.sh once first even if the tree has a configure (Debian's
    patches touch the autotools inputs of a tarball made with another automake)."""
    src = src.resolve()
    if not (src / "vswitchd" / "ovs-vswitchd.c").is_file():
        raise LaunchError(f"{src} is not an Open vSwitch source tree (no vswitchd/ovs-vswitchd.c)")
    if (src / "config.status").is_file():
        raise LaunchError(f"{src} is configured in-tree; an out-of-tree build needs a clean "
                          "tree (make distclean there), or name another copy with --ovs-src")
    top = cache_dir() / "coverage" / f"build-{build_key(src, flags)}"
    tree = top / "build"
    tree.mkdir(parents=True, exist_ok=True)
    result = Build(src=src, build=tree, flags=flags, origin=origin)
    log = top / "build.log"
    with open(top / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp_path = top / "stamp.json"
        stamp = json.loads(stamp_path.read_text()) if stamp_path.is_file() else {}
        digest = source_digest(src, skip=(top,))
        if stamp.get("digest") == digest and (tree / "vswitchd" / "ovs-vswitchd").is_file():
            return result
        started = time.monotonic()
        print(f"ovstest: building {origin} with coverage in {tree} (log: {log})",
              file=sys.stderr)
        rw = (src, top)  # boot.sh, and a testsuite older than its .at files, write to src
        booted = src / ".ovstest-booted"
        if not (src / "configure").is_file() or (boot and not booted.is_file()):
            _step(toolchain, ["./boot.sh"], src, rw, log, "boot.sh")
            if boot:
                booted.write_text("boot.sh ran in the toolchain root\n")
            shutil.rmtree(tree, ignore_errors=True)
            tree.mkdir()
        if not (tree / "config.status").is_file():
            _step(toolchain, [str(src / "configure"), *flags], tree, rw, log, "configure")
        jobs = str(os.cpu_count() or 1)
        _step(toolchain, ["make", f"-j{jobs}"], tree, rw, log, "make")
        stamp_path.write_text(json.dumps({"src": str(src), "origin": origin, "flags": flags,
                                          "digest": source_digest(src, skip=(top,)),
                                          "seconds": round(time.monotonic() - started)}) + "\n")
        print(f"ovstest: coverage build ready in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
    return result


def _step(toolchain: Path, argv: list[str], cwd: Path, rw: tuple[Path, ...], log: Path,
          what: str) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n### {' '.join(argv)} (in {cwd})\n")
    if toolchain_run(toolchain, argv, cwd=cwd, rw=rw, log=log) != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise LaunchError(f"{what} failed; last lines of {log}:\n  " + "\n  ".join(tail))


def main(argv: list[str]) -> int:
    """`python3 -m tooling.ovsbuild [SRC]`: provision, fetch and build; print the build."""
    from harness.runtime import provision
    try:
        toolchain = toolchain_root()
        if argv:
            src, origin = Path(argv[0]).resolve(), f"--ovs-src {argv[0]}"
        else:
            src, origin = debian_source(provision())
        print(build(toolchain, src, origin, configure_flags(None), boot=not argv).build)
    except LaunchError as exc:
        print(f"ovstest: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
