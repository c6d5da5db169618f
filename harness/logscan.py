"""Daemon log and stderr checks with upstream's allowlists (ofproto-macros.at)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

# OVS_VSWITCHD_STOP's check_logs: lines that are never a failure.
LOG_ALLOW = (
    r"reset by peer",
    r"Broken pipe",
    r"is not connected",
    r"timeval.*Unreasonably long [0-9]*ms poll interval",
    r"timeval.*faults: [0-9]* minor, [0-9]* major",
    r"timeval.*disk: [0-9]* reads, [0-9]* writes",
    r"timeval.*context switches: [0-9]* voluntary, [0-9]* involuntary",
    r"ovs_rcu.*blocked [0-9]* ms waiting for .* to quiesce",
    r"Dropped [0-9]* log messages",
    r"setting extended ack support failed",
    r"ETHTOOL_GSSET_INFO",
    r"Spent an unreasonably long [0-9]*ms dumping flows",
)

# OVS_VSWITCHD_START: vswitchd stderr lines that are expected at start.
STDERR_ALLOW = (
    r"ovs_numa\|INFO\|Discovered ",
    r"odp_execute_impl\|INFO\|Action implementation ",
    r"vlog\|INFO\|opened log file",
    r"vswitchd\|INFO\|ovs-vswitchd \(Open vSwitch\)",
    r"reconnect\|INFO\|",
    r"dpif_netlink\|INFO\|Generic Netlink family .ovs_datapath. does not exist",
    r"ofproto\|INFO\|using datapath ID",
    r"netdev_linux\|INFO\|.*device has unknown hardware address family",
    r"ofproto\|INFO\|datapath ID changed to fedcba9876543210",
    r"dpdk\|INFO\|DPDK Disabled - Use other_config:dpdk-init to enable",
    r"netlink_socket\|INFO\|netlink: could not enable listening to all nsid",
    r"dpif_offload\|INFO\|Flow HW offload is enabled",
    r"probe tc:",
    r"setting extended ack support failed",
    r"tc: Using policy",
    r"hw-offload-priority configuration has an unknown type;",
)

_SEVERE = re.compile(r"\|(WARN|ERR|EMER)\|")


def _matches_any(line: str, patterns: Iterable[str]) -> bool:
    return any(re.search(p, line) for p in patterns)


def scan_lines(lines: Iterable[str], extra_allow: Iterable[str] = ()) -> list[str]:
    """WARN/ERR/EMER lines not covered by upstream's allowlist or the extra patterns."""
    allow = (*LOG_ALLOW, *extra_allow)
    return [ln for ln in lines if _SEVERE.search(ln) and not _matches_any(ln, allow)]


def scan_log(path: Path, extra_allow: Iterable[str] = ()) -> list[str]:
    """The lines of a daemon log that upstream's allowlists (and EXTRA_ALLOW) do not excuse."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return scan_lines(text.splitlines(), extra_allow)


def startup_stderr_problems(text: str) -> list[str]:
    """The lines of a daemon's start-up stderr that the allowlists do not excuse.

    Upstream's daemon detaches before its main loop runs, so what it logs
    from then on (a long first poll interval while DPDK initialises on a busy
    machine, say) is judged only by check_logs; ours is not detached and its
    stderr carries those lines too: LOG_ALLOW excuses them here as there."""
    return [ln for ln in text.splitlines()
            if ln.strip() and not _matches_any(ln, (*STDERR_ALLOW, *LOG_ALLOW))]


def miss_upcall_keys(lines: Sequence[str]) -> list[str]:
    """The datapath flow key of every miss upcall in ovs-vswitchd log lines, oldest first.

    With dpif_netdev at debug level each miss logs a line holding 'miss upcall'
    and the key on the line after it; a last line with no key yet is skipped.
    """
    return [lines[i + 1] for i, line in enumerate(lines[:-1]) if "miss upcall" in line]
