"""The model's OpenFlow pipeline: a case's flow table, as ovs-ofctl takes it,
interpreted for one packet arriving on a port.

Given the flows (tables, priorities, masked matches, actions) and a packet with
its in-port and offload flags, `OpenFlow.run` computes every frame that leaves
each port, in order, the packet-ins, the conntrack table's changes (the model's
tracker, datapath/model/conntrack.py) and each flow's n_packets and n_bytes.
The flows are read with `ovs.flow`, the parser of the `ovs` Python package.

Semantics, each from the documentation, never from OVS's code:
- Lookup: in each table the matching flow of the highest priority; a flow
  without priority= has 32768 (ovs-ofctl(8), "Flow Syntax").  Two matching
  flows of one priority: OpenFlow 1.5 §5.3 leaves the choice undefined, so the
  model says it cannot tell (`NotModelled`) rather than guess.  A miss drops
  the packet (OpenFlow 1.5 §5.4, the table-miss default).
- Match fields and their prerequisites: ovs-fields(7).  A field the packet
  lacks (tp_dst of an ARP frame) does not match.
- Actions: ovs-actions(7).  output to the packet's in-port sends nothing;
  `in_port` does ("output").  `ct` without table= goes on with the
  connection tracking fields cleared; with table=N the packet re-enters the
  pipeline at table N with ct_state, ct_zone, ct_mark, ct_label and the
  original direction's ct_nw_*/ct_tp_* set ("ct").  resubmit searches a table
  and comes back; goto_table continues there after the flow's actions.
- `normal` is the caller's (802.1D learning, which the caller keeps).

A construct the model does not interpret raises NotModelled, whose message
starts `not modelled:` and names the field or action.  It never guesses.
"""
from datapath.model.openflow.fields import (
    ALIASES,
    CT_ARGS,
    CT_ARGS_NOTED,
    CT_FIELDS,
    LOAD_TARGETS,
    MODELLED_ACTIONS,
    MODELLED_FIELDS,
    SET_FIELD_TARGETS,
    SHORTHANDS,
    WRITABLE_META,
    Meta,
    NotModelled,
    packet_fields,
)
from datapath.model.openflow.flows import Flow, FlowKeys, flow_keys, parse_flows
from datapath.model.openflow.pipeline import OpenFlow, Outcome, PacketIn

__all__ = ["ALIASES", "CT_ARGS", "CT_ARGS_NOTED", "CT_FIELDS", "LOAD_TARGETS", "MODELLED_ACTIONS",
           "MODELLED_FIELDS", "SET_FIELD_TARGETS", "SHORTHANDS", "WRITABLE_META", "Flow",
           "FlowKeys", "Meta", "NotModelled", "OpenFlow", "Outcome", "PacketIn", "flow_keys",
           "packet_fields", "parse_flows"]
