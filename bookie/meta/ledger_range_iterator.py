"""Walking the ledger tree one leaf at a time (BookKeeper's LedgerRangeIterator), for every layout:
flat, hierarchical (2/4/4 digits below MAX_SHORT_ID, then the long tree), long (3/4/4/4/4 digits), and
the scoped subtrees of 128-bit ledgers (bookie.meta.layout).

Pure over a ``children(path)`` function, so any store that can list a node's children walks the same
way; the ZooKeeper store passes its getChildren (an error raises: a range is never skipped or cut short).
"""
from __future__ import annotations

from typing import Callable, Iterator

from bookie.ledger_id import MAX_ID, LedgerId
from bookie.meta import layout
from bookie.meta.metadata_store import LedgerRange

Children = Callable[[str], list[str]]


class LedgerRangeIterator:
    """The ranges of a scope's ledgers in increasing id order: one ``children`` call per leaf (and one
    per inner node on the way)."""

    def __init__(self, children: Children, root: str, manager: str):
        self.children = children
        self.root = root
        self.manager = manager

    def ranges(self, scope_id: int = 0) -> Iterator[LedgerRange]:
        if scope_id != 0:
            scope = LedgerId(scope_id, 0).qualified_name
            yield from self._scoped_ranges(scope_id, [scope[i: i + 4] for i in range(0, 16, 4)])
            return
        top = sorted(self.children(self.root))
        if self.manager == "flat":
            ids = frozenset(int(n[1:]) for n in top if n.startswith(layout.LEDGER_NODE_PREFIX) and n[1:].isdigit())
            yield LedgerRange(0, 0, MAX_ID, ids)
            return
        if self.manager == "hierarchical":  # ids below MAX_SHORT_ID in the 2/4/4 tree, larger ones in the long one
            yield from self._digit_ranges(top, 2, 1, 0, layout.MAX_SHORT_ID - 1)
            yield from self._digit_ranges(top, 3, 3, layout.MAX_SHORT_ID, MAX_ID)
        else:
            yield from self._digit_ranges(top, 3, 3, 0, MAX_ID)

    def _digit_ranges(self, top: list[str], width: int, inner_levels: int, lowest: int,
                      highest: int) -> Iterator[LedgerRange]:
        """Leaves of a decimal tree whose first level has ``width`` digits and the others four; a leaf
        ``<digits>`` holds the ids ``<digits>0000 .. <digits>9999`` (clipped to ``[lowest, highest]``)."""
        def walk(path: str, digits: str, levels_left: int) -> Iterator[LedgerRange]:
            for child in sorted(c for c in self.children(path) if len(c) == 4 and c.isdigit()):
                if levels_left > 1:
                    yield from walk(f"{path}/{child}", digits + child, levels_left - 1)
                    continue
                leaf = digits + child
                start, end = max(lowest, int(leaf) * 10000), min(highest, int(leaf) * 10000 + 9999)
                if start > end:
                    continue  # a stray node where no id of this tree can be
                names = self.children(f"{path}/{child}")
                yield LedgerRange(0, start, end, frozenset(
                    int(leaf + n[1:]) for n in names if n.startswith(layout.LEDGER_NODE_PREFIX) and n[1:].isdigit()))

        for level1 in (n for n in top if len(n) == width and n.isdigit()):
            yield from walk(f"{self.root}/{level1}", level1, inner_levels)

    def _scoped_ranges(self, scope_id: int, scope_parts: list[str]) -> Iterator[LedgerRange]:
        """Leaves of a scope's subtree ``scoped/<4 scope levels>/<3 id levels>/L<last 4 hex digits>``."""
        def walk(path: str, digits: str, levels_left: int) -> Iterator[LedgerRange]:
            for child in sorted(c for c in self.children(path) if len(c) == 4):
                if levels_left > 1:
                    yield from walk(f"{path}/{child}", digits + child, levels_left - 1)
                    continue
                start = int(digits + child, 16) << 16
                names = self.children(f"{path}/{child}")
                yield LedgerRange(scope_id, start, start + 0xFFFF, frozenset(
                    start + int(n[1:], 16) for n in names if n.startswith(layout.LEDGER_NODE_PREFIX)))

        yield from walk("/".join([self.root, layout.SCOPED, *scope_parts]), "", 3)

    def scopes(self) -> list[int]:
        """The scopes (other than 0) with a subtree: the four 4-hex-digit levels under ``scoped``."""
        found = []

        def walk(path: str, digits: str, level: int) -> None:
            for child in sorted(self.children(path)):
                if level == 3:
                    found.append(int(digits + child, 16))
                else:
                    walk(f"{path}/{child}", digits + child, level + 1)

        walk(f"{self.root}/{layout.SCOPED}", "", 0)
        return found
