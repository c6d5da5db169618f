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
    return _join(_sub_lines(text, [(r"duration:[0-9.][0-9.]*", "duration:0.0"),
                                   (r"used:[0-9.][0-9.]*", "used:0.0")]))


_XOUT_COMMON = [(r"mega_ufid:[-0-9a-f]* ", ""), (r"ufid:[-0-9a-f]* ", ""),
                (r"used:[0-9.][0-9.]*", "used:0.0")]
_COUNTS = [(r"packets:[0-9]*", "packets:0"), (r"bytes:[0-9]*", "bytes:0")]


def strip_xout(text: str) -> str:
    return _join(sorted(_sub_lines(text, _XOUT_COMMON + [(r"actions:.*", "actions: <del>")]
                                   + _COUNTS)))


def strip_xout_keep_actions(text: str) -> str:
    return _join(sorted(_sub_lines(text, _XOUT_COMMON + _COUNTS)))


def strip_used(text: str) -> str:
    return _join(_sub_lines(text, [(r"used:[0-9]*\.[0-9]*", "used:0.0")]))


def strip_stats(text: str) -> str:
    return _join(_sub_lines(text, [(r"packets:[0-9]*", "packets:0"),
                                   (r"bytes:[0-9]*", "bytes:0")]))


def strip_ufid(text: str) -> str:
    return _join(_sub_lines(text, [(r"mega_ufid:[-0-9a-f]* ", ""), (r"ufid:[-0-9a-f]* ", "")]))


def strip_metadata(text: str) -> str:
    return _join(_sub_lines(text, [(r"metadata=0x[0-9a-f]*", "metadata=0x0")]))


def filter_flow_install(text: str) -> str:
    """grep flow_add | strip the prefix | sort -u."""
    lines = {re.sub(r".*flow_add: ", "", ln) for ln in text.splitlines() if "flow_add" in ln}
    return _join(sorted(lines))


def filter_flow_dump(text: str) -> str:
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
    return _grep_dbg(text, r"dpif_offload_dummy.*flow put\[create\]")


def filter_hw_flow_del(text: str) -> str:
    return _grep_dbg(text, r"dpif_offload_dummy.*flow del")


def filter_hw_packet_netdev_dummy(text: str) -> str:
    return _grep_dbg(text, r"dpif_offload_dummy.*: packet:.*with mark")


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
