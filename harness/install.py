"""Locate an OVS install (package or build tree) and probe what it can do."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

MIN_OVS = (3, 7)
TOOLS = ("ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl", "ovs-appctl")

# netdev-dummy options the cases may set; probed by name in the binary so a case
# needing one that this build lacks is skipped with the option named.
DUMMY_OPTIONS = (
    "ol_ip_rx_csum_set_good", "ol_ip_rx_csum_set_bad", "ol_ip_rx_csum_set_partial",
    "ol_l4_rx_csum_set_good", "ol_l4_rx_csum_set_bad", "ol_l4_rx_csum_set_partial",
    "ol_ip_tx_csum", "ol_ip_tx_csum_disabled", "ol_l4_tx_csum", "ol_l4_tx_csum_disabled",
    "ol_out_ip_tx_csum", "ol_out_ip_tx_csum_disabled",
    "ol_out_udp_tx_csum", "ol_out_udp_tx_csum_disabled", "ol_tso_segsz",
)


class InstallError(Exception):
    """The OVS install cannot be used; the message says why and what to do."""


def _search_dirs(bindir: Path | None) -> list[Path]:
    dirs: list[Path] = []
    if bindir is not None:
        # An install prefix's bin/sbin, or a build tree's subdirectories.
        dirs += [bindir, bindir.parent / "sbin", bindir.parent / "bin",
                 bindir / "vswitchd", bindir / "ovsdb", bindir / "utilities"]
    else:
        dirs += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
        dirs += [Path("/usr/sbin"), Path("/usr/local/sbin")]
    return dirs


def parse_ovs_version(text: str) -> tuple[int, ...] | None:
    m = re.search(r"\(Open vSwitch\)\s+(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


@dataclass
class OvsInstall:
    tools: dict[str, Path]
    schema: Path
    version: tuple[int, ...]
    version_text: str
    dpdk_version: str | None = None
    notes: list[str] = field(default_factory=list)
    # An ovs-vswitchd built with DPDK: the main one if it has DPDK, else a separate
    # binary such as Debian's ovs-vswitchd-dpdk (openvswitch-switch-dpdk).  None: no
    # DPDK build found, and the dpdk backend is skipped.
    vswitchd_dpdk: Path | None = None

    @classmethod
    def locate(cls, bindir: str | None = None) -> "OvsInstall":
        base = Path(bindir).resolve() if bindir else None
        if base is not None and not base.is_dir():
            raise InstallError(f"--ovs-bindir {bindir}: no such directory")
        tools: dict[str, Path] = {}
        for tool in TOOLS:
            for d in _search_dirs(base):
                cand = d / tool
                if cand.is_file() and os.access(cand, os.X_OK):
                    tools[tool] = cand
                    break
        missing = [t for t in TOOLS if t not in tools]
        if missing:
            where = f"in {base}" if base else "on PATH"
            raise InstallError(
                f"no {', '.join(missing)} {where}; install Open vSwitch >= "
                f"{'.'.join(map(str, MIN_OVS))}, pass --ovs-bindir, or run through ./ovstest "
                "which provisions one")
        out = subprocess.run([str(tools["ovs-vswitchd"]), "--version"],
                             capture_output=True, text=True, timeout=10).stdout
        version = parse_ovs_version(out)
        if version is None:
            raise InstallError(f"{tools['ovs-vswitchd']} --version printed no version")
        if version < MIN_OVS:
            raise InstallError(
                f"{tools['ovs-vswitchd']} is Open vSwitch {'.'.join(map(str, version))}; "
                f"this suite needs >= {'.'.join(map(str, MIN_OVS))}")
        dpdk = re.search(r"DPDK\s+(\S+)", out)
        vswitchd_dpdk, dpdk_version = (
            (tools["ovs-vswitchd"], dpdk.group(1)) if dpdk
            else _find_dpdk_vswitchd(base, tools, version))
        return cls(tools=tools, schema=cls._find_schema(base, tools), version=version,
                   version_text=out.strip().splitlines()[0],
                   dpdk_version=dpdk_version, vswitchd_dpdk=vswitchd_dpdk)

    @staticmethod
    def _find_schema(base: Path | None, tools: dict[str, Path]) -> Path:
        prefix = tools["ovs-vswitchd"].parent.parent
        cands = [prefix / "share/openvswitch/vswitch.ovsschema"]
        if base is not None:
            cands += [base / "vswitchd/vswitch.ovsschema",
                      base.parent / "share/openvswitch/vswitch.ovsschema"]
        cands += [Path("/usr/share/openvswitch/vswitch.ovsschema"),
                  Path("/usr/local/share/openvswitch/vswitch.ovsschema")]
        for c in cands:
            if c.is_file():
                return c
        raise InstallError("vswitch.ovsschema not found (looked in: "
                           + ", ".join(str(c) for c in cands) + ")")

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))

    @cached_property
    def dummy_options(self) -> frozenset[str]:
        """netdev-dummy option names compiled into this ovs-vswitchd."""
        data = self.tools["ovs-vswitchd"].read_bytes()
        return frozenset(o for o in DUMMY_OPTIONS if o.encode() + b"\0" in data)

    def tool(self, name: str) -> str:
        return str(self.tools[name])


def _find_dpdk_vswitchd(base: Path | None, tools: dict[str, Path],
                        version: tuple[int, ...]) -> tuple[Path | None, str | None]:
    """A DPDK-enabled ovs-vswitchd of the same OVS version next to the main one:
    `ovs-vswitchd-dpdk` in the search directories, or Debian's alternative in
    <prefix>/lib/openvswitch-switch-dpdk/.  Returns (path, DPDK version)."""
    main = tools["ovs-vswitchd"]
    real = main.resolve()
    cands = [d / "ovs-vswitchd-dpdk" for d in _search_dirs(base)]
    for prefix in dict.fromkeys((main.parent.parent, real.parent.parent, real.parent.parent.parent)):
        cands.append(prefix / "lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
    for cand in dict.fromkeys(cands):
        if not (cand.is_file() and os.access(cand, os.X_OK)):
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
    return shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/sbin") / name) if p.exists()), None)
