"""Appended entries waiting for their acknowledgements (PendingAddOp).

One op is a run of consecutive entries framed together: a lone append, or a piece of a batch no
larger than one add message. It holds what each bookie of the ensemble stores of them and which
bookies have acknowledged; the entries are acknowledged when, for every write set they use, AQ of
its bookies have answered.
"""
from __future__ import annotations

from concurrent.futures import Future


class PendingAddOp:
    """Entries ``entry_id..last_id`` in flight together.

    ``parts[i]`` is what bookie index i stores of them (all of them when E == WQ; with striping, the
    entries whose write set holds i). ``quorums`` are the distinct write sets of those entries.
    ``future`` (None for the inner pieces of a split batch) gets the entry id, or
    ``range(result_first, last_id + 1)`` for a batch. ``length`` is the ledger's length through
    ``last_id``.
    """

    # One op per lone append: slots keep it small and its attributes fast.
    __slots__ = ("entry_id", "last_id", "length", "parts", "future", "write_set", "quorums", "acked", "result_first")

    def __init__(self, entry_id: int, last_id: int, length: int, parts: dict[int, bytes], future: Future | None,
                 quorums: tuple[tuple[int, ...], ...], result_first: int | None = None):
        self.entry_id = entry_id
        self.last_id = last_id
        self.length = length
        self.parts = parts
        self.future = future
        self.write_set = tuple(parts)
        self.quorums = quorums
        self.acked: set[int] = set()
        self.result_first = result_first

    @property
    def count(self) -> int:
        return self.last_id - self.entry_id + 1

    def ack(self, index: int) -> None:
        """Bookie ``index`` has its part durably."""
        self.acked.add(index)

    def awaits(self, index: int) -> bool:
        """Whether bookie ``index`` stores part of these entries and has not acknowledged it."""
        return index in self.write_set and index not in self.acked

    def is_complete(self, ack_quorum: int) -> bool:
        """Whether every write set of these entries has ``ack_quorum`` acknowledgements."""
        acked = self.acked
        return all(sum(1 for i in ws if i in acked) >= ack_quorum for ws in self.quorums)

    def result(self) -> int | range:
        return self.entry_id if self.result_first is None else range(self.result_first, self.last_id + 1)
