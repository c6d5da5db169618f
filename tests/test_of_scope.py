"""`./ovstest of-scope` (tooling/of_scope.py): the flows an .at file installs,
read from its text with m4's quoting undone; a flow with a shell expansion or an
m4 macro counted unreadable at its file:line; the counts per match field and
action; and the modelled column, checked against the interpreter itself."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import upstream
from tooling import cli
from tooling import of_scope as scope
from tooling.of_scope import Found


def flows(text: str, macros: frozenset[str] = frozenset()) -> list[tuple[int, str, str]]:
    """(line, text, why unreadable) of each flow the snippet installs."""
    return [(f.line, f.text, f.unreadable) for f in scope.extract("x.at", text, macros)]


# -- extraction ----------------------------------------------------------------

AT_DATA_FLOWS = """\
AT_SETUP([two tables])
OVS_VSWITCHD_START
AT_DATA([flows.txt], [dnl
# a comment, then a blank line

table=0,priority=10,in_port=1,actions=load:0->NXM_NX_REG0[[]],resubmit(,1)
table=1,reg0=0 actions=output:2
dnl an m4 comment: its line goes
delete in_port=9
modify in_port=3,actions=drop
])
AT_CHECK([ovs-ofctl -O OpenFlow13 add-flows br0 flows.txt])
AT_CHECK([ovs-ofctl --bundle add-flows br1 flows.txt])
OVS_VSWITCHD_STOP
AT_CLEANUP
"""


def test_at_data_and_add_flows_each_command_its_flows_with_m4_undone() -> None:
    one = [(6, "table=0,priority=10,in_port=1,actions=load:0->NXM_NX_REG0[],resubmit(,1)", ""),
           (7, "table=1,reg0=0 actions=output:2", ""),
           (10, "in_port=3,actions=drop", "")]
    # Both commands install the file: each counts its flows; the delete is none.
    assert flows(AT_DATA_FLOWS) == one + one


ADD_FLOW = """\
AT_SETUP([add-flow])
AT_CHECK([ovs-ofctl add-flow br0 'in_port=1,actions=ct(zone=NXM_NX_REG0[[0..15]]),2'])
AT_CHECK([ovs-ofctl -O OpenFlow13 add-flow br0 "priority=5 ip,nw_dst=10.0.0.1 action=3"])
AT_CHECK([ovs-ofctl add-flow br0 action=normal])
AT_CHECK([ovs-ofctl mod-flows br0 dnl
            'tcp,actions=drop'])
AT_CHECK([ovs-appctl dpctl/add-flow "in_port(1),eth()" 2])
AT_CHECK([ovs-ofctl add-flow br0 "dl_dst=$MAC,actions=2"])
AT_CHECK([ovs-ofctl add-flow br0 'in_port=OFPORT,actions=2'])
AT_CLEANUP
"""


def test_add_flow_quoted_or_not_with_options_and_dnl() -> None:
    found = flows(ADD_FLOW, frozenset({"OFPORT"}))
    assert found[:4] == [
        (2, "in_port=1,actions=ct(zone=NXM_NX_REG0[0..15]),2", ""),
        (3, "priority=5 ip,nw_dst=10.0.0.1 action=3", ""),
        (4, "action=normal", ""),
        (6, "tcp,actions=drop", "")]


def test_a_shell_variable_or_an_m4_macro_is_unreadable_at_its_line() -> None:
    # The datapath flow (ovs-appctl dpctl/add-flow) is no OpenFlow flow: not counted.
    assert flows(ADD_FLOW, frozenset({"OFPORT"}))[4:] == [
        (8, "dl_dst=$MAC,actions=2", "a shell expansion"),
        (9, "in_port=OFPORT,actions=2", "the m4 macro OFPORT")]
    # Unknown as a macro, OFPORT is a port name like any other.
    assert flows(ADD_FLOW)[5] == (9, "in_port=OFPORT,actions=2", "")


SHELL_WRITES = """\
AT_SETUP([shell])
(
echo "priority=100, arp, actions=normal"
for i in $(seq 1 3); do
     j=$(expr $i + 1)
     echo "in_port=$i, actions=resubmit:$j"
done
echo 'in_port=9, actions=local'
) > flows.txt
AT_CHECK([ovs-ofctl add-flows br0 flows.txt])
cat > more.txt <<EOF
in_port=1,actions=2
EOF
echo "in_port=2,actions=1" >> more.txt
AT_CHECK([ovs-ofctl replace-flows br0 more.txt])
AT_CHECK([echo 'table=0,in_port=p1,ip actions=ct(commit)' | ovs-ofctl --bundle replace-flows br0 -])
AT_CHECK([ovs-ofctl dump-flows br0 > dumped.txt])
AT_CHECK([ovs-ofctl add-flows br0 dumped.txt])
AT_CHECK([ovs-ofctl add-flows br0 nowhere.txt])
AT_CLEANUP
"""


def test_echo_subshells_loops_here_documents_and_pipes() -> None:
    assert flows(SHELL_WRITES) == [
        (3, "priority=100, arp, actions=normal", ""),
        (6, "in_port=$i, actions=resubmit:$j", "a shell expansion"),
        (8, "in_port=9, actions=local", ""),
        (12, "in_port=1,actions=2", ""),
        (14, "in_port=2,actions=1", ""),
        (16, "table=0,in_port=p1,ip actions=ct(commit)", ""),
        (18, "dumped.txt", "its file dumped.txt: written by `ovs-ofctl` (line 17)"),
        (19, "nowhere.txt", "its file nowhere.txt: no literal text writes it")]


BUNDLE_AND_LOOP = """\
AT_SETUP([bundle])
AT_DATA([bundle.txt], [dnl
flow add in_port=1,actions=2
flow in_port=2,actions=1
flow delete in_port=3
group add group_id=1,type=all,bucket=output:1
packet-out in_port=1 packet=00 actions=2
])
AT_CHECK([ovs-ofctl bundle br0 bundle.txt])
m4_foreach([port], [[1], [2]], [
AT_CHECK([ovs-ofctl add-flow br0 in_port=port,actions=drop])])
AT_CHECK([ovs-ofctl add-flow br0 in_port=1,actions=port])
AT_CLEANUP
"""


def test_a_bundle_files_flows_and_an_m4_loop_variable_inside_its_loop_only() -> None:
    assert flows(BUNDLE_AND_LOOP) == [
        (3, "in_port=1,actions=2", ""), (4, "in_port=2,actions=1", ""),
        (11, "in_port=port,actions=drop", "the m4 macro port"),
        (12, "in_port=1,actions=port", "")]


def test_the_last_write_of_a_file_before_the_command_in_its_test() -> None:
    text = """\
AT_SETUP([first])
AT_DATA([flows.txt], [actions=1
])
AT_CLEANUP
AT_SETUP([second])
AT_DATA([flows.txt], [actions=2
])
AT_DATA([flows.txt], [actions=3
])
AT_CHECK([ovs-ofctl add-flows br0 flows.txt])
AT_DATA([flows.txt], [actions=4
])
AT_CLEANUP
"""
    assert flows(text) == [(8, "actions=3", "")]


def test_m4_macros_are_those_tests_define(tmp_path: Path) -> None:
    (tmp_path / "a.at").write_text("m4_define([SAMPLE_ACTION], [sample($1)])\n"
                                   "m4_define(OFPORT, 3)\nm4_foreach([ns], [a], [ns])\n")
    assert scope.m4_macros(tmp_path) == {"SAMPLE_ACTION", "OFPORT"}  # ns: its loop's only


def test_the_reproduced_files_are_the_suites() -> None:
    assert set(scope.REPRODUCED) == set(upstream.FILES)
    assert not set(scope.SEPARATE) & set(scope.REPRODUCED)


# -- counting and the modelled column (ovs.flow from here on) ------------------

FLOWS = [
    Found("a.at", 1, "priority=10,tcp,eth_src=50:54:00:00:00:01,actions=ct(commit,zone=5,"
          "nat(src=10.0.0.1),exec(set_field:1->ct_mark)),output:2"),
    Found("a.at", 2, "table=1,mpls_label=3,actions=set_field:1.1.1.1->tun_dst,"
          "set_field:50:54:00:00:00:09->dl_dst,push_vlan:0x8100,2"),
    Found("b.at", 7, "in_port=1,actions=ct(table=1,zone=NXM_NX_REG0[0..15]),load:1->reg3"),
    Found("b.at", 8, "in_port=$X,actions=2", "a shell expansion"),
    Found("b.at", 9, "in_port=1,actions=ct(commit,nat(dst=10.0.0.1)"),  # ) missing
]


@pytest.fixture
def counted() -> scope.Scope:
    pytest.importorskip("ovs.flow.ofp")
    return scope.tally(FLOWS, "the test files", ("a.at", "b.at"))


def test_counts_per_field_and_action_with_files(counted: scope.Scope) -> None:
    assert counted.flows == 3
    assert [(f.file, f.line) for f in counted.unreadable] == [("b.at", 8)]
    assert [(f.file, f.line) for f, _ in counted.unparsed] == [("b.at", 9)]
    rows = {name: (row.flows, dict(row.files), row.modelled)
            for name, row in {**counted.fields, **counted.actions}.items()}
    assert rows["in_port"] == (1, {"b.at": 1}, True)
    assert rows["eth_src"] == (1, {"a.at": 1}, True)  # an alias of dl_src
    assert rows["tcp"] == (1, {"a.at": 1}, True)  # a shorthand
    assert rows["mpls_label"] == (1, {"a.at": 1}, False)
    assert rows["ct"] == (2, {"a.at": 1, "b.at": 1}, True)
    assert rows["output"] == (2, {"a.at": 2}, True)
    assert rows["ct.zone"] == (1, {"a.at": 1}, True)
    assert rows["ct.zone-from-field"] == (1, {"b.at": 1}, True)
    assert rows["ct.nat"][:2] == (1, {"a.at": 1})
    assert rows["ct.exec.set_field"] == (1, {"a.at": 1}, True)
    assert rows["set_field->tun_dst"] == (1, {"a.at": 1}, False)
    assert rows["set_field->dl_dst"] == (1, {"a.at": 1}, True)
    assert rows["load->reg3"] == (1, {"b.at": 1}, True)
    assert rows["push_vlan"] == (1, {"a.at": 1}, False)
    assert "table" not in rows and "priority" in rows  # table= is the flow's, not a match


def test_the_totals_line(counted: scope.Scope) -> None:
    # Fields: priority, tcp, eth_src, in_port (modelled), mpls_label (not).  Actions:
    # ct, output, set_field, load (modelled), push_vlan (not).  Arguments: ct.commit,
    # ct.zone, ct.nat, ct.exec, ct.exec.set_field, ct.table, ct.zone-from-field,
    # set_field->dl_dst, load->reg3 (modelled), set_field->tun_dst (not).
    assert scope.totals(counted) == [
        "4 of 5 fields and 4 of 5 actions used by the test files are modelled (3 flows read; "
        "1 unreadable, 1 ovs.flow could not read)",
        "action arguments (ct.*, set_field/load/move destinations, output to a field): "
        "9 of 10 modelled"]
    text = scope.render([("Test", counted)], "somewhere")
    assert "| `mpls_label` | 1 | a.at (1) | no |" in text
    assert "| `ct` | 2 | a.at (1), b.at (1) | yes |" in text
    assert "- b.at:8: a shell expansion: `in_port=$X,actions=2`" in text
    assert "- b.at:9: `in_port=1,actions=ct(commit,nat(dst=10.0.0.1)`: not modelled" in text


def udp() -> bytes:
    """A UDP frame from 10.1.1.1 to 10.1.1.2."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(src="50:54:00:00:00:01", dst="50:54:00:00:00:02")
                 / IP(src="10.1.1.1", dst="10.1.1.2") / UDP(sport=1, dport=2) / (b"x" * 8))


PORTS = {1: "p1", 2: "p2"}


@pytest.mark.parametrize("flow", [
    "priority=10,tcp,eth_src=50:54:00:00:00:01,tp_dst=80,actions=ct(commit,zone=5,"
    "exec(set_field:1->ct_mark,load:2->NXM_NX_CT_LABEL[0..7])),output:2",
    "in_port=1,ip,nw_dst=10.1.1.2,actions=set_field:50:54:00:00:00:09->eth_dst,"
    "set_field:10.0.0.7->ip_src,set_field:7->udp_dst,set_field:0x5->metadata,"
    "move:NXM_OF_IN_PORT[]->NXM_NX_REG1[0..15],load:3->xreg1,2",
    "udp,actions=ct(table=1,zone=NXM_NX_REG0[0..15])",
    "in_port=1,actions=move:NXM_OF_IN_PORT[]->NXM_NX_REG3[0..15],load:0->NXM_OF_IN_PORT[],"
    "load:2->NXM_NX_REG3[0..15],output:NXM_NX_REG3[0..15]",
])
def test_every_yes_runs_through_the_interpreter(flow: str) -> None:
    pytest.importorskip("ovs.flow.ofp")
    from datapath.model.openflow import OpenFlow

    counted = scope.tally([Found("a.at", 1, flow)], "a", ("a.at",))
    assert all(r.modelled for r in {**counted.fields, **counted.actions}.values())
    OpenFlow.of([flow, "table=1,actions=drop"], PORTS).run(udp(), "p1")  # no NotModelled


@pytest.mark.parametrize("flow,row", [
    ("in_port=1,actions=set_field:1.1.1.1->tun_dst,2", "set_field->tun_dst"),
    ("in_port=1,actions=set_field:5->vlan_tci,2", "set_field->vlan_tci"),
    ("in_port=1,actions=load:1->NXM_NX_TUN_ID[],2", "load->NXM_NX_TUN_ID"),
    ("in_port=1,actions=ct(commit,exec(set_field:1->reg0)),2", "ct.exec.set_field"),
    ("in_port=1,actions=push_vlan:0x8100,2", "push_vlan"),
    ("in_port=1,actions=output:NXM_NX_TUN_ID[]", "output->field"),
    ("in_port=1,mpls_label=3,actions=2", "mpls_label"),
])
def test_every_no_is_one_the_interpreter_refuses(flow: str, row: str) -> None:
    pytest.importorskip("ovs.flow.ofp")
    from datapath.model.openflow import NotModelled, OpenFlow

    counted = scope.tally([Found("a.at", 1, flow)], "a", ("a.at",))
    rows = {**counted.fields, **counted.actions}
    assert [n for n, r in rows.items() if not r.modelled] == [row]
    with pytest.raises(NotModelled):
        OpenFlow.of([flow], PORTS).run(udp(), "p1")


def test_main_writes_the_report_and_refuses_a_tree_without_tests(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ovs.flow.ofp")
    tests = tmp_path / "ovs" / "tests"
    tests.mkdir(parents=True)
    (tests / "dpif-netdev.at").write_text(ADD_FLOW)
    (tests / "ofproto-dpif.at").write_text(AT_DATA_FLOWS)
    out = tmp_path / "out" / "scope.md"
    assert scope.main(["--ovs-src", str(tmp_path / "ovs"), "--out", str(out)]) == 0
    text = out.read_text()
    assert "actions used by the reproduced files are modelled (5 flows read; 1 unreadable" in text
    assert "- dpif-netdev.at:8: a shell expansion" in text
    assert "## ofproto-dpif.at" in text and "| `reg0` | 2 | ofproto-dpif.at (2) | yes |" in text
    assert "fields and" in capsys.readouterr().out
    assert scope.main(["--ovs-src", str(tmp_path), "--out", str(out)]) == 2


def test_the_mode_and_its_options() -> None:
    args, extra = cli.parse(["of-scope", "--ovs-src", "src", "--out", "x.md"])
    assert (args.mode, args.ovs_src, args.out, extra) == ("of-scope", "src", "x.md", [])
