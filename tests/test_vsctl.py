"""harness/vsctl.py: the typed ovs-vsctl commands spell exactly what a case
used to write out by hand (the transcript and export-at replay them)."""
from __future__ import annotations

from pathlib import Path

from harness.vsctl import add_port, chain, set_interface, set_open_vswitch


def test_columns_in_the_order_given_with_ovsdb_values() -> None:
    assert set_interface("p1", type="dummy", ofport_request=1,
                         options={"tx_pcap": Path("p1.pcap"), "n_rxq": 2, "csum": False},
                         other_config={"pmd-rxq-affinity": "0:1"}) == [
        "set", "Interface", "p1", "type=dummy", "ofport_request=1", "options:tx_pcap=p1.pcap",
        "options:n_rxq=2", "options:csum=false", "other_config:pmd-rxq-affinity=0:1"]


def test_add_port_and_a_transaction() -> None:
    assert add_port("br0", "p0") == ["add-port", "br0", "p0"]
    assert chain(add_port("br0", "p0", type="dummy-pmd"),
                 set_open_vswitch(other_config={"pmd-cpu-mask": "0x1", "smc-enable": True}),
                 ["set", "bridge", "br0", "datapath-type=dummy"]) == [
        "add-port", "br0", "p0", "--", "set", "Interface", "p0", "type=dummy-pmd", "--",
        "set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x1",
        "other_config:smc-enable=true", "--", "set", "bridge", "br0", "datapath-type=dummy"]
