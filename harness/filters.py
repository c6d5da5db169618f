"""The output normalisers the upstream tests pipe through, as plain functions."""
from __future__ import annotations

import re


def _sub_lines(text: str, rules: list[tuple[str, str]]) -> list[str]:
    out = []
    for line in text.splitlines():
        for pat, rep in rules:
            line = re.sub(pat, rep, line, count=1)
        out.append(line)
    return out


def _join(lines: list[str]) -> str:
    return "".join(f"{ln}\n" for ln in lines)


def strip_timers(text: str) -> str:
    """Durations and used times zeroed."""
    return _join(_sub_lines(text, [(r"duration:[0-9.][0-9.]*", "duration:0.0"),
                                   (r"used:[0-9.][0-9.]*", "used:0.0")]))


_XOUT_COMMON = [(r"mega_ufid:[-0-9a-f]* ", ""), (r"ufid:[-0-9a-f]* ", ""),
                (r"used:[0-9.][0-9.]*", "used:0.0")]
_COUNTS = [(r"packets:[0-9]*", "packets:0"), (r"bytes:[0-9]*", "bytes:0")]


def strip_xout(text: str) -> str:
    """ofproto/trace's xout with ufids, used times and counts masked and the actions deleted, sorted."""
    return _join(sorted(_sub_lines(text, _XOUT_COMMON + [(r"actions:.*", "actions: <del>")]
                                   + _COUNTS)))


def strip_xout_keep_actions(text: str) -> str:
    """ofproto/trace's xout with ufids, used times and counts masked, the actions kept, sorted."""
    return _join(sorted(_sub_lines(text, _XOUT_COMMON + _COUNTS)))


def strip_used(text: str) -> str:
    """The used times zeroed."""
    return _join(_sub_lines(text, [(r"used:[0-9]*\.[0-9]*", "used:0.0")]))


def strip_stats(text: str) -> str:
    """The packet and byte counts zeroed."""
    return _join(_sub_lines(text, [(r"packets:[0-9]*", "packets:0"),
                                   (r"bytes:[0-9]*", "bytes:0")]))


def strip_ufid(text: str) -> str:
    """The ufids and mega_ufids removed."""
    return _join(_sub_lines(text, [(r"mega_ufid:[-0-9a-f]* ", ""), (r"ufid:[-0-9a-f]* ", "")]))


def strip_metadata(text: str) -> str:
    """The metadata fields zeroed."""
    return _join(_sub_lines(text, [(r"metadata=0x[0-9a-f]*", "metadata=0x0")]))


def filter_flow_install(text: str) -> str:
    """grep flow_add | strip the prefix | sort -u."""
    lines = {re.sub(r".*flow_add: ", "", ln) for ln in text.splitlines() if "flow_add" in ln}
    return _join(sorted(lines))


def filter_flow_dump(text: str) -> str:
    """The log's flow_dump lines, their used times zeroed, sorted and without duplicates."""
    lines = {re.sub(r"used:[0-9.][0-9.]*", "used:0.0", re.sub(r".*flow_dump ", "", ln))
             for ln in text.splitlines() if "flow_dump " in ln}
    return _join(sorted(lines))


def uuidfilt(text: str) -> str:
    """Replace each distinct UUID by <N> in order of first appearance."""
    seen: dict[str, int] = {}

    def repl(m: re.Match[str]) -> str:
        return f"<{seen.setdefault(m.group(0), len(seen))}>"
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", repl, text)


def _grep_dbg(text: str, pattern: str) -> str:
    """grep PATTERN | sed 's/.*|DBG|//' | sort -u."""
    lines = {re.sub(r".*\|DBG\|", "", ln) for ln in text.splitlines() if re.search(pattern, ln)}
    return _join(sorted(lines))


def filter_hw_flow_install(text: str) -> str:
    """The dummy offload provider's flow creations in the log."""
    return _grep_dbg(text, r"dpif_offload_dummy.*flow put\[create\]")


def filter_hw_flow_del(text: str) -> str:
    """The dummy offload provider's flow deletions in the log."""
    return _grep_dbg(text, r"dpif_offload_dummy.*flow del")


def filter_hw_packet_netdev_dummy(text: str) -> str:
    """The dummy offload provider's marked packets in the log."""
    return _grep_dbg(text, r"dpif_offload_dummy.*: packet:.*with mark")


# -- pmd.at's helpers ----------------------------------------------------------------


def _awk_fields(line: str) -> list[str]:
    """awk's $1..$NF (split on blanks and tabs); index 0 is $0."""
    return [line, *line.split()]


def _awk_field(fields: list[str], n: int) -> str:
    return fields[n] if n < len(fields) else ""


def sed_numa_core(text: str) -> str:
    """SED_NUMA_CORE_PATTERN: 'numa_id N core_id M:' -> 'numa_id <cleared> core_id <cleared>:'."""
    return _join(_sub_lines(text, [(r"(numa_id )[0-9]*( core_id )[0-9]*:",
                                    r"\1<cleared>\2<cleared>:")]))


def parse_pmd_rxq_show(text: str) -> str:
    """parse_pmd_rxq_show: one 'port rxq numa core' line per rxq, sorted."""
    numa = core = ""
    out = []
    for line in text.splitlines():
        f = _awk_fields(line)
        if "pmd thread" in line:
            numa, core = _awk_field(f, 4), _awk_field(f, 6)[:-1]
        if line.startswith("  port:"):
            out.append(" ".join((_awk_field(f, 2), _awk_field(f, 4), numa, core)))
    return _join(sorted(out))


def join_avail_lines(text: str) -> str:
    r"""awk '/AVAIL$/ { printf("%s\t", $0); next } 1': a line ending in AVAIL is
    joined to the next one by a tab."""
    out, pending = [], ""
    for line in text.splitlines():
        if line.endswith("AVAIL"):
            pending += line + "\t"
            continue
        out.append(pending + line)
        pending = ""
    return _join(out) + pending


def parse_pmd_rxq_show_group(text: str) -> str:
    """parse_pmd_rxq_show_group: 'port: NAME queue-id: Q1 Q2 Q3 Q4' per core line."""
    out = []
    for line in text.split("\n"):
        if "port:" in line:
            f = _awk_fields(line)
            out.append(" ".join(_awk_field(f, n) for n in (1, 2, 3, 4, 13, 22, 31)))
    return _join(out)


def flow_dump_prepend_pmd(text: str) -> str:
    """flow_dump_prepend_pmd: each flow prefixed with its pmd's core id (-1: main), sorted."""
    pmd_id = ""
    out = []
    for line in text.splitlines():
        if "flow-dump from the main" in line:
            pmd_id = "-1"
            continue
        if "flow-dump from pmd" in line:
            pmd_id = _awk_field(_awk_fields(line), 7)
            continue
        out.append(f"{pmd_id} {line}")
    return _join(sorted(out))


def strip_hw_offload(text: str) -> str:
    """dpif-netdev.at's strip_hw_offload (dpctl/dump-flows -m)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("flow-dump from"):
            continue
        for pat, rep in ((r"ufid:[-0-9a-f]*,", ""), (r"used:[0-9.][0-9.]*", "used:0.0")):
            line = re.sub(pat, rep, line, count=1)
        line = re.sub(r"[^,]*\(0/0\),", "", line)
        for pat, rep in ((r"eth\([^)]*\)", "eth()"), (r"ipv4\([^)]*\)", "ipv4()"),
                         (r"udp\([^)]*\)", "udp()"), (r", dp-extra-info.*", "")):
            line = re.sub(pat, rep, line, count=1)
        lines.append(line.lstrip())
    return _join(sorted(lines))


def bre(pattern: str) -> str:
    """A grep (POSIX basic) pattern as a Python regex: ( ) { } | + ? are literal there."""
    return re.sub(r"([(){}|+?])", r"\\\1", pattern)


def offload_counters(text: str, port: str = "p1") -> str:
    r"""`ovs-appctl --format json dpif/offload/show | sed 's/.*"PORT":{\([^}]*\)}.*/\1/;
    s/,/\n/g; s/"//g' | sed -n '/^rx_offload_/p' | sort`."""
    body = re.sub(rf'.*"{re.escape(port)}":\{{([^}}]*)\}}.*', r"\1", text.rstrip("\n"), count=1)
    lines = body.replace(",", "\n").replace('"', "").splitlines()
    return _join(sorted(ln for ln in lines if ln.startswith("rx_offload_")))


_OFCTL_STRIP = [(r" \(xid=0x[0-9a-fA-F]*\)", ""), (r" duration=[0-9.]*s,", ""),
                (r" cookie=0x0,", ""), (r" table=0,", ""), (r" n_packets=0,", ""),
                (r" n_offload_packets=[0-9]*,", ""), (r" n_bytes=0,", ""),
                (r" n_offload_bytes=[0-9]*,", ""), (r" idle_age=[0-9]*,", ""),
                (r" hard_age=[0-9]*,", ""), (r"dp_hash=0x[0-9a-f]*/", "dp_hash=0x0/"),
                (r"recirc_id=0x[0-9a-f]*,", "recirc_id=0x0,"),
                (r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\|", ""),
                (r"dir/[0-9]*/br0.mgmt", "dir/XXXX/br0.mgmt")]


def ofctl_strip(text: str) -> str:
    """ofproto-macros.at ofctl_strip: drop what varies from run to run."""
    return _join(_sub_lines(text, _OFCTL_STRIP))


def strip_recirc(text: str) -> str:
    """ofproto-macros.at strip_recirc."""
    return _join(_sub_lines(text, [(r"recirc_id\([x0-9a-f]*\)", "recirc_id(<recirc>)"),
                                   (r"recirc_id=[x0-9a-f]*", "recirc_id=<recirc>"),
                                   (r"recirc\([x0-9a-f]*\)", "recirc(<recirc>)")]))


def strip_ptype(text: str) -> str:
    """ofproto-macros.at strip_ptype."""
    return _join(_sub_lines(text, [(r"packet_type\(ns=[0-9]*,id=[0-9]*\),", "")]))


def strip_eth(text: str) -> str:
    """ofproto-macros.at strip_eth: a bare eth() removed."""
    return _join(_sub_lines(text, [(r"eth\(\),", "")]))


def strip_key32(text: str) -> str:
    """ofproto-macros.at strip_key32."""
    return _join(_sub_lines(text, [(r"key32\([0-9 /]*\),", "")]))


def strip_dp_hash(text: str) -> str:
    """ofproto-macros.at strip_dp_hash."""
    return _join(_sub_lines(text, [(r"dp_hash\([0-9a-fx/]*\),", "")]))


def strip_duration(text: str) -> str:
    """ofproto-macros.at strip_duration."""
    return _join(_sub_lines(text, [(r"duration=[0-9.]*s,", "")]))


def parse_ufid(text: str) -> list[str]:
    """ofproto-macros.at parse_ufid: every ufid:... in the text."""
    return re.findall(r"ufid:[-0-9a-f]*", text)
