"""What OVS 4.0.0 does otherwise with VLAN tags: the layer above the model
(datapath/model/l2tags.py), for the cases that send tagged frames
(cases/system_userspace/test_system_traffic_8021ad.py)."""
from __future__ import annotations

import struct

from datapath.model.bugs import VLAN_SECOND_TAG_WILDCARDED, OvsBug
from datapath.model.l2tags import TPID_CTAG, TPID_STAG

TAGS = (TPID_CTAG, TPID_STAG)


def tags(frame: bytes) -> list[bytes]:
    """The frame's tags (TPID and TCI), outermost first."""
    out, ofs = [], 12
    while struct.unpack_from("!H", frame, ofs)[0] in TAGS:
        out.append(frame[ofs:ofs + 4])
        ofs += 4
    return out


def follows_one_tag_flow(earlier: bytes, frame: bytes, vlan_limit: int) -> OvsBug | None:
    """The entry under which OVS forwards `frame` by the datapath flow `earlier`
    installed, as `earlier` went, if it does (None: it does not).

    With two headers parsed (other_config:vlan-limit 0, or 2 and more), the
    flow made for a frame with one tag does not match on the absence of a
    second one: ofproto's mask of the header the packet lacks is cleared, and
    the datapath mask that has none leaves it wildcarded
    (VLAN_SECOND_TAG_WILDCARDED).  So a frame that is `earlier` with a second
    tag under the same outer tag (the same TPID and TCI, the same bytes
    around them) hits that flow while it is installed."""
    if vlan_limit == 1:
        return None
    one, two = tags(earlier), tags(frame)
    if len(one) != 1 or len(two) != 2 or two[0] != one[0]:
        return None
    if frame[:16] + frame[20:] != earlier:
        return None
    return VLAN_SECOND_TAG_WILDCARDED
