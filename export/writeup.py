"""The plain-text report next to an exported test: what is wrong, the minimal
frame, where in OVS, the rule broken, its class, severity, real-port trigger
and root-cause group, expected against actual, how to run it, and the fix of
its group where export/fixes/ has one.

Every fact about a known bug comes from its entry (datapath/model/bugs.py): the
rule it breaks (written there from the RFCs and OVS's own documentation, the
model's sources, not from OVS's code), its class, severity, real ports, how it
was found and the fix hint of its group.  The fixes are ours, written from a
reading of OVS's sources.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from datapath.model.bugs import CLASS_MEANING, FIX_HINTS, OvsBug
from export.frames import scapy_line, split_hex
from harness.records import CaseRecord, Step

WIDTH = 78
# The fixes this project proposes, one patch per root-cause group (bugs.py),
# each with a `Bugs: KEY...` line naming the entries it cures (export/series.py).
FIXES = Path(__file__).resolve().parent / "fixes"
# A disclosure note per bug a guest or a remote host can trigger, for OVS's
# security process (export/series.py copies them next to the series).
DISCLOSURES = Path(__file__).resolve().parent / "disclosures"


@dataclass(frozen=True)
class Rule:
    """How an exported test for a known bug is titled, the rule it checks and the
    fix its root-cause group needs: the entry's own fields (datapath/model/bugs.py),
    never a copy kept here."""

    title: str  # the AT_SETUP title, after "dpif-netdev - "
    rule: str
    fix_hint: str = ""


def rule_for(bug: OvsBug) -> Rule:
    """The rule the bug breaks, as its entry states it (a placeholder where the entry
    has none written yet)."""
    return Rule(bug.at_title or bug.key.replace("-", " "),
                bug.rule or ("(no rule written for this bug yet: see datapath/model/bugs.py "
                             "and the model's notes below)"),
                FIX_HINTS.get(bug.root_cause, ""))


def classification(bug: OvsBug) -> str:
    """The entry's class, severity and root-cause group, with the evidence for a
    class other than bug."""
    text = (f"{CLASS_MEANING.get(bug.cls, bug.cls)}; severity: {bug.severity}; root-cause "
            f"group {bug.root_cause} (one fix cures every entry of the group).")
    return text + (f"  Why: {bug.why}." if bug.why and bug.cls != "bug" else "")


def trigger(bug: OvsBug) -> str:
    """Which real port kinds can hand OVS the input, and whether a case shows it;
    a guest-triggerable abort says it is security-relevant."""
    if not bug.real_ports:
        return f"None: {bug.why}." if bug.why else "None: only netdev-dummy's options reach it."
    text = "  ".join(f"{p.text()}." for p in bug.real_ports)
    if bug.crash and any(p.kind == "vhost-user" for p in bug.real_ports):
        text += ("  A vhost-user guest that can make ovs-vswitchd abort takes down every "
                 "port of the switch: this is security-relevant (a denial of service from "
                 "inside a VM).")
    note = DISCLOSURES / f"{bug.key}.md"
    if note.is_file():
        text += (f"  Report it through OVS's security process first: the disclosure note is "
                 f"{DISCLOSURES.parent.name}/{DISCLOSURES.name}/{note.name}.")
    return text


def history(bug: OvsBug) -> str:
    """How the suite found the entry, and the further facts it records ("" if none)."""
    found = [f"Found by {bug.found_by}."] if bug.found_by else []
    return "  ".join([*found, *bug.notes])


def _para(label: str, text: str) -> list[str]:
    """A labelled paragraph; a word longer than a line (a node id, a path) stays
    whole on a line of its own, so that it can be searched for and copied."""
    return [label, *textwrap.wrap(text, WIDTH, initial_indent="  ", subsequent_indent="  ",
                                  break_on_hyphens=False, break_long_words=False), ""]


def _hex_block(data: str) -> list[str]:
    return ["    " + line for line in split_hex(data, 64)]


def _frame(label: str, hexa: str) -> list[str]:
    data = bytes.fromhex(hexa)
    return [f"  {label} ({len(data)} bytes):",
            *textwrap.wrap(scapy_line(data), WIDTH, initial_indent="    ",
                           subsequent_indent="      ", break_on_hyphens=False),
            *_hex_block(hexa), ""]


def _bug_step(case: CaseRecord, bug: OvsBug | None) -> Step | None:
    for step in case.steps:
        if bug is None and not step.ok or bug is not None and step.bugs.get(bug.key):
            return step
    return case.steps[0] if case.steps else None


def _abort_line(case: CaseRecord) -> str:
    for line in reversed(case.log_excerpt):
        if "|EMER|" in line or "assertion" in line:
            return re.sub(r"^\S+\|\d+\|", "", line)
    return ""


def _config(case: CaseRecord) -> list[str]:
    """The case's configuration commands, short: what a reader must know."""
    out = []
    for command in case.commands:
        argv = command.argv
        tool = argv[0].rsplit("/", 1)[-1] if argv else ""
        if tool not in ("ovs-vsctl", "ovs-ofctl", "ovs-appctl"):
            continue
        words = [a for a in argv[1:] if not re.match(r"--(timeout|db)=", a)]
        text = " ".join([tool, *words])
        if words[:1] in (["netdev-dummy/receive"], ["dpctl/show"], ["--no-wait"]) and \
                "other_config" not in text:
            continue
        out.append("    " + re.sub(r"(/[^ ]*)?/(p\d+-tx\.pcap)", r"\2", text))
    return out


def render(case: CaseRecord, at_name: str, title: str, keyword: str,
           bug: OvsBug | None, ovs: str) -> str:
    """The write-up for one exported case."""
    step = _bug_step(case, bug)
    head = f"{bug.key}: {bug.title}" if bug else f"{case.nodeid}: {case.outcome}"
    out = [head[:WIDTH * 3], "=" * min(len(head), WIDTH), ""]
    if bug:
        effect = "ovs-vswitchd aborts" if bug.crash else "the frame on the wire is wrong"
        out += _para("What is wrong", f"{bug.title} ({effect}; seen in OVS "
                                      f"{', '.join(bug.seen_in)}).")
        out += _para("Where in OVS", bug.where)
        out += _para("The rule it breaks", rule_for(bug).rule)
        out += _para("Class and severity", classification(bug))
        out += _para("Real-port trigger", trigger(bug))
        if history(bug):
            out += _para("How it was found, and notes", history(bug))
    out += _para("The case", f"{case.nodeid} ({case.outcome} with {ovs}); exported as "
                 f"{at_name}, AT_SETUP([{title}]).")
    out += ["  Configuration, in the order the case made it:", *_config(case), ""]
    if step is not None:
        out += ["Minimal frame", ""]
        for hexa in step.sent:
            out += _frame(f"received on {step.rx_port}", hexa)
        for n, hexa in enumerate(step.expected):
            out += _frame(f"must leave {step.tx_port} (the model's frame {n + 1})", hexa)
        for n, hexa in enumerate(step.captured):
            if hexa not in step.expected:
                out += _frame(f"what {ovs} sent instead (frame {n + 1})", hexa)
        out += ["Expected against actual", ""]
        abort = _abort_line(case) if bug is not None and bug.crash else ""
        if abort:
            out += [(f"  expected: {step.tx_port} sends the frame above; ovs-vswitchd keeps "
                     "running"), f"  actual:   ovs-vswitchd aborts: {abort}"]
        else:
            out += ["  " + line for line in step.diff or ["(no difference recorded)"]]
        notes = [n for n in step.notes if not n.startswith("known OVS bug")]
        if notes:
            out += ["", "  The model's reasoning:", *("    - " + n for n in notes)]
        out.append("")
    out += _para("How to run it", f"Append {at_name} to tests/dpif-netdev.at (or to a file "
                 "included from tests/testsuite.at), then from the build directory:")
    out += [f"    make check TESTSUITEFLAGS='-k {keyword}'", ""]
    if bug:
        where = ("at `ovs-appctl version` right after the packet: ovs-vswitchd is gone"
                 if bug.crash else f"at the `tail -n` check of {step.tx_port if step else 'the'}"
                 " pcap: the diff shows the model's line (-) against the frame OVS sent (+)")
        patch = fix_patch(bug)
        fix = (f"The fix below (ovs-dpif-pytest's {patch[0]}, one for the root-cause group "
               f"{bug.root_cause}) makes it pass; `bash bench/export_at_check.sh --fixes "
               "TREE` runs it on a build of TREE without and with the fix." if patch else
               f"A fix could {rule_for(bug).fix_hint or 'follow the rule above'}.")
        out += _para("What the test shows",
                     f"On OVS {', '.join(bug.seen_in)} it fails {where}.  On a build "
                     f"where the bug is fixed it passes.  {fix}")
        if patch:
            out += ["Proposed fix", "", patch[1].rstrip(), ""]
    return "\n".join(out).rstrip() + "\n"


def fix_patch(bug: OvsBug) -> tuple[str, str] | None:
    """The fix of the bug's root-cause group, (its path in this checkout, its text),
    if export/fixes/ has one whose Bugs: line names the bug."""
    path = FIXES / f"{bug.root_cause}.patch"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    names = re.search(r"^Bugs:(.*)$", text, re.MULTILINE)
    if names is None or bug.key not in names.group(1).split():
        return None
    return f"{FIXES.parent.name}/{FIXES.name}/{path.name}", text
