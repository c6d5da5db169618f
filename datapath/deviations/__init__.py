"""What OVS 4.0.0 emits instead of the correct frames: the layer above the model.

The model (datapath/model/) computes the correct expectation with none of OVS's
bugs in view; the catalogue (datapath/model/bugs.py) is pure data.  This layer
imports both and, once installed, watches the model through its hooks
(datapath/model/hooks.py) and records what OVS does otherwise, so an
expectation also says what OVS is known to send and names the bug.  The suite
installs it (fixtures/plugin.py); hooks.observing(hooks.Observer()) runs the
model without it.
"""
from __future__ import annotations

from datapath.deviations.observer import OvsObserver
from datapath.model import hooks


def install() -> None:
    """Make the model's expectations also say what OVS 4.0.0 sends instead."""
    hooks.install(OvsObserver())
