"""The Linux kernel as the far end of a tunnel: native tunnel devices in a
namespace, probes for the kernel features they need, the kernel's own
verdict counters; the capture that also sees what the kernel transmits
(netns.Sniffer) is re-exported.

A kernel feature is probed by creating the device in a scratch namespace
(upstream's OVS_CHECK_VXLAN/GRE/GENEVE/ERSPAN ask `ip link add foo type X
help`, which only shows that iproute2 knows the type; creating one shows the
kernel has it).  The probe's answer names the missing feature, so a case that
needs it skips saying which, and runs unchanged on a kernel that has it.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass

# The capture (both directions, with the virtio-net header) is the kernel side's
# own, re-exported here for the tunnel judges that import it from this module.
from datapath.backends.netns import Captured, Netns, NetnsError, Sniffer, unique_name


@dataclass(frozen=True)
class NativeKind:
    """One kind of kernel tunnel device and the OVS port type that talks to it."""

    link_type: str  # `ip link add ... type X`
    ovs_type: str  # Interface type
    underlay: int  # 4 or 6
    probe_args: tuple[str, ...]  # the smallest device of this kind
    feature: str  # how the kernel names it (CONFIG_*)


KINDS: dict[str, NativeKind] = {
    "vxlan": NativeKind("vxlan", "vxlan", 4, ("id", "0", "dstport", "4789", "remote",
                                               "192.0.2.1"), "CONFIG_VXLAN"),
    "vxlan6": NativeKind("vxlan", "vxlan", 6, ("id", "0", "dstport", "4789", "remote",
                                                "2001:db8::1", "udp6zerocsumtx",
                                                "udp6zerocsumrx"), "CONFIG_VXLAN"),
    "geneve": NativeKind("geneve", "geneve", 4, ("id", "0", "remote", "192.0.2.1"),
                         "CONFIG_GENEVE"),
    "geneve6": NativeKind("geneve", "geneve", 6, ("id", "0", "remote", "2001:db8::1",
                                                  "udp6zerocsumtx", "udp6zerocsumrx"),
                          "CONFIG_GENEVE"),
    "gre": NativeKind("gretap", "gre", 4, ("remote", "192.0.2.1", "local", "192.0.2.2"),
                      "CONFIG_NET_IPGRE (gretap)"),
    "ip6gre": NativeKind("ip6gretap", "ip6gre", 6, ("remote", "2001:db8::1", "local",
                                                    "2001:db8::2"),
                         "CONFIG_IPV6_GRE (ip6gretap)"),
    "erspan": NativeKind("erspan", "erspan", 4, ("remote", "192.0.2.1", "local", "192.0.2.2",
                                                 "seq", "key", "1", "erspan_ver", "1",
                                                 "erspan", "7"),
                         "CONFIG_NET_IPGRE (erspan)"),
    "ip6erspan": NativeKind("ip6erspan", "ip6erspan", 6,
                            ("remote", "2001:db8::1", "local", "2001:db8::2", "seq", "key",
                             "1", "erspan_ver", "1", "erspan", "7"),
                            "CONFIG_IPV6_GRE (ip6erspan)"),
    # Layer-3 tunnels (system-layer3-tunnels.at): VXLAN-GPE on a flow-based
    # device, and GRE without Ethernet (`type gre`, not gretap).
    "vxlan-gpe": NativeKind("vxlan", "vxlan", 4, ("dstport", "4789", "external", "gpe"),
                            "CONFIG_VXLAN (gpe)"),
    "gre-l3": NativeKind("gre", "gre", 4, ("remote", "192.0.2.1", "local", "192.0.2.2"),
                         "CONFIG_NET_IPGRE (gre)"),
    # Not a tunnel, but a device a tunnel test stacks on one (ADD_VLAN).
    "vlan": NativeKind("vlan", "", 4, ("id", "5"), "CONFIG_VLAN_8021Q (802.1Q vlan)"),
}


# SRv6 is no device: the far end is a seg6 encap route and a seg6local one
# (OVS_CHECK_SRV6 probes the first).
SEG6_FEATURE = "CONFIG_IPV6_SEG6_LWTUNNEL (seg6 routes)"
# Nor is "tc-police": OVS's ingress policing on a Linux device, a tc policer
# under a matchall classifier, or under a basic one where matchall is missing.
TC_POLICE_FEATURE = ("CONFIG_NET_CLS_MATCHALL or CONFIG_NET_CLS_BASIC, with "
                     "CONFIG_NET_ACT_POLICE (tc ingress policers)")
# The kernel features that are no device, beside KINDS.
OTHER_FEATURES = ("srv6", "tc-police")


@functools.cache
def missing(kind: str) -> str | None:
    """None if this kernel can make a `kind` device (or, for "srv6", seg6
    routes); otherwise the skip reason, naming the kernel feature and what
    `ip` answered."""
    if kind == "srv6":
        return _missing_seg6()
    if kind == "tc-police":
        return _missing_tc_police()
    spec = KINDS[kind]
    ns = Netns(unique_name("probe"))
    try:
        if spec.underlay == 6:
            ns.enable_ipv6()
        parent: tuple[str, ...] = ()
        if kind == "vlan":  # a VLAN device needs an Ethernet device under it
            ns.ip("link", "add", "probe1", "type", "veth", "peer", "name", "probe2")
            parent = ("link", "probe1")
        proc = ns.ip("link", "add", *parent, "probe0", "type", spec.link_type,
                     *spec.probe_args, check=False)
    finally:
        ns.delete()
    if proc.returncode == 0:
        return None
    return (f"this kernel has no {spec.link_type} devices ({spec.feature}): "
            f"'ip link add probe0 type {spec.link_type} ...' says "
            f"{(proc.stderr or proc.stdout).strip()!r}")


def _missing_seg6() -> str | None:
    ns = Netns(unique_name("probe"))
    try:
        ns.enable_ipv6()
        ns.ip("link", "set", "lo", "up")
        proc = ns.ip("-6", "route", "add", "fc00::1/96", "encap", "seg6", "mode", "encap",
                     "segs", "fc00::2", "dev", "lo", check=False)
    finally:
        ns.delete()
    if proc.returncode == 0:
        return None
    return (f"this kernel has no SRv6 routes ({SEG6_FEATURE}): 'ip -6 route add fc00::1/96 "
            f"encap seg6 mode encap ...' says {(proc.stderr or proc.stdout).strip()!r}")


def _missing_tc_police() -> str | None:
    ns = Netns(unique_name("probe"))
    answers = []
    try:
        ns.ip("link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
        proc = ns.run(["tc", "qdisc", "add", "dev", "probe0", "ingress"], check=False)
        if proc.returncode != 0:
            return (f"this kernel has no ingress qdisc (CONFIG_NET_SCH_INGRESS), under "
                    f"which OVS polices: 'tc qdisc add ... ingress' says "
                    f"{(proc.stderr or proc.stdout).strip()!r}")
        for cls in ("matchall", "basic"):
            proc = ns.run(["tc", "filter", "add", "dev", "probe0", "parent", "ffff:", cls,
                           "action", "police", "rate", "1mbit", "burst", "10k"], check=False)
            if proc.returncode == 0:
                return None
            said = (proc.stderr or proc.stdout).strip() or "no output"
            answers.append(f"{cls}: {said.splitlines()[0]!r}")
    finally:
        ns.delete()
    return (f"this kernel has no tc policers ({TC_POLICE_FEATURE}): 'tc filter add ... "
            f"action police' says {'; '.join(answers)}")


def add_native_tunnel(ns: Netns, kind: str, name: str, remote: str, overlay: str,
                      type_args: tuple[str, ...] = (), link_args: tuple[str, ...] = (),
                      mtu: int | None = None) -> None:
    """ADD_NATIVE_TUNNEL / ADD_NATIVE_TUNNEL6: the device, its overlay address,
    MTU 1450 (1430 over IPv6, as upstream), up."""
    spec = KINDS[kind]
    ns.ip("link", "add", "dev", name, "type", spec.link_type, "remote", remote, *type_args)
    ns.ip("addr", "add", "dev", name, overlay)
    ns.ip("link", "set", "dev", name, "mtu", "1450", *link_args, "up")
    if spec.underlay == 6 or mtu:
        ns.ip("link", "set", "dev", name, "mtu", str(mtu or 1430))


# ----------------------------------------------------------------------------
# the kernel's verdicts


def snmp_counters(ns: Netns) -> dict[str, int]:
    """/proc/net/snmp and snmp6 of the namespace (what `nstat -az` reads), as
    {"Udp.InCsumErrors": n, "Ip.InHdrErrors": n, "Udp6InCsumErrors": n, ...}."""
    out: dict[str, int] = {}
    with ns.entered():
        with open("/proc/thread-self/net/snmp") as f:
            lines = f.read().splitlines()
        try:
            with open("/proc/thread-self/net/snmp6") as f:
                six = f.read().splitlines()
        except OSError:
            six = []
    for head, values in zip(lines[::2], lines[1::2]):
        proto, _, names = head.partition(":")
        for name, value in zip(names.split(), values.partition(":")[2].split()):
            out[f"{proto}.{name}"] = int(value)
    for line in six:
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = int(parts[1])
    return out


# The counters a receiver moves when it rejects a packet for a bad header or
# checksum (RFC 1122 3.2.1.2, 4.1.3.4, 4.2.2.7; RFC 8200 8.1).
CSUM_ERROR_COUNTERS = ("Ip.InHdrErrors", "Ip.InAddrErrors", "Udp.InCsumErrors",
                       "Udp.InErrors", "Tcp.InCsumErrors", "Tcp.InErrs", "Icmp.InCsumErrors",
                       "Icmp.InErrors", "Ip6InHdrErrors", "Udp6InCsumErrors", "Udp6InErrors",
                       "Icmp6InCsumErrors", "Icmp6InErrors")


def moved(before: dict[str, int], after: dict[str, int],
          names: tuple[str, ...] = CSUM_ERROR_COUNTERS) -> dict[str, int]:
    """The counters among `names` that changed, with their change."""
    return {n: after.get(n, 0) - before.get(n, 0) for n in names
            if after.get(n, 0) != before.get(n, 0)}


def link_errors(ns: Netns, dev: str) -> dict[str, int]:
    """A device's rx/tx error and drop counters (`ip -s link`)."""
    data = json.loads(ns.ip("-s", "-j", "link", "show", "dev", dev).stdout)[0]
    stats = data.get("stats64") or data.get("stats") or {}
    return {f"{d}_{k}": int(stats.get(d, {}).get(k, 0)) for d in ("rx", "tx")
            for k in ("errors", "dropped", "crc_errors", "frame_errors") if k in stats.get(d, {})}


def require(*kinds: str) -> str | None:
    """The first missing kernel feature among `kinds`, or None."""
    for kind in kinds:
        why = missing(kind)
        if why:
            return why
    return None


__all__ = ["KINDS", "NativeKind", "missing", "require", "add_native_tunnel", "snmp_counters",
           "moved", "link_errors", "Sniffer", "Captured", "CSUM_ERROR_COUNTERS", "NetnsError"]
