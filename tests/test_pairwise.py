"""Pairwise coverage, and the tx product's use of it."""
from __future__ import annotations

import itertools

from fixtures.pairwise import cover, uncovered


def test_cover_meets_every_pair_of_a_small_matrix() -> None:
    base = [{"a": a, "b": b} for a, b in itertools.product("xyz", "pqrs")]
    axes = {"c": (1, 2), "d": ("u", "v")}
    rows = cover(base, axes)
    assert len(rows) == len(base) and [{k: r[k] for k in "ab"} for r in rows] == base
    assert uncovered(rows, {"a": "xyz", "b": "pqrs", **axes}) == set()
    assert cover(base, axes) == rows  # deterministic


def test_cover_reports_what_the_base_rows_cannot_hold() -> None:
    rows = cover([{"a": 1}], {"b": (1, 2)})
    assert uncovered(rows, {"a": (1,), "b": (1, 2)}) == {(("a", 1), ("b", 2))}


def test_tx_product_is_complete_and_pairwise() -> None:
    from cases.matrices.test_tx_product import AXES, BASE, ROWS, TOPOLOGIES, tx_sets
    sets = tx_sets()
    assert len({t.id for t in sets}) == 81
    assert {(r["topology"], r["tx"]) for r in ROWS} == {(t, s.id) for t in TOPOLOGIES for s in sets}
    axes = {"topology": TOPOLOGIES, "tx": [s.id for s in sets], "l4": ("tcp", "udp", "other"),
            **AXES}
    impossible = {(("l4", l4), ("topology", t)) for t in TOPOLOGIES if t.endswith("-tso")
                  for l4 in ("udp", "other")}
    assert uncovered(ROWS, axes) == impossible
    assert len(ROWS) == len(BASE)
