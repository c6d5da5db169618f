"""The one AF_PACKET capture (datapath/backends/netns.py Sniffer), and the
kernel side of a port that reads through it: over a veth pair in a namespace
of its own (root: the sealed test environment has it)."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from datapath.backends.netns import KernelSide, Netns, Sniffer, link_mac, unique_name
from fixtures.frames import compose
from harness.wait import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a veth pair in a namespace (root)")


@pytest.fixture
def veth() -> Iterator[Netns]:
    """A namespace with a veth pair va <-> vb, both up."""
    ns = Netns(unique_name("cap"))
    try:
        ns.ip("link", "add", "va", "type", "veth", "peer", "name", "vb")
        for dev in ("va", "vb"):
            ns.ip("link", "set", dev, "up")
        yield ns
    finally:
        ns.delete()


def frame_from(ns: Netns, dev: str, **kw: object) -> bytes:
    mac = ":".join(f"{b:02x}" for b in link_mac(ns, dev))
    return compose("udp", 4, eth_src=mac, **kw)  # type: ignore[arg-type]


def test_the_capture_sees_both_directions_with_the_vnet_header(veth: Netns) -> None:
    a, b = Sniffer(veth, "va"), Sniffer(veth, "vb")
    side = KernelSide(veth, "va")
    frame = frame_from(veth, "va")
    side.send([frame])
    wait_until(lambda: a.read() or a.frames, 5, what="the frame leaving va")
    wait_until(lambda: b.read() or b.frames, 5, what="the frame arriving on vb")
    assert frame in a.sent and frame not in a.received  # va transmitted it
    assert b.received == [frame] and b.sent == []  # vb received it
    assert [c.outgoing for c in a.frames if c.frame == frame] == [True]
    assert all(c.vnet.gso_type == 0 for c in b.frames)
    b.drain()
    assert b.frames == [] and b.read() == []  # read() never blocks


def test_the_kernel_side_skips_its_own_frames_and_ignored_sources(veth: Netns) -> None:
    va, vb = KernelSide(veth, "va"), KernelSide(veth, "vb", ignore_src=(link_mac(veth, "va"),))
    watch = Sniffer(veth, "vb")
    mine, other = frame_from(veth, "va"), frame_from(veth, "va", sport=1)
    vb.send([frame_from(veth, "vb")])  # vb's own transmission: not captured by vb
    va.send([mine])  # from an ignored MAC
    foreign = bytes(6) + bytes.fromhex("020000000001") + other[12:]
    va.send([foreign])  # another source
    wait_until(lambda: watch.read() is not None and len(watch.frames) >= 3, 5,
               what="the three frames on vb (one sent, two received)")
    got = vb.read()
    assert got == [foreign]
    assert len(vb.offloaded) == 1  # one vnet header per captured frame
    got_a = va.read()
    assert len(got_a) == 1 and got_a[0][6:12] == link_mac(veth, "vb")  # vb's frame reached va
