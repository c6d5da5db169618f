"""A case record as an Autotest test in the style of upstream's tests/dpif-netdev.at.

`render(case, title, keywords)` is a pure function of the record.  The record's
transcript is replayed in its order, rewritten the way upstream writes it:

- the sandbox's start (ovsdb-tool, `ovs-vsctl --no-wait init`) is
  OVS_VSWITCHD_START;
- database settings the case made before ovs-vswitchd started (such as
  userspace-tso-enable, which must be set before any port exists) open
  OVS_VSWITCHD_START's vsctl-args, where upstream's tso tests set it: the
  first transaction, before any port exists.  (As dbinit-aux-args it would
  make ovs-vswitchd log "Userspace TCP Segmentation Offloading support
  enabled" on stderr at start, which OVS_VSWITCHD_START's check refuses.);
- the ovs-vsctl calls that open the case (before any other tool) follow in the
  same vsctl-args, in one transaction, as upstream does;
- every other ovs-vsctl, ovs-ofctl and ovs-appctl call is an AT_CHECK with
  the exit status the case saw (and "OK" where the command printed it), with
  the sandbox's paths made relative to the test's directory;
- the harness's own rx-counter polls (`dpctl/show -s`) are left out: the
  exported test waits on the pcap instead, as upstream's OVS_WAIT_UNTIL does;
- each step's frames are AT_DATA files, layer by layer with scapy comments;
  after the step's receive, the test waits for the frames on the tx port's
  pcap and compares the last ones with what the MODEL expected (the correct
  frames, not what OVS sent); where a known abort is at stake, it first
  checks that ovs-vswitchd still answers.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from datapath.model import bugs
from export.frames import at_data, m4_comment
from harness.logscan import scan_lines
from harness.records import CaseRecord, Command, Step
from reports.repro import captured_ports, find_rundir, replayed_commands

HARNESS_POLLS = (("ovs-appctl", "dpctl/show", "-s"),)
VSCTL_HARNESS_ARG = re.compile(r"^--(timeout|db)=")
HEX_ARG = re.compile(r"^(?:[0-9a-fA-F]{2})+$")
MAX_LINE = 79
CRASH_KEYS = frozenset(b.key for b in bugs.ALL if b.crash)


@dataclass
class Exported:
    """An exported test and what could not be carried over faithfully."""

    title: str
    keywords: list[str]
    text: str
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # titles of steps not exported
    frame_files: dict[str, str] = field(default_factory=dict)  # AT_DATA name -> hex


def m4_quote(text: str) -> str:
    """Text inside m4 quotes: a literal bracket is a quadrigraph."""
    return text.replace("[", "@<:@").replace("]", "@:>@")


def shell_words(argv: list[str]) -> str:
    """`argv` as one shell command line, each word quoted where needed."""
    return " ".join(shlex.quote(a) for a in argv)


def relative(arg: str, rundir: str | None) -> str:
    """The sandbox's paths relative to the test's own directory (upstream's cwd)."""
    if not rundir:
        return arg
    base = rundir.rstrip("/")
    return re.sub(re.escape(base) + r"(/|(?=$)|(?=[\s,]))", lambda m: "" if m.group(1) else ".",
                  arg)


def vsctl_args(argv: list[str]) -> list[str]:
    """An ovs-vsctl command's arguments without those the sandbox adds (upstream's test has
    its own)."""
    return [a for a in argv[1:] if not VSCTL_HARNESS_ARG.match(a)]


def at_check(command: str, rc: int = 0, stdout: str = "", stderr: str = "") -> str:
    """AT_CHECK of a shell command (already quoted for the shell) with the exit
    status the case saw; its output is checked where it is empty or "OK"."""
    out = "" if not stdout else ("[OK\n]" if stdout == "OK\n" else "[ignore]")
    err = "[ignore]" if stderr else ""
    args = [f"[{m4_quote(command)}]"]
    if rc or out or err:
        args.append(f"[{rc}]")
    if out or err:
        args.append(out or "[]")
    if err:
        args.append(err)
    return f"AT_CHECK({', '.join(args)})"


def _clauses(commands: list[list[str]]) -> list[str]:
    """ovs-vsctl arguments for OVS_VSWITCHD_START as upstream lays them out: a
    line per added bridge or port, its `set` clause on the same line when it
    fits, else on the next one, indented."""
    clauses: list[list[str]] = []
    for args in commands:
        current: list[str] = []
        for word in args + ["--"]:
            if word == "--":
                if current:
                    clauses.append(current)
                current = []
            else:
                current.append(word)
    lines: list[str] = []
    for clause in clauses:
        text = m4_quote(shell_words(clause))
        if clause[0] == "set" and lines and len(lines[-1]) + len(text) + 8 <= MAX_LINE:
            lines[-1] += " -- " + text
        elif clause[0] == "set" and lines:
            lines.append("    " + text)
        else:
            lines.append(text)
    return lines


def wrapped(line: str, indent: int) -> str:
    """A long command broken at its `--` clauses, as upstream writes them."""
    if len(line) <= MAX_LINE or " -- " not in line:
        return line
    return (" -- \\\n" + " " * indent).join(line.split(" -- "))


def start_macro(vsctl: list[list[str]]) -> list[str]:
    """OVS_VSWITCHD_START with the opening ovs-vsctl calls as its vsctl-args."""
    if not vsctl:
        return ["OVS_VSWITCHD_START"]
    return ["OVS_VSWITCHD_START(", "  [" + " -- \\\n   ".join(_clauses(vsctl)) + "])"]


class _Frames:
    """AT_DATA files, one per distinct frame: a frame that is both sent and
    expected (forwarded unchanged) is one file."""

    def __init__(self, prefix: str, names: dict[str, str]) -> None:
        self.prefix = prefix
        self.names = names  # hex -> file name, shared by the sent and expected frames
        self.count = 0

    def name(self, hexa: str, out: list[str], label: str) -> str:
        if hexa not in self.names:
            self.count += 1
            self.names[hexa] = f"{self.prefix}{self.count}"
            out.append(m4_comment(label))
            out += at_data(self.names[hexa], bytes.fromhex(hexa))
        return self.names[hexa]


def transcript(case: CaseRecord) -> list[tuple[list[str], Command]]:
    """(argv with the tool by name, the recorded command) of each command to
    replay: reports.repro's choice, with each entry's recorded output."""
    out = []
    pos = 0
    for argv, _ in replayed_commands(case):
        while pos < len(case.commands):
            command = case.commands[pos]
            pos += 1
            if command.argv and [os.path.basename(command.argv[0]), *command.argv[1:]] == argv:
                out.append((argv, command))
                break
    return out


def render(case: CaseRecord, title: str, keywords: list[str]) -> Exported:
    """The AT test for one case record."""
    rundir = find_rundir(case)
    commands = transcript(case)
    ports = {p: relative(f, rundir) for p, f in captured_ports(case).items()}
    result = Exported(title, keywords, "")

    def args_of(argv: list[str]) -> list[str]:
        rest = vsctl_args(argv) if argv[0] == "ovs-vsctl" else argv[1:]
        return [relative(a, rundir) for a in rest]

    i = 0
    # OVS_VSWITCHD_START's vsctl-args: the settings made before ovs-vswitchd
    # started, then the ovs-vsctl calls that open the case.
    opening: list[list[str]] = []
    while i < len(commands) and commands[i][0][0] == "ovs-vsctl" and "--no-wait" in commands[i][0]:
        opening.append([a for a in args_of(commands[i][0]) if a != "--no-wait"])
        i += 1
    while i < len(commands) and commands[i][0][0] == "ovs-vsctl" and commands[i][1].rc == 0 \
            and not commands[i][1].stdout and args_of(commands[i][0])[:1] != [] \
            and not args_of(commands[i][0])[0].startswith("-"):
        opening.append(args_of(commands[i][0]))
        i += 1
    body: list[str] = []
    files: dict[str, str] = {}
    frames, expected = _Frames("frame", files), _Frames("expected", files)
    pending = [s for s in case.steps if s.sent]
    counts: dict[str, int] = {}
    last: tuple[str, ...] = ()
    for argv, command in commands[i:]:
        tool, rest = argv[0], args_of(argv)
        key = (tool, *rest)
        if key in HARNESS_POLLS or (key == last and command.stdout):
            continue  # the harness's own poll, or a query repeated while polling
        last = key
        if tool == "ovs-appctl" and rest[:1] == ["netdev-dummy/receive"]:
            step = _matching_step(pending, rest)
            words = [f"$(cat {frames.name(w.lower(), body, _label(step, w))})"
                     if HEX_ARG.match(w) else shlex.quote(w) for w in rest]
            body.append(at_check(f"ovs-appctl {' '.join(words)}", command.rc))
            if step is not None:
                pending.remove(step)
                body += _step_checks(step, ports, expected, counts, result)
            continue
        body.append(at_check(wrapped(shell_words([tool, *rest]), 20), command.rc,
                             command.stdout, command.stderr))
    for step in pending:
        result.skipped.append(step.title)
        result.warnings.append(f"step {step.title!r}: its frames were not found in a "
                               "netdev-dummy/receive of the transcript; not exported")
    if not case.steps:
        result.warnings.append("the case checked no frames: the exported test replays its "
                               "commands but checks only their exit status")
    if any("type=dummy-pmd" in " ".join(a) for a, _ in commands):
        result.warnings.append("dummy-pmd ports: the record does not keep ovs-vswitchd's "
                               "command line (e.g. --dummy-numa); add it to "
                               "OVS_VSWITCHD_START's 4th argument if the case used one")
    result.frame_files = {name: hexa for hexa, name in files.items()}
    allow = _allowlist(case)
    result.text = "\n".join([
        f"AT_SETUP([{m4_quote(title)}])", f"AT_KEYWORDS([{m4_quote(' '.join(keywords))}])",
        *start_macro(opening), "", *body, "",
        f"OVS_VSWITCHD_STOP([{allow}])" if allow else "OVS_VSWITCHD_STOP", "AT_CLEANUP", ""])
    return result


def _allowlist(case: CaseRecord) -> str:
    """OVS_VSWITCHD_STOP's sed allowlist for the WARN/ERR lines of a case that
    passed (it tolerated them); never for a failed or xfailed one."""
    if case.outcome != "passed":
        return ""
    seds: list[str] = []
    for line in scan_lines(case.log_excerpt):
        match = re.search(r"\|(?:WARN|ERR)\|(.*)", line)
        if match:
            text = re.sub(r"[^A-Za-z0-9 :_-]+", ".", match.group(1)[:60]).strip(". ")
            if text and f"/{text}/d" not in seds:
                seds.append(f"/{text}/d")
    return '"' + "\n".join(seds) + '"' if seds else ""


def _matching_step(pending: list[Step], rest: list[str]) -> Step | None:
    """The first step not yet exported whose rx port and frames this receive carries."""
    hexes = [w.lower() for w in rest[2:] if HEX_ARG.match(w)]
    for step in pending:
        if len(rest) > 1 and step.rx_port == rest[1] and [h.lower() for h in step.sent] == hexes:
            return step
    return None


def _label(step: Step | None, hexa: str) -> str:
    size = len(hexa) // 2
    return (f"{step.title}: received on {step.rx_port} ({size} bytes)" if step
            else f"received ({size} bytes)")


def _step_checks(step: Step, ports: dict[str, str], files: _Frames,
                 counts: dict[str, int], result: Exported) -> list[str]:
    """After a step's receive: ovs-vswitchd alive (where a known abort is at
    stake), then the frames the model expects, the last ones of the tx pcap."""
    out: list[str] = []
    if CRASH_KEYS & set(step.bugs):
        out += ["dnl ovs-vswitchd must not abort on this packet.",
                "AT_CHECK([ovs-appctl version], [0], [ignore])"]
    if not step.tx_port:
        return out
    pcap = ports.get(step.tx_port)
    if pcap is None:
        result.warnings.append(f"step {step.title!r}: {step.tx_port} has no tx_pcap in the "
                               "transcript; what left it is not checked")
        return out
    total = counts.get(step.tx_port, 0) + len(step.expected)
    counts[step.tx_port] = total
    if not step.expected:
        return out + [f"dnl Nothing may leave {step.tx_port}.",
                      "AT_CHECK([ovs-appctl version], [0], [ignore])",
                      f"AT_CHECK([ovs-pcap {pcap} | wc -l | tr -d ' '], [0], [{total}\n])"]
    names = [files.name(h.lower(), out, f"{step.title}: must leave {step.tx_port} "
                        f"(frame {n + 1} of {len(step.expected)}, from the model)")
             for n, h in enumerate(step.expected)]
    txt = f"{pcap}.txt"
    return out + [f"OVS_WAIT_UNTIL([test $(ovs-pcap {pcap} | wc -l) -ge {total}])",
                  f"AT_CHECK([ovs-pcap {pcap} > {txt} 2>&1])",
                  f"AT_CHECK([awk 1 {' '.join(names)} > expout])",
                  f"AT_CHECK([tail -n {len(names)} {txt}], [0], [expout])"]
