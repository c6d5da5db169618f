"""The groups of ids `./ovstest coverage --patch` runs, and which to run next.

Stdlib only, no I/O: tooling/gcovrun.py runs them.  A selection's ids are
grouped by module; a group that reached a changed line splits into its
functions (a module of several), else into halves, down to single ids.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Group:
    """Some ids of the selection, run on their own for --patch."""

    label: str
    level: str  # "module", "function", "part", "id"
    nodeids: list[str]
    parent: int | None = None
    reached: list[tuple[str, int]] = field(default_factory=list)
    rc: int | None = None
    seconds: float = 0.0


def part_label(ids: list[str]) -> str:
    """A name for some ids of one function or module: its first and last id."""
    if len(ids) == 1:
        return ids[0]
    functions = {n.split("[", 1)[0] for n in ids}
    if len(functions) == 1 and all("[" in n for n in ids):
        first, last = (n.split("[", 1)[1].rstrip("]") for n in (ids[0], ids[-1]))
        return f"{functions.pop()}[{first} .. {last}] ({len(ids)} ids)"
    module = ids[0].split("::", 1)[0]
    first, last = (n.split("::", 1)[-1] for n in (ids[0], ids[-1]))
    return f"{module}::{first} .. {last} ({len(ids)} ids)"


def split(group: Group, index: int | None) -> list[Group]:
    """The next finer groups: a module's functions, then halves, then single ids."""
    ids = group.nodeids
    if len(ids) <= 1:
        return []
    if group.level == "module":
        functions: dict[str, list[str]] = {}
        for nodeid in ids:
            functions.setdefault(nodeid.split("[", 1)[0], []).append(nodeid)
        if len(functions) > 1:
            return [Group(name, "function", members, index)
                    for name, members in functions.items()]
    half = (len(ids) + 1) // 2
    return [Group(part_label(part), "id" if len(part) == 1 else "part", part, index)
            for part in (ids[:half], ids[half:])]


def next_group(queue: list[Group], groups: list[Group], targets: set[tuple[str, int]],
               pinned: set[tuple[str, int]]) -> Group:
    """Take the group to run next.  First, while a reached line has no single id
    yet, the smallest group whose parent reached such a line (a line gets an
    exact id after about log2(ids) runs); then the largest of the rest (more
    ids for lines that already have one)."""
    unpinned = targets - pinned

    def score(g: Group) -> tuple[int, int]:
        parent = set(groups[g.parent].reached) if g.parent is not None else targets
        if parent & unpinned:
            return (0, len(g.nodeids))
        return (1, -len(g.nodeids))

    best = min(range(len(queue)), key=lambda i: score(queue[i]))
    return queue.pop(best)


def modules(nodeids: list[str]) -> list[Group]:
    """The node ids grouped by module, in the order first seen."""
    found: dict[str, list[str]] = {}
    for nodeid in nodeids:
        found.setdefault(nodeid.split("::", 1)[0], []).append(nodeid)
    return [Group(name, "module", ids) for name, ids in found.items()]


def finest(groups: list[dict[str, Any]], key: tuple[str, int]) -> list[int]:
    """Indexes of the groups that reached `key` while none of their own run
    children did: the narrowest evidence of which ids reach the line."""
    hit = {i for i, g in enumerate(groups) if key in {(p, n) for p, n in g["reached"]}}
    children: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        if g.get("parent") is not None:
            children.setdefault(int(g["parent"]), []).append(i)
    return sorted(i for i in hit if not any(c in hit for c in children.get(i, [])))
