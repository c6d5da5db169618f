"""The OpenFlow flows an Autotest .at file installs, found in its text:
`ovs-ofctl add-flow` and `mod-flows` with the flow on the line, and
`add-flows`, `replace-flows` and `bundle` with a file that an AT_DATA block, a
here-document or echo commands wrote.  A flow with a shell expansion or an m4
macro in it is unreadable, with its file:line, never guessed."""
from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tooling.atsource import (
    ASSIGNMENT,
    LOOP,
    Command,
    Word,
    commands,
    macro_args,
    quote_spans,
    unquote,
)

# ovs-ofctl's commands that install flows: the flow on the line, or a file of them.
FLOW_COMMANDS = ("add-flow", "mod-flows")
FILE_COMMANDS = ("add-flows", "replace-flows", "bundle")
# ovs-ofctl options whose value may be the next word (ovs-ofctl(8)).
OPTION_ARGS = ("-O", "-F", "-P", "-t", "--protocols", "--flow-format", "--packet-in-format",
               "--timeout", "--unixctl")
# A flows file's line may start with its flow_mod command (ovs-ofctl(8), add-flows);
# the delete ones install nothing.
FILE_KEYWORDS = ("add", "modify", "modify_strict", "delete", "delete_strict")


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
