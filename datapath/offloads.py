"""Port offload settings shared by the model and the backends.

RxFlags says what checksum state the rx port stamps on every received packet;
TxOffloads says which checksum offloads the tx port advertises, and which of
those it then "forgets" to do (the netdev-dummy `_disabled` options).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class CsumState(str, Enum):
    """The checksum state a port's rx flags give a layer (dp-packet's ol_flags)."""

    UNKNOWN = "unknown"
    GOOD = "good"
    BAD = "bad"
    PARTIAL = "partial"

    @property
    def valid(self) -> bool:
        """OVS's dp_packet_*_checksum_valid(): good or partial."""
        return self in (CsumState.GOOD, CsumState.PARTIAL)


class OffloadError(ValueError):
    """An offload name or value the framework does not know."""


@dataclass(frozen=True)
class RxFlags:
    """Checksum flags the rx port sets (netdev-dummy ol_{ip,l4}_rx_csum_set_*)."""

    ip: CsumState = CsumState.UNKNOWN
    l4: CsumState = CsumState.UNKNOWN
    tso_segsz: int = 0  # a TSO rx port stamps this segment size on every packet

    def options(self) -> dict[str, str]:
        opts = {}
        for layer, state in (("ip", self.ip), ("l4", self.l4)):
            if state is not CsumState.UNKNOWN:
                opts[f"ol_{layer}_rx_csum_set_{state.value}"] = "true"
        if self.tso_segsz:
            opts["ol_tso_segsz"] = str(self.tso_segsz)
        return opts

    @property
    def id(self) -> str:
        parts = [f"{layer}_{s.value}" for layer, s in (("ip", self.ip), ("l4", self.l4))
                 if s is not CsumState.UNKNOWN]
        if self.tso_segsz:
            parts.append(f"tso{self.tso_segsz}")
        return "rx_" + ("+".join(parts) if parts else "none")

    @classmethod
    def parse(cls, spec: str) -> "RxFlags":
        """'none', 'ip=good', 'l4=partial', 'ip=bad,l4=good'."""
        kwargs: dict[str, CsumState] = {}
        for item in filter(None, (s.strip() for s in spec.split(","))):
            if item == "none":
                continue
            layer, _, state = item.partition("=")
            if layer not in ("ip", "l4") or state not in ("good", "bad", "partial", "unknown"):
                raise OffloadError(f"unknown rx flag {item!r}: use ip=STATE or l4=STATE with "
                                   "STATE one of good, bad, partial, unknown")
            kwargs[layer] = CsumState(state)
        return cls(ip=kwargs.get("ip", CsumState.UNKNOWN),
                   l4=kwargs.get("l4", CsumState.UNKNOWN))


TX_FEATURES = ("ip", "l4", "out_ip", "out_udp")
_FEATURE_FLAGS = {"ip": ("ip",), "l4": ("tcp", "udp"), "out_ip": ("out_ip",),
                  "out_udp": ("out_udp",)}
_FLAG_FEATURE = {flag: feat for feat, flags in _FEATURE_FLAGS.items() for flag in flags}
_TX_OPTION = {"ip": "ol_ip_tx_csum", "l4": "ol_l4_tx_csum",
              "out_ip": "ol_out_ip_tx_csum", "out_udp": "ol_out_udp_tx_csum"}


@dataclass(frozen=True)
class TxOffloads:
    """Tx checksum offloads of a port.  A disabled feature is advertised but not done."""

    advertised: frozenset[str] = frozenset()
    disabled: frozenset[str] = frozenset()
    tso_segsz: int = 0

    def __post_init__(self) -> None:
        unknown = (self.advertised | self.disabled) - set(TX_FEATURES)
        if unknown:
            raise OffloadError(f"unknown tx offload {sorted(unknown)}; known: "
                               + ", ".join(TX_FEATURES) + " (each may end in _disabled), tso=N")
        if not self.disabled <= self.advertised:
            raise OffloadError("a _disabled offload must also be advertised: "
                               + ", ".join(sorted(self.disabled - self.advertised)))

    @classmethod
    def parse(cls, spec: str) -> "TxOffloads":
        """'none', 'ip', 'l4,out_udp', 'l4_disabled' (implies l4), 'tso=500'."""
        adv: set[str] = set()
        dis: set[str] = set()
        segsz = 0
        for item in filter(None, (s.strip() for s in spec.replace("+", ",").split(","))):
            if item == "none":
                continue
            if item.startswith("tso="):
                try:
                    segsz = int(item[4:])
                except ValueError:
                    raise OffloadError(f"bad TSO segment size in {item!r}") from None
                continue
            name = item.removesuffix("_disabled")
            adv.add(name)
            if name != item:
                dis.add(name)
        return cls(frozenset(adv), frozenset(dis), segsz)

    def options(self) -> dict[str, str]:
        opts = {}
        for feat in TX_FEATURES:
            if feat in self.advertised:
                opts[_TX_OPTION[feat]] = "true"
                if feat in self.disabled:
                    opts[_TX_OPTION[feat] + "_disabled"] = "true"
        if self.tso_segsz:
            opts["ol_tso_segsz"] = str(self.tso_segsz)
        return opts

    def netdev_flags(self) -> frozenset[str]:
        """The tx offload flags OVS sees on the port (netdev ol_flags).

        Flag names: ip, tcp, udp, out_ip, out_udp (checksums) and tso.  TSO also
        advertises TCP checksum offload (netdev-dummy's ol_tso_segsz).
        """
        flags = {flag for feat in self.advertised for flag in _FEATURE_FLAGS[feat]}
        if self.tso_segsz:
            flags |= {"tso", "tcp"}
        return frozenset(flags)

    def driver_flags(self) -> frozenset[str]:
        """The flags netdev-dummy, as the driver, passes when it finishes the
        checksums itself: those advertised but not actually done (`_disabled`).
        A TCP checksum advertised only through TSO counts as not done when
        ol_l4_tx_csum is off (dummy quirk)."""
        done = self.advertised - self.disabled
        return frozenset(f for f in self.netdev_flags()
                         if f != "tso" and _FLAG_FEATURE[f] not in done)

    @property
    def id(self) -> str:
        parts = [f + ("_disabled" if f in self.disabled else "")
                 for f in TX_FEATURES if f in self.advertised]
        if self.tso_segsz:
            parts.append(f"tso{self.tso_segsz}")
        return "tx_" + ("+".join(parts) if parts else "none")
