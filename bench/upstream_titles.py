"""pytest plugin of bench/upstream_ratio.py --testsuite: for each collected id
that reproduces an upstream test, one line `UPSTREAM-ID <json>` on stdout
with what results.json would say of it (nodeid, upstream titles joined by
'; ', upstream_file, the flavour parameter); used with --collect-only, so the
benchmark learns which ids reproduce which titles without running them.

Only the `upstream` marker is read (a title an id names at run time, through
its user properties, is not known here), as fixtures/records.py reads it."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from harness.upstream import DEFAULT_FILE

if TYPE_CHECKING:  # bench/upstream_ratio.py reads PREFIX on the host, without pytest
    import pytest

PREFIX = "UPSTREAM-ID\t"


def record_of(item: pytest.Item) -> dict[str, object] | None:
    """The id's upstream facts, or None when it reproduces no upstream test."""
    marker = item.get_closest_marker("upstream")
    if marker is None or not marker.args:
        return None
    title = marker.args[0]
    titles = [title] if isinstance(title, str) else [str(t) for t in title]
    module = getattr(item, "module", None)
    file = marker.kwargs.get("file") or getattr(module, "upstream_file", None) or DEFAULT_FILE
    callspec = getattr(item, "callspec", None)
    params = {"flavour": str(callspec.params["flavour"])} \
        if callspec is not None and "flavour" in callspec.params else {}
    return {"nodeid": item.nodeid, "upstream": "; ".join(titles), "upstream_file": str(file),
            "params": params}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Print the line of each reproducing id that is left once -k and -m deselected."""
    for item in session.items:
        record = record_of(item)
        if record is not None:
            print(PREFIX + json.dumps(record, sort_keys=True))
