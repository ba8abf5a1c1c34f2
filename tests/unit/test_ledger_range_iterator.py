"""LedgerRangeIterator over an in-memory tree built with the layout's own paths: every layout's ranges
come out in id order, each leaf listed once, and together they hold exactly the ledgers put in."""
from __future__ import annotations

import pytest

from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta.ledger_range_iterator import LedgerRangeIterator

ROOT = "/ledgers"


def tree_of(ledgers: list[LedgerId], manager: str) -> dict[str, set[str]]:
    """path -> children, as ZooKeeper would list them, with the nodes the layout puts each ledger at."""
    children: dict[str, set[str]] = {}
    for ledger in ledgers:
        parts = layout.ledger_path(ROOT, manager, ledger)[len(ROOT) + 1:].split("/")
        path = ROOT
        for part in parts:
            children.setdefault(path, set()).add(part)
            path = f"{path}/{part}"
    return children


@pytest.mark.parametrize("manager", ["flat", "hierarchical", "long"])
def test_ranges_list_every_ledger_once_in_id_order(manager):
    ids = [0, 5, 9999, 10000, 12345, 4_294_967_295, layout.MAX_SHORT_ID + 7, 10 ** 17]
    tree = tree_of([LedgerId(0, i) for i in ids], manager)
    calls: list[str] = []

    def children(path: str) -> list[str]:
        calls.append(path)
        return sorted(tree.get(path, ()))

    ranges = list(LedgerRangeIterator(children, ROOT, manager).ranges(0))
    assert [i for r in ranges for i in sorted(r.ledgers)] == sorted(ids)
    assert all(r.start <= i <= r.end for r in ranges for i in r.ledgers)
    assert all(a.end < b.start for a, b in zip(ranges, ranges[1:]))
    assert len(calls) == len(set(calls))  # each node listed once


def test_scoped_subtrees_and_their_scopes():
    scoped = [LedgerId(7, 1), LedgerId(7, 0x1_0005), LedgerId(0xABCDEF, 3)]
    tree = tree_of(scoped + [LedgerId(0, 42)], "hierarchical")
    walker = LedgerRangeIterator(lambda path: sorted(tree.get(path, ())), ROOT, "hierarchical")
    assert walker.scopes() == [7, 0xABCDEF]
    assert [i for r in walker.ranges(7) for i in sorted(r.ledgers)] == [1, 0x1_0005]
    assert [i for r in walker.ranges(0xABCDEF) for i in sorted(r.ledgers)] == [3]
    assert [i for r in walker.ranges(0) for i in sorted(r.ledgers)] == [42]
    assert list(walker.ranges(99)) == []
