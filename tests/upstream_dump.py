"""pytest plugin for tests/test_system_titles.py: prints each collected id's
upstream marker (title and file) and its flavour parameter ('' for none),
and collects nothing else."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("upstream")
        if marker:
            params = getattr(item, "callspec", None)
            flavour = params.params.get("flavour", "") if params is not None else ""
            print(f"UPSTREAM\t{marker.kwargs.get('file', 'dpif-netdev.at')}\t{marker.args[0]}\t"
                  f"{item.nodeid}\t{flavour}")
