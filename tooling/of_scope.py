"""`./ovstest of-scope`: the match fields and actions upstream's .at files install
in OpenFlow flows, listed mechanically against what the model's OpenFlow
pipeline (datapath/model/openflow/) interprets (issue 28, item 1).

1. Extraction, from the text of each .at file, never by running it: every
   `ovs-ofctl add-flow BR FLOW` and `mod-flows BR FLOW` (any options, the flow
   quoted or not), `add-flows` / `replace-flows BR FILE` and `bundle BR FILE`,
   FILE's lines taken from its AT_DATA block, a here-document, or the echo
   commands whose output goes into it (`-`: the pipeline or here-document that
   feeds it).  m4 is undone the way autom4te does it for text in a macro's
   argument: one level of [ ] quotes, dnl, the quadrigraphs.
2. A flow whose text holds a shell expansion ($, backquotes), an m4 macro
   defined in tests/*.at, or comes from a file no literal text wrote, is
   counted "unreadable" with its file:line, never guessed.
3. Each readable flow goes through the model's own normalisation
   (openflow.flow_keys); per match field and per action key (ct's arguments,
   set_field/load/move destinations and output to a field as rows of their
   own) how many flows name it, in which files, and whether the model
   interprets it (MODELLED_FIELDS, which holds ALIASES and SHORTHANDS;
   MODELLED_ACTIONS; CT_ARGS).

A flow counts once per command that installs it (a flows file added to two
bridges is two).  Packet-outs, group and meter commands are not flows.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooling.atflows import Found, extract
from tooling.atsource import m4_macros

# The .at files this suite reproduces (harness/upstream.py's FILES holds their
# tests), and the one listed separately (issue 28: "then those of ofproto-dpif.at").
REPRODUCED = ("dpif-netdev.at", "pmd.at", "tunnel-push-pop.at", "tunnel-push-pop-ipv6.at",
              "alb.at", "dpctl.at", "drop-stats.at", "system-traffic.at", "system-tap.at",
              "system-afxdp.at", "system-dpdk.at", "system-userspace-packet-type-aware.at",
              "system-layer3-tunnels.at", "system-interface.at", "system-route.at")
SEPARATE = ("ofproto-dpif.at",)
DEFAULT_OUT = "reports/out-of-scope"
DEFAULT_NAME = "of-scope.md"

# What set_field, load and move may write comes from the interpreter itself
# (openflow.SET_FIELD_TARGETS, LOAD_TARGETS); tests/test_of_scope.py checks the
# rows against what it runs and refuses.
# What ct's exec(...) may do in the model (openflow._Walk.ct): these actions, to these fields.
CT_EXEC_ACTIONS = frozenset({"set_field", "load", "move"})
CT_EXEC_TARGETS = frozenset({"ct_mark", "ct_label"})


# -- counting ------------------------------------------------------------------

@dataclass
class Row:
    """One match field or action key: the flows naming it, per file."""

    name: str
    modelled: bool
    files: Counter[str] = field(default_factory=Counter)

    @property
    def flows(self) -> int:
        return sum(self.files.values())


@dataclass
class Scope:
    """The counts of one set of files."""

    label: str  # "the reproduced files", "ofproto-dpif.at"
    files: tuple[str, ...]
    flows: int = 0
    fields: dict[str, Row] = field(default_factory=dict)
    actions: dict[str, Row] = field(default_factory=dict)
    unreadable: list[Found] = field(default_factory=list)
    unparsed: list[tuple[Found, str]] = field(default_factory=list)
    odd_keys: list[tuple[Found, str]] = field(default_factory=list)

    def count(self, table: dict[str, Row], name: str, modelled: bool, file: str) -> None:
        row = table.setdefault(name, Row(name, modelled))
        row.modelled = row.modelled and modelled
        row.files[file] += 1


def action_rows(key: str, value: Any) -> Iterator[tuple[str, bool]]:
    """The rows one decoded action counts in: its key, and its arguments' rows."""
    from datapath.model import openflow as of

    yield key, key in of.MODELLED_ACTIONS
    if key == "ct" and isinstance(value, dict):
        for arg, sub in value.items():
            if arg == "zone" and isinstance(sub, dict):
                name = of.ALIASES.get(sub["field"], sub["field"])
                yield "ct.zone-from-field", name == "in_port" or name in of.WRITABLE_META \
                    or name in of.CT_FIELDS
                continue
            yield f"ct.{arg}", arg in of.CT_ARGS
            if arg == "exec":
                for act in sub:
                    for akey, aval in act.items():
                        dst = aval.get("dst", {}).get("field", "") if isinstance(aval, dict) \
                            else ""
                        yield f"ct.exec.{akey}", akey in CT_EXEC_ACTIONS and \
                            of.ALIASES.get(dst, dst) in CT_EXEC_TARGETS
    elif key in ("set_field", "load", "move") and isinstance(value, dict):
        dst = value.get("dst", {}).get("field", "")
        name = of.ALIASES.get(dst, dst)
        yield f"{key}->{dst}", name in (of.SET_FIELD_TARGETS if key == "set_field"
                                        else of.LOAD_TARGETS)
    elif key == "output" and isinstance(value, dict) and "[" in str(value.get("port", "")):
        field = str(value["port"]).split("[", 1)[0]
        name = of.ALIASES.get(field, field)
        yield "output->field", name == "in_port" or name in of.WRITABLE_META


def tally(found: Iterable[Found], label: str, files: tuple[str, ...]) -> Scope:
    """Count the match fields and action keys of the flows found."""
    from datapath.model import openflow as of

    scope = Scope(label, files)
    for flow in found:
        if flow.unreadable:
            scope.unreadable.append(flow)
            continue
        try:
            keys = of.flow_keys(flow.text)
        except of.NotModelled as err:
            scope.unparsed.append((flow, str(err)))
            continue
        scope.flows += 1
        for key in dict.fromkeys(keys.match):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                scope.odd_keys.append((flow, key))
                continue
            scope.count(scope.fields, key, key in of.MODELLED_FIELDS, flow.file)
        rows: dict[str, bool] = {}
        for key, value in keys.actions:
            for name, modelled in action_rows(key, value):
                rows[name] = rows.get(name, True) and modelled
        for name, modelled in rows.items():
            scope.count(scope.actions, name, modelled, flow.file)
    return scope


# -- the report ----------------------------------------------------------------

def _is_sub(name: str) -> bool:
    return "." in name or "->" in name


def totals(scope: Scope) -> list[str]:
    """The headline lines of one scope."""
    fields = list(scope.fields.values())
    acts = [r for r in scope.actions.values() if not _is_sub(r.name)]
    subs = [r for r in scope.actions.values() if _is_sub(r.name)]
    return [
        f"{sum(r.modelled for r in fields)} of {len(fields)} fields and "
        f"{sum(r.modelled for r in acts)} of {len(acts)} actions used by {scope.label} "
        "are modelled "
        f"({scope.flows} flows read; {len(scope.unreadable)} unreadable, "
        f"{len(scope.unparsed)} ovs.flow could not read)",
        f"action arguments (ct.*, set_field/load/move destinations, output to a field): "
        f"{sum(r.modelled for r in subs)} of {len(subs)} modelled",
    ]


def _table(rows: Iterable[Row]) -> list[str]:
    lines = ["| name | flows | files | modelled |", "|---|---:|---|---|"]
    for row in sorted(rows, key=lambda r: (-r.flows, r.name)):
        files = ", ".join(f"{f} ({n})" for f, n in sorted(row.files.items(),
                                                          key=lambda kv: (-kv[1], kv[0])))
        name = row.name.replace("|", "\\|")
        lines.append(f"| `{name}` | {row.flows} | {files} | {'yes' if row.modelled else 'no'} |")
    return lines


def render(scopes: list[tuple[str, Scope]], source: str) -> str:
    """The markdown report of the scopes."""
    out = ["# OpenFlow scope of the model", "",
           f"Flows installed by upstream's .at files ({source}), read mechanically by "
           "`./ovstest of-scope` (tooling/of_scope.py) through the model's own "
           "normalisation (datapath/model/openflow/: flow_keys); modelled: the name is in "
           "MODELLED_FIELDS (with ALIASES and SHORTHANDS), MODELLED_ACTIONS or CT_ARGS, or "
           "(set_field/load/move destinations) a field the interpreter writes; `ct.alg` is "
           "not (the model accepts it with a note: the helper's related connections are not "
           "modelled).  A flow counts once per command that installs it; a row counts the "
           "flows that name it at least once.", ""]
    for title, scope in scopes:
        out += [f"## {title}", "", *(f"- {line}" for line in totals(scope)), "",
                "Files: " + ", ".join(scope.files), "", "### Match fields", "",
                *_table(scope.fields.values()), "", "### Actions", "",
                *_table(scope.actions.values()), ""]
        if scope.unreadable:
            out += [f"### Unreadable ({len(scope.unreadable)})", ""]
            out += [f"- {f.file}:{f.line}: {f.unreadable}: `{f.text[:100]}`"
                    for f in scope.unreadable]
            out.append("")
        if scope.unparsed:
            out += [f"### Not read by ovs.flow ({len(scope.unparsed)})", ""]
            out += [f"- {f.file}:{f.line}: `{f.text[:100]}`: {err[:160]}"
                    for f, err in scope.unparsed]
            out.append("")
        if scope.odd_keys:
            out += [f"### Match keys ovs.flow misread ({len(scope.odd_keys)}, not counted)", ""]
            out += [f"- {f.file}:{f.line}: `{key}` in `{f.text[:100]}`" for f, key in
                    scope.odd_keys]
            out.append("")
    return "\n".join(out)


def scan(tests_dir: Path, files: tuple[str, ...], macros: frozenset[str]) -> list[Found]:
    """Every flow the named files of tests_dir install (a missing file: none)."""
    found: list[Found] = []
    for name in files:
        path = tests_dir / name
        if path.is_file():
            found += extract(name, path.read_text(encoding="utf-8", errors="replace"), macros)
    return found


def main(argv: list[str] | None = None) -> int:
    """`python3 -m tooling.of_scope --ovs-src DIR [--out FILE]`."""
    parser = argparse.ArgumentParser(prog="of_scope")
    parser.add_argument("--ovs-src", required=True, help="the OVS source tree")
    parser.add_argument("--out", default=f"{DEFAULT_OUT}/{DEFAULT_NAME}",
                        help="the markdown file to write")
    args = parser.parse_args(argv)
    tests = Path(args.ovs_src) / "tests"
    if not (tests / "ofproto-dpif.at").is_file():
        print(f"of_scope: {tests} holds no ofproto-dpif.at: not an OVS source tree",
              file=sys.stderr)
        return 2
    missing = [f for f in (*REPRODUCED, *SEPARATE) if not (tests / f).is_file()]
    macros = m4_macros(tests)
    scopes = [("The reproduced files",
               tally(scan(tests, REPRODUCED, macros), "the reproduced files", REPRODUCED)),
              ("ofproto-dpif.at", tally(scan(tests, SEPARATE, macros), "ofproto-dpif.at",
                                        SEPARATE))]
    text = render(scopes, f"{args.ovs_src}/tests")
    if missing:
        text += "\nMissing from this tree: " + ", ".join(missing) + "\n"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
