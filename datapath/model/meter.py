"""OpenFlow meters with one drop band: which packets pass, and the meter's counters.

Written from the OpenFlow 1.3 meter semantics (a band applies when the
measured rate exceeds the band's rate; burst_size is the band's tolerance) as a
token bucket, the usual realisation and the one ovs-ofctl(8) describes:

- the bucket holds burst_size units (kilobits for kbps, packets for pktps) and
  starts full;
- it refills at `rate` units per second, never beyond burst_size;
- a packet passes if the bucket holds its cost (its length in bits, or one
  packet) and then takes it; otherwise the drop band applies and the bucket is
  left as it was.

Time is the datapath's: it advances only as told (upstream stops it with
time/stop and moves it with time/warp).  Amounts are integers in bits (kbps) or
milli-packets (pktps), so rate units per millisecond are exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DropMeter:
    """A meter with one drop band, as a token bucket in the meter's unit."""

    unit: str  # "kbps" or "pktps"
    rate: int
    burst: int
    tokens: int = field(init=False)
    packet_in: int = 0
    byte_in: int = 0
    band_packets: int = 0
    band_bytes: int = 0

    def __post_init__(self) -> None:
        if self.unit not in ("kbps", "pktps"):
            raise ValueError(f"meter unit {self.unit!r}: kbps or pktps")
        self.tokens = self.capacity

    @property
    def capacity(self) -> int:
        return self.burst * 1000  # kilobits -> bits, packets -> milli-packets

    def advance(self, msec: int) -> None:
        """Time moves on by `msec` ms: rate units/s are rate bits (or milli-packets) per ms."""
        self.tokens = min(self.capacity, self.tokens + self.rate * msec)

    def offer(self, length: int) -> bool:
        """A packet of `length` bytes reaches the meter; True if it passes."""
        cost = length * 8 if self.unit == "kbps" else 1000
        self.packet_in += 1
        self.byte_in += length
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        self.band_packets += 1
        self.band_bytes += length
        return False

    def stats(self, meter_id: int, flow_count: int = 1) -> str:
        """This meter's part of `ovs-ofctl -O OpenFlow13 meter-stats | strip_timers`."""
        return (f"meter:{meter_id} flow_count:{flow_count} packet_in_count:{self.packet_in} "
                f"byte_in_count:{self.byte_in} duration:0.0s bands:\n"
                f"0: packet_count:{self.band_packets} byte_count:{self.band_bytes}\n")
