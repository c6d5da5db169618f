"""An Autotest .at file read as text, never run: m4's quoting undone the way
autom4te does it for a macro's argument (one level of [ ] quotes, dnl, the
quadrigraphs), the macros tests/*.at define, and the shell's words and
commands of a test's body (tooling/atflows.py finds the flows in them)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

QUADRIGRAPHS = {"@<:@": "[", "@:>@": "]", "@S|@": "$", "@%:@": "#", "@&t@": "", "@{:@": "(",
                "@:}@": ")"}


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
