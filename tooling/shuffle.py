"""pytest plugin: run the selected ids in a shuffled order (`./ovstest flaky`).

Enabled with `-p tooling.shuffle`; it does nothing unless $OVSTEST_SHUFFLE_SEED
is set.  The order is drawn with random.Random(seed) level by level of the node
ids: the order of the modules, then within each module the order of its
functions and classes, then within each class the order of its ids.  Ids of one
module never interleave with another module's: module-scoped fixtures (and the
rigs shared through fixtures/pool.py) then set up as often as in a plain run.
Every pytest-xdist worker draws the same order from the same seed.

$OVSTEST_SHUFFLE_ORDER names a JSON file that receives {"seed", "order"}, the
node ids in the order drawn (written once, by the controller or worker gw0).
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import TypeVar

import pytest

SEED_ENV = "OVSTEST_SHUFFLE_SEED"
ORDER_ENV = "OVSTEST_SHUFFLE_ORDER"

T = TypeVar("T")


def shuffle_tree(entries: list[tuple[str, T]], rng: random.Random) -> list[tuple[str, T]]:
    """Shuffle (nodeid, payload) pairs level by level of their ids' "::" parts.

    At each level a unit is either one id (its last part) or the group of ids
    that share the next part (a module, a class); the units are shuffled, and
    each group is shuffled inside the same way and kept together."""
    return _shuffle_level([(nodeid.split("::")[:-1], (nodeid, payload))
                           for nodeid, payload in entries], rng)


def _shuffle_level(entries: list[tuple[list[str], tuple[str, T]]],
                   rng: random.Random) -> list[tuple[str, T]]:
    units: list[list[tuple[list[str], tuple[str, T]]]] = []
    groups: dict[str, int] = {}
    for path, entry in entries:
        if not path:  # an id at this level: a unit of its own
            units.append([(path, entry)])
            continue
        if path[0] not in groups:
            groups[path[0]] = len(units)
            units.append([])
        units[groups[path[0]]].append((path[1:], entry))
    rng.shuffle(units)
    out: list[tuple[str, T]] = []
    for unit in units:
        if len(unit) == 1 and not unit[0][0]:
            out.append(unit[0][1])
        else:
            out.extend(_shuffle_level(unit, rng))
    return out


def seed_from_env() -> int | None:
    """The seed $OVSTEST_SHUFFLE_SEED gives, None when unset; a bad value is a usage error."""
    text = os.environ.get(SEED_ENV, "")
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise pytest.UsageError(f"${SEED_ENV}={text!r}: expected an integer") from None


@pytest.hookimpl(trylast=True)  # after -k/-m deselection and --shard: order what is left
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Shuffle the collected ids with $OVSTEST_SHUFFLE_SEED's seed, if set."""
    seed = seed_from_env()
    if seed is None:
        return
    items[:] = [item for _, item in
                shuffle_tree([(item.nodeid, item) for item in items], random.Random(seed))]
    path = os.environ.get(ORDER_ENV, "")
    worker = getattr(config, "workerinput", {}).get("workerid", "")
    if path and worker in ("", "gw0"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps({"seed": seed, "order": [i.nodeid for i in items]}),
                              encoding="utf-8")


def pytest_report_header(config: pytest.Config) -> str | None:
    """The seed the ids were shuffled with, in pytest's header."""
    seed = seed_from_env()
    return None if seed is None else f"ids shuffled by tooling.shuffle, seed {seed}"
