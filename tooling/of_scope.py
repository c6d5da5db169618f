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
import bisect
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The .at files this suite reproduces (harness/upstream.py's FILES holds their
# tests), and the one listed separately (issue 28: "then those of ofproto-dpif.at").
REPRODUCED = ("dpif-netdev.at", "pmd.at", "tunnel-push-pop.at", "tunnel-push-pop-ipv6.at",
              "alb.at", "dpctl.at", "drop-stats.at", "system-traffic.at", "system-tap.at",
              "system-afxdp.at", "system-dpdk.at", "system-userspace-packet-type-aware.at",
              "system-layer3-tunnels.at", "system-interface.at", "system-route.at")
SEPARATE = ("ofproto-dpif.at",)
DEFAULT_OUT = "reports/out-of-scope"
DEFAULT_NAME = "of-scope.md"

# ovs-ofctl's commands that install flows: the flow on the line, or a file of them.
FLOW_COMMANDS = ("add-flow", "mod-flows")
FILE_COMMANDS = ("add-flows", "replace-flows", "bundle")
# ovs-ofctl options whose value may be the next word (ovs-ofctl(8)).
OPTION_ARGS = ("-O", "-F", "-P", "-t", "--protocols", "--flow-format", "--packet-in-format",
               "--timeout", "--unixctl")
# A flows file's line may start with its flow_mod command (ovs-ofctl(8), add-flows);
# the delete ones install nothing.
FILE_KEYWORDS = ("add", "modify", "modify_strict", "delete", "delete_strict")
QUADRIGRAPHS = {"@<:@": "[", "@:>@": "]", "@S|@": "$", "@%:@": "#", "@&t@": "", "@{:@": "(",
                "@:}@": ")"}
# What set_field, load and move may write comes from the interpreter itself
# (openflow.SET_FIELD_TARGETS, LOAD_TARGETS); tests/test_of_scope.py checks the
# rows against what it runs and refuses.
# What ct's exec(...) may do in the model (openflow._Walk.ct): these actions, to these fields.
CT_EXEC_ACTIONS = frozenset({"set_field", "load", "move"})
CT_EXEC_TARGETS = frozenset({"ct_mark", "ct_label"})


# -- m4 ------------------------------------------------------------------------

def quote_spans(text: str) -> list[tuple[int, int, int]]:
    """Every m4 quoted string of the file: (open, close, depth), the offsets of
    its [ and its ], depth 1 for the outermost.  A # or dnl outside quotes
    comments out the rest of its line (m4 reads no quotes there)."""
    spans: list[tuple[int, int, int]] = []
    stack: list[int] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if not stack and (c == "#" or text.startswith("dnl", i) and
                          (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and
                          not (text[i + 3:i + 4].isalnum() or text[i + 3:i + 4] == "_")):
            i = text.find("\n", i)
            if i < 0:
                break
        elif c == "[":
            stack.append(i)
        elif c == "]" and stack:
            start = stack.pop()
            spans.append((start, i, len(stack) + 1))
        i += 1
    return spans


def unquote(text: str, base: int = 0) -> tuple[str, list[int]]:
    """`text` as m4's rescan leaves it: the outer level of [ ] quotes removed, dnl
    and the rest of its line dropped outside them, quadrigraphs replaced; with
    each output character's offset in the file (base + its index)."""
    out: list[str] = []
    where: list[int] = []
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if depth == 0 and text.startswith("dnl", i) and \
                (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and \
                not (text[i + 3:i + 4].isalnum() or text[i + 3:i + 4] == "_"):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if c == "[":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c == "]" and depth > 0:
            depth -= 1
            if depth == 0:
                i += 1
                continue
        quad = None if c != "@" else next((q for q in QUADRIGRAPHS if text.startswith(q, i)),
                                          None)
        if quad is not None:
            out.append(QUADRIGRAPHS[quad])
            where.append(base + i)
            i += len(quad)
            continue
        out.append(c)
        where.append(base + i)
        i += 1
    return "".join(out), where


def macro_args(text: str, open_paren: int) -> list[tuple[int, int]]:
    """The arguments of the m4 call whose ( is at `open_paren`: (start, end) of
    each, leading whitespace skipped, quotes kept."""
    args, depth, quote, start, i = [], 0, 0, open_paren + 1, open_paren + 1
    while i < len(text):
        c = text[i]
        if c == "[":
            quote += 1
        elif c == "]" and quote:
            quote -= 1
        elif not quote and c == "(":
            depth += 1
        elif not quote and c == ")":
            if depth == 0:
                args.append((start, i))
                break
            depth -= 1
        elif not quote and depth == 0 and c == ",":
            args.append((start, i))
            start = i + 1
        i += 1
    return [(s + len(text[s:e]) - len(text[s:e].lstrip()), e) for s, e in args]


def m4_macros(tests_dir: Path) -> frozenset[str]:
    """The names tests/*.at define as m4 macros (m4_define, m4_defun, AT_DEFUN, ...),
    which m4 expands wherever they follow: a flow naming one is unreadable.  (The
    variables of m4_foreach and m4_for are macros only in their loop's body:
    AtFile.loops)."""
    names: set[str] = set()
    for path in sorted(tests_dir.glob("*.at")):
        names.update(DEFINE.findall(path.read_text(encoding="utf-8", errors="replace")))
    return frozenset(names)


DEFINE = re.compile(r"\b(?:m4_define|m4_define_default|m4_defun|AC_DEFUN|AT_DEFUN)\(\s*\[?"
                    r"([A-Za-z_][A-Za-z0-9_]*)")
LOOP = re.compile(r"\b(?:m4_foreach|m4_foreach_w|m4_for)\(")


# -- shell ---------------------------------------------------------------------

@dataclass
class Word:
    """One shell word: its text with quotes removed, where it starts (an index
    into its region's text), whether it holds an expansion ($, backquotes)."""

    text: str
    at: int
    expands: bool = False


@dataclass
class Command:
    """One simple command: its words, its redirections (with those of the ( ) or
    loop around it), its here-document (body, index of the body, expanded) and
    the command piped into it."""

    words: list[Word]
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    heredoc: tuple[str, int, bool] | None = None
    piped_from: Command | None = None


@dataclass
class _Token:
    op: str  # "" for a word
    at: int
    word: Word | None = None
    heredoc: tuple[str, int, bool] | None = None


OPERATORS = ("&&", "||", ";;", "<<-", "<<", ">>", ">&", "<&", "&>", "|", ";", "&", "(", ")",
             "<", ">", "\n")
REDIRECTS = (">", ">>", "<", "&>", ">&", "<&")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)
FD_REDIRECT = re.compile(r"\d+[<>]")
RESERVED = ("do", "then", "else", "elif", "{", "!", "if")


def _word(text: str, i: int) -> tuple[Word, int]:
    """The shell word that starts at i, and the index after it."""
    out: list[str] = []
    expands, start, n = False, i, len(text)
    while i < n and text[i] not in " \t\n;&|<>()":
        c = text[i]
        if c == "\\":
            out.append(text[i + 1:i + 2] if text[i + 1:i + 2] != "\n" else "")
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            out.append(text[i + 1:end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and text[i + 1:i + 2] in ('"', "\\", "$", "`", "\n"):
                    out.append("" if text[i + 1] == "\n" else text[i + 1])
                    i += 2
                    continue
                expands = expands or text[i] in "$`"
                out.append(text[i])
                i += 1
            i += 1
        elif c in "$`":
            expands = True
            j = i + 1
            if c == "`":
                j = text.find("`", j) % (n + 1)
            elif text.startswith("$(", i):
                depth = 0
                for j in range(i + 1, n):
                    depth += {"(": 1, ")": -1}.get(text[j], 0)
                    if depth == 0:
                        break
            out.append(text[i:j + 1] if j > i + 1 or c == "`" else c)
            i = j + 1 if j > i + 1 or c == "`" else i + 1
        else:
            out.append(c)
            i += 1
    return Word("".join(out), start, expands), i


def _tokens(text: str) -> list[_Token]:
    """Words and operators; a here-document's body goes with its <<."""
    tokens: list[_Token] = []
    pending: list[tuple[_Token, str, bool, bool]] = []  # <<, delimiter, expanded, <<-
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t":
            i += 1
        elif c == "\\" and text[i + 1:i + 2] == "\n":
            i += 2
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;&|()"):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith(OPERATORS, i) or (c.isdigit() and FD_REDIRECT.match(text, i)):
            while text[i].isdigit():
                i += 1  # 2>&1: the descriptor's number goes
            op = next(o for o in OPERATORS if text.startswith(o, i))
            token = _Token(op, i)
            tokens.append(token)
            i += len(op)
            if op in ("<<", "<<-"):
                while i < n and text[i] in " \t":
                    i += 1
                end_word, i = _word(text, i)
                quoted = any(q in text[end_word.at:i] for q in "'\"\\")
                pending.append((token, end_word.text, not quoted, op == "<<-"))
            elif op == "\n":
                for token, delim, expanded, tabs in pending:
                    body_at, lines = i, []
                    while i < n:
                        end = text.find("\n", i) % (n + 1)
                        line, i = text[i:end], end + 1
                        if (line.lstrip("\t") if tabs else line) == delim:
                            break
                        lines.append(line)
                    token.heredoc = ("\n".join(lines), body_at, expanded)
                pending = []
        else:
            word, i = _word(text, i)
            tokens.append(_Token("", word.at, word))
    return tokens


def commands(text: str) -> list[Command]:
    """The simple commands of a shell text, in order: enough of the grammar to
    find ovs-ofctl's arguments and what writes a file (words, redirections,
    here-documents, pipes; a redirection after `)` or `done` is every command's
    since the matching `(` or loop start)."""
    tokens = _tokens(text)
    out: list[Command] = []
    cur = Command([])
    opens: list[int] = []  # where in `out` each open ( and loop began
    loops: list[int] = []
    piped: Command | None = None

    def finish(op: str) -> None:
        nonlocal cur, piped
        words = cur.words
        while words and words[0].text in RESERVED and not words[0].expands:
            words = words[1:]
        if words and words[0].text in ("for", "while", "until"):
            loops.append(len(out))
            words = [] if words[0].text == "for" else words[1:]
        cur.words = words
        if words and words[0].text == "done":
            for earlier in out[loops.pop() if loops else len(out):]:
                earlier.redirects += [r for r in cur.redirects if r[0] in (">", ">>")]
            cur, piped = Command([]), None
            return
        if cur.words or cur.redirects or cur.heredoc:
            cur.piped_from = piped
            out.append(cur)
        piped = out[-1] if op == "|" and out else None
        cur = Command([])

    k = 0
    while k < len(tokens):
        token = tokens[k]
        nxt = tokens[k + 1] if k + 1 < len(tokens) else None
        if token.word is not None:
            cur.words.append(token.word)
        elif token.op in REDIRECTS and nxt is not None and nxt.word is not None:
            cur.redirects.append((token.op, nxt.word))
            k += 1
        elif token.op in ("<<", "<<-"):
            cur.heredoc = token.heredoc
        elif token.op == ")":
            finish(token.op)
            start = opens.pop() if opens else 0
            while k + 2 < len(tokens) and tokens[k + 1].op in (">", ">>") and \
                    tokens[k + 2].word is not None:
                target = tokens[k + 2].word
                assert target is not None
                for earlier in out[start:]:
                    earlier.redirects.append((tokens[k + 1].op, target))
                k += 2
        else:
            finish(token.op)
            if token.op == "(":
                opens.append(len(out))
        k += 1
    finish("\n")
    return out


# -- extraction ----------------------------------------------------------------

@dataclass(frozen=True)
class Found:
    """One flow an .at file installs: its text, or why it cannot be read."""

    file: str
    line: int
    text: str
    unreadable: str = ""  # the reason, when not read


@dataclass
class _Region:
    """A shell text of the file: a macro argument's, or a test's top level."""

    text: str
    where: list[int]
    _commands: list[Command] | None = None

    @property
    def commands(self) -> list[Command]:
        if self._commands is None:
            self._commands = commands(self.text)
        return self._commands

    def offset(self, at: int) -> int:
        return self.where[min(at, len(self.where) - 1)] if self.where else 0


class AtFile:
    """One .at file's text, its quotes and its tests' ranges."""

    def __init__(self, name: str, text: str, macros: frozenset[str]) -> None:
        self.name, self.text, self.macros = name, text, macros
        self.spans = quote_spans(text)
        self._newlines = [m.start() for m in re.finditer("\n", text)]
        self.tests = [(m.start(), text.find("AT_CLEANUP", m.end()) % (len(text) + 1))
                      for m in re.finditer(r"\bAT_SETUP\(", text)]
        self._regions: dict[tuple[int, int], _Region] = {}
        # m4_foreach([VAR], LIST, BODY) and m4_for([VAR], ..., BODY): (body's span, VAR)
        self.loops: list[tuple[int, int, str]] = []
        for m in LOOP.finditer(text):
            args = macro_args(text, m.end() - 1)
            if len(args) >= 3:
                var = unquote(text[args[0][0]:args[0][1]])[0].strip()
                self.loops.append((args[-1][0], args[-1][1], var))

    def line(self, offset: int) -> int:
        """The 1-based line of an offset."""
        return bisect.bisect_right(self._newlines, offset - 1) + 1

    def test_of(self, offset: int) -> tuple[int, int]:
        for start, end in self.tests:
            if start <= offset <= end:
                return start, end
        return 0, len(self.text)

    def region(self, offset: int) -> _Region:
        """The shell text `offset` is in: the innermost quoted string around it,
        unquoted, or the top level of its test with every quoted string blanked."""
        inner = None
        for start, end, depth in self.spans:
            if start < offset < end and (inner is None or start > inner[0]):
                inner = (start, end)
        if inner is None:
            lo, hi = self.test_of(offset)
            key = (lo, -hi)
            if key not in self._regions:
                chars = list(self.text[lo:hi])
                for start, end, depth in self.spans:
                    # A macro's argument (after its "(" or ","): not this shell text.
                    if depth == 1 and lo <= start and end < hi and \
                            _before(self.text, start) in ("(", ","):
                        for j in range(start - lo, end - lo + 1):
                            if chars[j] != "\n":
                                chars[j] = " "
                text, where = unquote("".join(chars), lo)
                self._regions[key] = _Region(text, where)
            return self._regions[key]
        if inner not in self._regions:
            self._regions[inner] = _Region(*unquote(self.text[inner[0] + 1:inner[1]],
                                                    inner[0] + 1))
        return self._regions[inner]

    def unreadable_reason(self, text: str, offset: int, expands: bool = False) -> str:
        """Why a flow's text at `offset` cannot be read as it stands ("": it can)."""
        if re.search(r"\$[0-9@#*]", text):
            return "a $N expansion (an m4 macro's argument, or the shell's)"
        if expands or "$" in text or "`" in text:
            return "a shell expansion"
        local = {var for start, end, var in self.loops if start <= offset < end}
        for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text):
            if word in self.macros or word in local:
                return f"the m4 macro {word}"
        return ""

    def found(self, offset: int, text: str, expands: bool = False, why: str = "") -> Found:
        why = why or self.unreadable_reason(text, offset, expands)
        return Found(self.name, self.line(offset), text.strip(), why)


def _invocation(cmd: Command, local: int) -> tuple[str, list[Word]] | None:
    """The ovs-ofctl command line whose `ovs-ofctl` word starts at `local` in its
    region: its command and its positional words (options dropped)."""
    words = cmd.words
    while words and ASSIGNMENT.fullmatch(words[0].text):
        words = words[1:]  # VAR=value before the command
    if not words or words[0].text != "ovs-ofctl" or words[0].at != local:
        return None
    positional: list[Word] = []
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
        elif word.text.startswith("-") and word.text != "-":
            skip = word.text in OPTION_ARGS
        else:
            positional.append(word)
    if not positional:
        return None
    return positional[0].text, positional[1:]


def file_lines(kind: str, body: str) -> Iterator[tuple[int, str]]:
    """The flows of a flows file (add-flows, replace-flows) or a bundle file:
    (the line's offset in body, the flow's text).  Comments, blank lines,
    deletes, groups and packet-outs are not flows."""
    at = 0
    for raw in body.split("\n"):
        start, at = at, at + len(raw) + 1
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split(None, 1)
        if kind == "bundle":
            if words[0] != "flow" or len(words) < 2:
                continue
            line = words[1]
            words = line.split(None, 1)
        if words[0] in FILE_KEYWORDS:
            if words[0].startswith("delete") or len(words) < 2:
                continue
            line = words[1]
        yield start + len(raw) - len(raw.lstrip()), line


@dataclass(frozen=True)
class _Text:
    """A file's contents as some writer gives them: the text, each character's
    offset in the .at file, and whether the shell expands it."""

    body: str
    where: list[int]
    expands: bool


class Extractor:
    """The flows one .at file installs."""

    def __init__(self, at: AtFile) -> None:
        self.at = at

    def run(self) -> list[Found]:
        out: list[Found] = []
        for m in re.finditer(r"(?<![\w-])ovs-ofctl(?![\w-])", self.at.text):
            region = self.at.region(m.start())
            local = _local(region, m.start())
            for cmd in region.commands:
                inv = _invocation(cmd, local)
                if inv is None:
                    continue
                name, args = inv
                if name in FLOW_COMMANDS and len(args) >= 2:
                    flow = args[1:]
                    text = " ".join(w.text for w in flow)
                    out.append(self.at.found(region.offset(flow[0].at), text,
                                             any(w.expands for w in flow)))
                elif name in FILE_COMMANDS and len(args) >= 2:
                    out += self.from_file(name, args[1], cmd, region, m.start())
        return out

    def flows(self, kind: str, texts: list[_Text | Found]) -> list[Found]:
        """The flows of a file whose contents the writers gave."""
        found: list[Found] = []
        for text in texts:
            if isinstance(text, Found):
                found.append(text)
                continue
            for start, line in file_lines(kind, text.body):
                offset = text.where[min(start, len(text.where) - 1)] if text.where else 0
                found.append(self.at.found(offset, line, text.expands and
                                           ("$" in line or "`" in line)))
        return found

    def from_file(self, kind: str, arg: Word, cmd: Command, region: _Region,
                  offset: int) -> list[Found]:
        where = region.offset(arg.at)
        why = self.at.unreadable_reason(arg.text, where, arg.expands)
        if why:
            return [self.at.found(where, arg.text, why=f"its file {arg.text}: {why}")]
        if arg.text == "-":
            return self.flows(kind, [self.stdin(cmd, region, where)])
        return self.flows(kind, self.writers(arg.text, offset, where))

    def stdin(self, cmd: Command, region: _Region, where: int) -> _Text | Found:
        """What a command reads on its standard input: its here-document, or
        what the command before it in its pipeline writes."""
        feeder = cmd.piped_from
        if cmd.heredoc is not None:
            return self.heredoc(cmd, region)
        if feeder is not None and feeder.words and feeder.words[0].text == "echo":
            return self.echoed(feeder, region)
        if feeder is not None and feeder.words and feeder.words[0].text == "cat" and \
                feeder.heredoc is not None and len(feeder.words) == 1:
            return self.heredoc(feeder, region)
        return self.at.found(where, "-", why="its standard input is no literal text")

    def heredoc(self, cmd: Command, region: _Region) -> _Text:
        assert cmd.heredoc is not None
        body, at, expanded = cmd.heredoc
        return _Text(body, [region.offset(at + k) for k in range(len(body) + 1)], expanded)

    def echoed(self, cmd: Command, region: _Region) -> _Text:
        """The line an echo writes (its words, joined by one space)."""
        words = cmd.words[1:]
        while words and words[0].text in ("-n", "-e", "-E"):
            words = words[1:]
        body, where = "", []
        for word in words:
            if body:
                body += " "
                where.append(region.offset(word.at))
            body += word.text
            where += [region.offset(word.at)] * len(word.text)
        return _Text(body, where, any(w.expands for w in words))

    def writers(self, name: str, offset: int, where: int) -> list[_Text | Found]:
        """What was written to the file `name` before `offset` in its test: the
        last AT_DATA or > (truncating) write, then every >> after it."""
        lo, _ = self.at.test_of(offset)
        writes: list[tuple[int, str, object, _Text | Found]] = []  # offset, mode, group, what
        for m in re.finditer(r"\bAT_DATA\(", self.at.text[lo:offset]):
            args = macro_args(self.at.text, lo + m.end() - 1)
            if len(args) < 2 or _arg_text(self.at.text, *args[0])[0].strip() != name:
                continue
            body, offs = _arg_text(self.at.text, *args[1])
            writes.append((args[0][0], ">", ("AT_DATA", m.start()), _Text(body, offs, False)))
        pattern = re.compile(r">>?\s*['\"]?" + re.escape(name) + r"(?![\w.-])")
        seen: set[int] = set()
        for m in pattern.finditer(self.at.text, lo, offset):
            region = self.at.region(m.start())
            for cmd in region.commands:
                for op, target in cmd.redirects:
                    spot = region.offset(target.at)
                    if target.text != name or id(cmd) in seen or not lo <= spot < offset:
                        continue
                    seen.add(id(cmd))
                    if cmd.words and all(ASSIGNMENT.fullmatch(w.text) for w in cmd.words):
                        continue  # VAR=value writes nothing
                    verb = cmd.words[0].text if cmd.words else ""
                    what: _Text | Found
                    if verb == "echo":
                        what = self.echoed(cmd, region)
                    elif verb == "cat" and cmd.heredoc is not None and len(cmd.words) == 1:
                        what = self.heredoc(cmd, region)
                    else:
                        what = self.at.found(where, name, why=f"its file {name}: written by "
                                             f"`{verb or 'a redirection'}` (line "
                                             f"{self.at.line(spot)})")
                    start = region.offset(cmd.words[0].at) if cmd.words else spot
                    writes.append((start, op, id(target), what))
        writes.sort(key=lambda w: w[0])
        last = max((k for k, w in enumerate(writes) if w[1] == ">"), default=None)
        if last is None:
            return [self.at.found(where, name, why=f"its file {name}: no literal text writes it")]
        while last > 0 and writes[last - 1][2] == writes[last][2]:
            last -= 1  # the first command of the ( ) or loop that wrote it
        return [w[3] for w in writes[last:]]


def _arg_text(text: str, start: int, end: int) -> tuple[str, list[int]]:
    """An m4 argument as the macro's expansion leaves it: its own quotes and one
    more level removed (unquote), with each character's offset in the file."""
    raw = text[start:end].rstrip()
    if raw.startswith("["):
        close = next((e for s, e, _ in quote_spans(raw) if s == 0), len(raw))
        return unquote(raw[1:close], start + 1)
    return unquote(raw, start)


def _before(text: str, offset: int) -> str:
    """The last character before `offset` that is not white space."""
    k = offset - 1
    while k >= 0 and text[k] in " \t\n":
        k -= 1
    return text[k] if k >= 0 else ""


def _local(region: _Region, offset: int) -> int:
    """The index in the region's text of the character at file offset `offset`."""
    try:
        return region.where.index(offset)
    except ValueError:
        return -1


def extract(name: str, text: str, macros: frozenset[str] = frozenset()) -> list[Found]:
    """Every flow `text` (the .at file `name`) installs, readable or not."""
    return Extractor(AtFile(name, text, macros)).run()


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
