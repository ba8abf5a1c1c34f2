"""Packing read slices into Spark partitions by estimated bytes, per serving bookie (pure; no I/O).

A batch or streaming read is planned as slices, one per (ledger, fragment, ensemble member, at most
``maxEntriesPerPartition`` entries); a task per slice is right for big ledgers and ruinous for many
small ones (a Python task costs tens of milliseconds, a small slice's read well under one). So the
slices are packed, as Spark's file sources pack files: each costs its estimated bytes plus an opening
cost (``openCostInBytes``: what one more range read costs, in bytes the reader could have read
meanwhile), and a partition takes slices up to ``maxBytesPerPartition`` of that. Unlike files, a
slice is served by one bookie: a partition holds the slices of one bookie only, so its task reads
them in turn over one connection, and the partitions of different bookies alternate (the first tasks
Spark runs spread over the bookies). Slices split apart on purpose (``apart``: pieces of one fragment,
cut for parallelism or by ``maxEntriesPerPartition``) never share a partition.

Packing is first-fit decreasing per bookie (biggest slice first, into the first partition it fits;
ties in plan order), so it is deterministic: the same plan gives the same partitions.
"""
from __future__ import annotations

from typing import Hashable, NamedTuple, Sequence


class Piece(NamedTuple):
    """What packing needs of a slice: the bookie that serves it, its estimated bytes, and a key that
    pieces which must stay in separate partitions share (None: no such constraint). A tuple: a plan of
    many small ledgers makes tens of thousands."""

    bookie: str
    bytes: int
    apart: Hashable = None


def pack(pieces: Sequence[Piece], max_bytes: int, open_cost: int) -> list[list[int]]:
    """Partitions as lists of indices into ``pieces`` (each index exactly once, in plan order within a
    partition). A partition holds pieces of one bookie whose ``bytes + open_cost`` add up to at most
    ``max_bytes``, unless it holds one piece that is bigger on its own."""
    by_bookie: dict[str, list[int]] = {}
    for i, piece in enumerate(pieces):
        by_bookie.setdefault(piece.bookie, []).append(i)
    per_bookie = [_first_fit_decreasing(pieces, indices, max_bytes, open_cost) for indices in by_bookie.values()]
    # Round robin over the bookies: partition k of each bookie, then k + 1, ...
    out = []
    for k in range(max((len(bins) for bins in per_bookie), default=0)):
        out += [sorted(bins[k]) for bins in per_bookie if k < len(bins)]
    return out


def _first_fit_decreasing(pieces: Sequence[Piece], indices: list[int], max_bytes: int,
                          open_cost: int) -> list[list[int]]:
    bins: list[list[int]] = []
    loads: list[int] = []
    keys: list[set] = []
    open_bins: list[int] = []  # bins that could still take a piece (of 0 bytes)
    for i in sorted(indices, key=lambda i: (-pieces[i].bytes, i)):
        cost, key = pieces[i].bytes + open_cost, pieces[i].apart
        for b in open_bins:
            if loads[b] + cost <= max_bytes and (key is None or key not in keys[b]):
                break
        else:
            b = len(bins)
            bins.append([])
            loads.append(0)
            keys.append(set())
            open_bins.append(b)
        bins[b].append(i)
        loads[b] += cost
        if key is not None:
            keys[b].add(key)
        if loads[b] + open_cost > max_bytes:
            open_bins.remove(b)
    return bins
