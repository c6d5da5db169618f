"""pmd.at's and dpif-netdev.at's output filters, on outputs shaped as OVS prints them."""
from __future__ import annotations

from harness.filters import (
    bre,
    flow_dump_prepend_pmd,
    join_avail_lines,
    offload_counters,
    parse_pmd_rxq_show,
    parse_pmd_rxq_show_group,
    sed_numa_core,
    strip_hw_offload,
)

RXQ_SHOW = """Displaying last 60 seconds pmd usage %
pmd thread numa_id 0 core_id 0:
  isolated : false
  port: p0                queue-id:  0 (enabled)   pmd usage: NOT AVAIL
  port: p0                queue-id:  3 (enabled)   pmd usage: NOT AVAIL
  overhead: NOT AVAIL
pmd thread numa_id 1 core_id 12:
  isolated : false
  port: p1                queue-id:  1 (enabled)   pmd usage: NOT AVAIL
  overhead: NOT AVAIL
"""


def test_parse_pmd_rxq_show_lists_port_queue_numa_core_sorted() -> None:
    assert parse_pmd_rxq_show(RXQ_SHOW) == "p0 0 0 0\np0 3 0 0\np1 1 1 12\n"


def test_group_lists_the_queues_of_each_core_on_one_line() -> None:
    groups = parse_pmd_rxq_show_group(join_avail_lines(RXQ_SHOW)).splitlines()
    # awk prints fields 1-4, 13, 22 and 31: absent ones are empty, as awk's are.
    assert groups[0] == "port: p0 queue-id: 0 3 pmd "
    assert groups[1].startswith("port: p1 queue-id: 1 ")
    assert len(groups) == 2


def test_sed_numa_core_clears_both_numbers_once_per_line() -> None:
    assert sed_numa_core("pmd thread numa_id 8 core_id 15:\nx numa_id 1 core_id 2:\n") == (
        "pmd thread numa_id <cleared> core_id <cleared>:\nx numa_id <cleared> core_id <cleared>:\n")


def test_flow_dump_prepend_pmd() -> None:
    dump = ("flow-dump from pmd on cpu core: 1\nB\nflow-dump from the main thread:\nA\n"
            "flow-dump from pmd on cpu core: 0\nC\n")
    assert flow_dump_prepend_pmd(dump) == "-1 A\n0 C\n1 B\n"


def test_offload_counters_reads_one_port_of_the_json() -> None:
    text = ('{"dummy@ovs-dummy":{"p1":{"rx_offload_miss":"1","rx_offload_full":"2",'
            '"other":"x"},"p2":{"rx_offload_full":"9"}}}\n')
    assert offload_counters(text) == "rx_offload_full:2\nrx_offload_miss:1\n"


def test_strip_hw_offload_as_upstream() -> None:
    line = ("flow-dump from pmd on cpu core: 0\n ufid:1234-ab, recirc_id(0),dp_hash(0/0),"
            "in_port(p1),eth(src=00:01:02:03:04:05,dst=0a:0b:0c:0d:0e:0f),eth_type(0x0800),"
            "ipv4(src=1.1.1.1,proto=17),udp(dst=5),  packets:1, bytes:106, used:0.512s, "
            "offloaded:yes, dp:dummy, dp-extra-info:miniflow_bits(4,1), actions:p2\n")
    assert strip_hw_offload(line) == ("recirc_id(0),in_port(p1),eth(),eth_type(0x0800),ipv4(),"
                                      "udp(),  packets:1, bytes:106, used:0.0s, offloaded:yes, "
                                      "dp:dummy\n")


def test_bre_keeps_grep_literals_literal() -> None:
    import re
    pattern = bre("There's no available (non-isolated) pmd thread on numa node 1.")
    assert re.search(pattern, "x There's no available (non-isolated) pmd thread on numa node 1. y")
    assert re.search(bre("max sleep: *10 us."), "max sleep:   10 us.")
