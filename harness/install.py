"""Locate an OVS install (the runtime's package, an install prefix or a build tree)
and probe what it can do.

Stdlib only: the launcher uses it on the bare host, before any dependency exists,
and `python3 -m harness.install DIR` probes a build inside the sealed runtime.

`--ovs-bindir DIR` accepts:
- an install prefix (`./configure --prefix=P && make install`), or its `bin/` or `sbin/`;
- a build tree, in-tree or out-of-tree, or one of its program directories
  (`vswitchd/`, `utilities/`, `ovsdb/`).  A build configured with `--enable-shared`
  has libtool wrapper scripts where the programs would be; the real programs are
  in `.libs/`, and the build's own libraries are found through LD_LIBRARY_PATH.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

MIN_OVS = (3, 7)
TOOLS = ("ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl", "ovs-appctl")
# Where each program lives in a build tree.
BUILD_SUBDIR = {"ovs-vswitchd": "vswitchd", "ovsdb-server": "ovsdb", "ovsdb-tool": "ovsdb",
                "ovs-vsctl": "utilities", "ovs-ofctl": "utilities", "ovs-appctl": "utilities"}
# Directories that are the host's own system: never mounted over the runtime's.
SYSTEM_PREFIXES = (Path("/"), Path("/usr"))

# netdev-dummy option names the cases may set.  Probed by name in the program and
# the build's own libraries, so a case needing one this build lacks is skipped
# with the option named.
DUMMY_OPTIONS = (
    "ol_ip_rx_csum_set_good", "ol_ip_rx_csum_set_bad", "ol_ip_rx_csum_set_partial",
    "ol_l4_rx_csum_set_good", "ol_l4_rx_csum_set_bad", "ol_l4_rx_csum_set_partial",
    "ol_ip_tx_csum", "ol_ip_tx_csum_disabled", "ol_l4_tx_csum", "ol_l4_tx_csum_disabled",
    "ol_out_ip_tx_csum", "ol_out_ip_tx_csum_disabled",
    "ol_out_udp_tx_csum", "ol_out_udp_tx_csum_disabled", "ol_tso_segsz",
)


class InstallError(Exception):
    """The OVS install cannot be used; the message says why and what to do."""


def fmt_version(version: tuple[int, ...]) -> str:
    """A version tuple as dotted text."""
    return ".".join(map(str, version))


def parse_ovs_version(text: str) -> tuple[int, ...] | None:
    """The version in `ovs-vswitchd --version` output, or None if it has none."""
    m = re.search(r"\(Open vSwitch\)\s+(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def is_libtool_wrapper(path: Path) -> bool:
    """A libtool wrapper script stands where a program of a shared build would be."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and b"libtool" in head


def real_program(path: Path) -> Path:
    """The ELF program behind `path`: itself, or what its libtool wrapper runs."""
    if not is_libtool_wrapper(path):
        return path
    for name in (f"lt-{path.name}", path.name):
        cand = path.parent / ".libs" / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    raise InstallError(f"{path} is a libtool wrapper, but {path.parent}/.libs/ has no "
                       f"{path.name}: run make in the build tree")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@dataclass(frozen=True)
class Layout:
    """Where the pieces of one OVS are, and how it was found."""

    kind: str  # "install prefix", "build tree", "build tree (shared libraries)", "PATH"
    root: Path  # the prefix, the build directory, or the directory of ovs-vswitchd
    tools: dict[str, Path]  # program -> the file to execute (never a libtool wrapper)
    schema: Path | None
    library_path: tuple[Path, ...] = ()  # the build's own shared libraries
    mounts: tuple[Path, ...] = ()  # what a sealed runtime must see, at the same paths

    def describe(self) -> str:
        return f"{self.root} ({self.kind})"


def _build_root(path: Path) -> Path | None:
    """The build tree `path` is, or is a program directory of."""
    for cand in (path, path.parent):
        if (cand / "vswitchd" / "ovs-vswitchd").exists() and (cand / "utilities").is_dir():
            return cand
        if (cand / "Makefile").is_file() and (cand / "vswitchd").is_dir() \
                and (cand / "config.status").is_file():
            return cand
    return None


def _srcdir(build: Path) -> Path:
    """A build tree's source directory (itself for an in-tree build)."""
    try:
        text = (build / "Makefile").read_text(errors="replace")
    except OSError:
        return build
    m = re.search(r"^abs_top_srcdir\s*=\s*(\S+)\s*$", text, re.M)
    return Path(m.group(1)).resolve() if m else build


def _build_layout(build: Path) -> Layout:
    tools: dict[str, Path] = {}
    missing: list[str] = []
    shared = False
    for tool, sub in BUILD_SUBDIR.items():
        cand = build / sub / tool
        if not _executable(cand):
            missing.append(f"{sub}/{tool}")
            continue
        shared = shared or is_libtool_wrapper(cand)
        tools[tool] = real_program(cand)
    if missing:
        raise InstallError(f"build tree {build} lacks {', '.join(missing)}: run make there")
    src = _srcdir(build)
    libs = tuple(d for d in (build / sub / ".libs" for sub in
                             ("lib", "ofproto", "ovsdb", "vtep", "utilities", "vswitchd"))
                 if d.is_dir() and any(d.glob("lib*.so*")))
    if src == build or build in src.parents:
        mounts: tuple[Path, ...] = (build,)
    elif src in build.parents:  # a build directory inside the source tree
        mounts = (src,)
    else:
        mounts = (build, src)
    return Layout(kind="build tree (shared libraries)" if shared else "build tree",
                  root=build, tools=tools, schema=_first_file([src / "vswitchd/vswitch.ovsschema",
                                                               build / "vswitchd/vswitch.ovsschema"]),
                  library_path=libs, mounts=mounts)


def _prefix_layout(prefix: Path) -> Layout:
    dirs = [prefix / "sbin", prefix / "bin"]
    tools, missing = _find_tools(dirs)
    if missing:
        raise InstallError(f"install prefix {prefix} lacks {', '.join(missing)} "
                           "(looked in its sbin/ and bin/)")
    libs = tuple(d for d in (prefix / "lib", prefix / "lib64", *prefix.glob("lib/*-linux-gnu"))
                 if d.is_dir() and any(d.glob("libopenvswitch*.so*")))
    return Layout(kind="install prefix", root=prefix, tools=tools,
                  schema=_first_file([prefix / "share/openvswitch/vswitch.ovsschema"]),
                  library_path=libs, mounts=(prefix,))


def _find_tools(dirs: list[Path]) -> tuple[dict[str, Path], list[str]]:
    tools: dict[str, Path] = {}
    for tool in TOOLS:
        for d in dirs:
            if _executable(d / tool):
                tools[tool] = real_program(d / tool)
                break
    return tools, [t for t in TOOLS if t not in tools]


def _first_file(cands: list[Path]) -> Path | None:
    return next((c for c in cands if c.is_file()), None)


def find_layout(given: str | None) -> Layout:
    """The OVS `given` names (see the module docstring), or the one on PATH."""
    if not given:
        dirs = [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
        dirs += [Path("/usr/sbin"), Path("/usr/local/sbin")]
        tools, missing = _find_tools(dirs)
        if missing:
            raise InstallError(
                f"no {', '.join(missing)} on PATH; install Open vSwitch >= "
                f"{fmt_version(MIN_OVS)}, pass --ovs-bindir, or run through ./ovstest, "
                "which provisions one")
        exe = tools["ovs-vswitchd"]
        prefix = exe.resolve().parent.parent
        return Layout(kind="PATH", root=exe.parent, tools=tools,
                      schema=_first_file([prefix / "share/openvswitch/vswitch.ovsschema",
                                          Path("/usr/share/openvswitch/vswitch.ovsschema"),
                                          Path("/usr/local/share/openvswitch/vswitch.ovsschema")]))
    path = Path(given).expanduser().resolve()
    if not path.is_dir():
        raise InstallError(f"--ovs-bindir {given}: no such directory")
    build = _build_root(path)
    if build is not None:
        return _build_layout(build)
    for prefix in ((path.parent,) if path.name in ("bin", "sbin") else ()) + (path,):
        if any(_executable(prefix / d / "ovs-vswitchd") for d in ("sbin", "bin")):
            return _prefix_layout(prefix)
    if (path / "vswitchd" / "ovs-vswitchd.c").is_file():
        raise InstallError(f"--ovs-bindir {given}: an OVS source tree with no build in it; "
                           "run ./boot.sh && ./configure && make there, or name the build "
                           "directory")
    tools, missing = _find_tools([path])
    if not missing:  # a flat directory holding every program
        return Layout(kind="directory", root=path, tools=tools,
                      schema=_first_file([path / "vswitch.ovsschema",
                                          path.parent / "share/openvswitch/vswitch.ovsschema"]),
                      mounts=(path,))
    raise InstallError(
        f"--ovs-bindir {given}: no OVS programs there (looked for an install prefix, its "
        f"bin/ or sbin/, and a build tree with vswitchd/ovs-vswitchd); "
        f"missing {', '.join(missing)}")


def library_env(layout: Layout, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment additions that let the layout's programs find its own libraries."""
    if not layout.library_path:
        return {}
    old = (base if base is not None else os.environ).get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": os.pathsep.join([*map(str, layout.library_path),
                                                *([old] if old else [])])}


def missing_libraries(layout: Layout) -> list[str]:
    """Shared libraries the programs need that this system lacks (from ldd)."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    env = {**os.environ, **library_env(layout)}
    missing: list[str] = []
    for tool in ("ovs-vswitchd", "ovsdb-server", "ovs-vsctl"):
        try:
            out = subprocess.run([ldd, str(layout.tools[tool])], capture_output=True, text=True,
                                 timeout=10, env=env).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for m in re.finditer(r"^\s*(\S+) => not found", out, re.M):
            if m.group(1) not in missing:
                missing.append(m.group(1))
    return missing


def program_files(layout: Layout) -> list[Path]:
    """ovs-vswitchd and the build's own OVS libraries: where its code is."""
    files = [layout.tools["ovs-vswitchd"]]
    for d in layout.library_path:
        files += sorted(p for p in d.glob("libopenvswitch*.so*")
                        if p.is_file() and not p.is_symlink())
    return files


def identity(layout: Layout) -> str:
    """A digest of the code that runs: two layouts with one identity are one build."""
    digest = hashlib.sha256()
    for path in program_files(layout):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass
class OvsInstall:
    """An OVS build or install located: its layout, versions and what it was built with."""

    layout: Layout
    version: tuple[int, ...]
    version_text: str
    dpdk_version: str | None = None
    # An ovs-vswitchd built with DPDK: the main one if it has DPDK, else a separate
    # binary such as Debian's ovs-vswitchd-dpdk (openvswitch-switch-dpdk).  None: no
    # DPDK build found, and the dpdk backend is skipped.
    vswitchd_dpdk: Path | None = None
    chosen_by: str = ""  # "--ovs-bindir", "OVS_BINDIR", "runtime", "PATH"
    notes: list[str] = field(default_factory=list)

    @classmethod
    def locate(cls, bindir: str | None = None, chosen_by: str = "") -> "OvsInstall":
        layout = find_layout(bindir)
        exe = layout.tools["ovs-vswitchd"]
        env = {**os.environ, **library_env(layout)}
        try:
            proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                                  timeout=10, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstallError(f"{exe} --version failed: {exc}") from None
        version = parse_ovs_version(proc.stdout)
        if version is None:
            missing = missing_libraries(layout)
            if missing:
                raise InstallError(f"{exe} needs {', '.join(missing)}, which this system lacks")
            why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise InstallError(f"{exe} --version printed no Open vSwitch version ({why})")
        if version < MIN_OVS:
            raise InstallError(
                f"{exe} is Open vSwitch {fmt_version(version)}; this suite needs >= "
                f"{fmt_version(MIN_OVS)}")
        if layout.schema is None:
            raise InstallError(f"vswitch.ovsschema not found for {layout.describe()}")
        dpdk = re.search(r"DPDK\s+(\S+)", proc.stdout)
        vswitchd_dpdk, dpdk_version = (
            (exe, dpdk.group(1)) if dpdk else _find_dpdk_vswitchd(layout, version))
        if not chosen_by:
            chosen_by = "--ovs-bindir" if bindir else (
                "runtime" if os.environ.get("OVSTEST_SEALED") else "PATH")
        return cls(layout=layout, version=version,
                   version_text=proc.stdout.strip().splitlines()[0],
                   dpdk_version=dpdk_version, vswitchd_dpdk=vswitchd_dpdk, chosen_by=chosen_by)

    @property
    def tools(self) -> dict[str, Path]:
        return self.layout.tools

    @property
    def schema(self) -> Path:
        assert self.layout.schema is not None
        return self.layout.schema

    @property
    def version_str(self) -> str:
        return fmt_version(self.version)

    @property
    def env(self) -> dict[str, str]:
        """Environment additions every program of this install needs."""
        return library_env(self.layout)

    def describe(self) -> str:
        """Which OVS this is, where, and how it was chosen (run header, report)."""
        how = {"runtime": "the provisioned runtime's package", "PATH": "found on PATH",
               "--ovs-bindir": "chosen by --ovs-bindir",
               "OVS_BINDIR": "chosen by OVS_BINDIR"}.get(self.chosen_by,
                                                          f"chosen by {self.chosen_by}")
        where = (str(self.tools["ovs-vswitchd"]) if self.layout.kind == "PATH"
                 else self.layout.describe())
        return f"Open vSwitch {self.version_str} at {where}; {how}"

    @cached_property
    def dummy_options(self) -> frozenset[str]:
        """netdev-dummy option names compiled into this ovs-vswitchd or its libraries."""
        data = b"".join(p.read_bytes() for p in program_files(self.layout))
        return frozenset(o for o in DUMMY_OPTIONS if o.encode() + b"\0" in data)

    def tool(self, name: str) -> str:
        return str(self.tools[name])


def _find_dpdk_vswitchd(layout: Layout,
                        version: tuple[int, ...]) -> tuple[Path | None, str | None]:
    """A DPDK-enabled ovs-vswitchd of the same OVS version next to the main one:
    `ovs-vswitchd-dpdk` beside it, or Debian's alternative in
    <prefix>/lib/openvswitch-switch-dpdk/.  Returns (path, DPDK version)."""
    main = layout.tools["ovs-vswitchd"]
    real = main.resolve()
    cands = [main.parent / "ovs-vswitchd-dpdk"]
    for prefix in dict.fromkeys((main.parent.parent, real.parent.parent, real.parent.parent.parent)):
        cands.append(prefix / "lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
    for cand in dict.fromkeys(cands):
        if not _executable(cand):
            continue
        try:
            out = subprocess.run([str(cand), "--version"], capture_output=True, text=True,
                                 timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        dpdk = re.search(r"DPDK\s+(\S+)", out)
        if dpdk and parse_ovs_version(out) == version:
            return cand, dpdk.group(1)
    return None, None


def which(name: str) -> str | None:
    """The path of a program on PATH or in /usr/sbin or /sbin, or None."""
    return shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/sbin") / name) if p.exists()), None)


def main(argv: list[str]) -> int:
    """`python3 -m harness.install [DIR]`: probe an OVS where it will run (the sealed
    runtime); print its facts as JSON, or one line and exit 2 if it cannot be used."""
    given = argv[0] if argv else None
    try:
        layout = find_layout(given)
        missing = missing_libraries(layout)
        if missing:
            raise InstallError(
                f"{layout.tools['ovs-vswitchd']} needs {', '.join(missing)}, which the runtime "
                "lacks (build without it, or add its Debian package to the runtime)")
        install = OvsInstall.locate(given)
    except InstallError as exc:
        print(f"ovstest: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"version": install.version_str,
                      "describe": f"Open vSwitch {install.version_str} at {layout.describe()}",
                      "identity": identity(layout), "dummy_options": len(install.dummy_options),
                      "dpdk": install.dpdk_version}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
