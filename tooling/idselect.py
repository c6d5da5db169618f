"""pytest plugin: run only listed node ids, or write down the ids collected
(`./ovstest coverage --patch` runs a selection's ids group by group).

Enabled with `-p tooling.idselect`; it does nothing unless one of these is set:
- $OVSTEST_IDS names a file of node ids, one a line: every other collected id is
  deselected (the user's own paths, -k and -m still apply first);
- $OVSTEST_IDS_OUT names a file that receives the ids that remain selected,
  one a line (written by the controller, or by worker gw0 under pytest-xdist).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tooling.gcovrun import IDS_ENV, IDS_OUT_ENV


def keep_listed(nodeids: list[str], listed: set[str]) -> tuple[list[int], list[int]]:
    """(indexes kept, indexes deselected) of `nodeids` against the listed ids."""
    kept = [i for i, n in enumerate(nodeids) if n in listed]
    dropped = [i for i, n in enumerate(nodeids) if n not in listed]
    return kept, dropped


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ids not in $OVSTEST_IDS's file, or write the collected ids down."""
    path = os.environ.get(IDS_ENV)
    if path:
        listed = {ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()}
        kept, dropped = keep_listed([i.nodeid for i in items], listed)
        if dropped:
            config.hook.pytest_deselected(items=[items[i] for i in dropped])
        items[:] = [items[i] for i in kept]
    out = os.environ.get(IDS_OUT_ENV)
    if out and os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":
        Path(out).write_text("".join(f"{i.nodeid}\n" for i in items))
