"""fixtures/upstream_system.py's ping judge: both directions of a ping judged
at once through datapath/verdict.py, a step recorded per direction."""
from __future__ import annotations

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether

from evidence.compare import FrameMismatch
from fixtures.upstream_system import PathCheck, check_path, icmp_echo
from harness.records import Step


def echo(kind: str, seq: int = 1, ttl: int = 64) -> bytes:
    src, dst = ("10.1.1.1", "10.1.1.2") if kind == "request" else ("10.1.1.2", "10.1.1.1")
    return bytes(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02")
                 / IP(src=src, dst=dst, ttl=ttl)
                 / ICMP(type=8 if kind == "request" else 0, id=7, seq=seq) / (b"x" * 16))


REQUESTS = PathCheck("echo requests", "ovs-p0", "ovs-p1")
REPLIES = PathCheck("echo replies", "ovs-p1", "ovs-p0")


def test_icmp_echo_picks_requests_or_replies() -> None:
    frames = [echo("request"), echo("reply"), echo("request", 2)]
    assert icmp_echo(frames, "request") == [frames[0], frames[2]]
    assert icmp_echo(frames, "reply") == [frames[1]]


def test_a_ping_switched_unchanged_matches_and_records_a_step_per_direction() -> None:
    steps: list[Step] = []
    reqs, reps = [echo("request", i) for i in (1, 2)], [echo("reply", i) for i in (1, 2)]
    assert check_path(steps, [(REQUESTS, reqs, reqs), (REPLIES, reps, reps)]) == 4
    assert [(s.title, s.rx_port, s.tx_port, s.ok) for s in steps] == [
        ("echo requests", "ovs-p0", "ovs-p1", True), ("echo replies", "ovs-p1", "ovs-p0", True)]


def test_a_changed_reply_fails_naming_its_port_and_both_ways_are_recorded() -> None:
    steps: list[Step] = []
    reqs, reps = [echo("request")], [echo("reply")]
    with pytest.raises(FrameMismatch, match="ovs-p0: .*ttl"):
        check_path(steps, [(REQUESTS, reqs, reqs), (REPLIES, reps, [echo("reply", ttl=63)])])
    assert [s.ok for s in steps] == [True, False]


def test_nothing_sent_is_a_mismatch_not_a_pass() -> None:
    steps: list[Step] = []
    with pytest.raises(FrameMismatch, match="no frame was sent into ovs-p0"):
        check_path(steps, [(REQUESTS, [], [])])
    assert not steps[0].ok


def test_ping_waits_for_every_reply_until_upstreams_own_deadline() -> None:
    """Upstream's options, plus -w at the time upstream's ping gives up on a silent
    peer (the third request at 0.6 s, then -W 2): ping then waits for the last reply
    instead of "two RTTs" (ping(8)), and never longer than upstream's would."""
    from fixtures.upstream_system import ping_argv
    assert ping_argv("10.1.1.2", "-s", "3200") == [
        "ping", "-s", "3200", "-q", "-c", "3", "-i", "0.3", "-W", "2", "-w", "3", "10.1.1.2"]
    assert ping_argv("fc00::2", count=1, six=True) == [
        "ping6", "-q", "-c", "1", "-i", "0.3", "-W", "2", "fc00::2"]  # one echo: -W is its wait
    assert ping_argv("10.1.1.2", count=10, interval="0.1", wait="-w", wait_s="2")[-3:] == \
        ["-w", "2", "10.1.1.2"]  # a caller's own deadline stays as it is


def test_format_ping_takes_late_replies_of_our_deadline_as_upstreams_line() -> None:
    """With ping_argv()'s -w, replies later than the interval make ping send on past
    -c (4 sent, 4 answered: 'ping over vxlan tunnel' on dpdk ports, under load): that
    is upstream's line for -c 3.  A loss, a duplicate or upstream's own -w is not."""
    from fixtures.upstream_system import format_ping, ping_argv
    ours = ping_argv("10.1.1.100")
    late = "4 packets transmitted, 4 received, 0% packet loss, time 1203ms\n"
    three = "3 packets transmitted, 3 received, 0% packet loss, time 0ms\n"
    assert format_ping(late, ours) == three
    assert format_ping(late) == late.replace("1203ms", "0ms")  # no argv: as printed
    lost = "4 packets transmitted, 3 received, 25% packet loss, time 1203ms\n"
    assert format_ping(lost, ours) == lost.replace("1203ms", "0ms")
    dup = "4 packets transmitted, 4 received, +1 duplicates, 0% packet loss, time 903ms\n"
    assert format_ping(dup, ours) == dup.replace("903ms", "0ms")
    for own in (ping_argv("10.1.1.2", count=3, interval="0.1", wait="-w", wait_s="2"),
                ["ping", "-q", "-c", "3", "-w", "5", "-W", "2", "10.1.1.2"]):  # not ping_argv's
        assert format_ping(late, own) == late.replace("1203ms", "0ms")
