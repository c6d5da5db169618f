"""export-at: a case of this suite as a test in upstream's own Autotest style.

`./ovstest export-at ID` turns a case's record (its transcript of ovs-vsctl,
ovs-ofctl and ovs-appctl calls, and the frames each step sent and the model
expected) into a test ready to paste into OVS's tests/dpif-netdev.at, plus a
plain-text bug report next to it.  For a known-bug key it first picks the
smallest case that shows the bug.

Modules: `frames` (hex split by layer, scapy one-liners), `at` (the Autotest
text), `writeup` (the report and the rule each known bug breaks), `cli` (IDs,
runs, choice of the minimal case, files).
"""
