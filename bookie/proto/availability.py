"""AvailabilityOfEntriesOfLedger: a compact list of the entry ids a bookie stores (BookKeeper's AvailabilityOfEntriesOfLedger).

Layout: a 64-byte header (``int version=0 | int numSequenceGroups | zeros``), then 24 bytes per
sequence group: ``long firstSequenceStart | long lastSequenceStart | int sequenceSize | int
sequencePeriod``. A group is runs of ``sequenceSize`` consecutive ids that start every
``sequencePeriod`` ids, from ``firstSequenceStart`` to ``lastSequenceStart``. Striping makes these
regular: a bookie of an E=3, WQ=2 ensemble stores 2 of every 3 ids.
"""
from __future__ import annotations

import struct

import numpy as np

HEADER = struct.Struct(">ii")
HEADER_SIZE = 64
GROUP = struct.Struct(">qqii")
VERSION = 0
MAX_LEDGERS_PER_LIST_REQUEST = 4096  # GetListOfEntriesOfLedgers: ledgers asked in one request


def encode(entry_ids) -> bytes:
    ids = np.unique(np.asarray(entry_ids, dtype=np.int64))
    groups: list[list[int]] = []  # [first start, last start, size, period]
    if len(ids):
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1
        starts = ids[np.concatenate(([0], breaks))].tolist()
        sizes = np.diff(np.concatenate(([0], breaks, [len(ids)]))).tolist()
        for start, size in zip(starts, sizes):
            g = groups[-1] if groups else None
            if g and g[2] == size and (g[0] == g[1] or start - g[1] == g[3]):
                g[3] = start - g[0] if g[0] == g[1] else g[3]
                g[1] = start
            else:
                groups.append([start, start, size, 0])
    out = [HEADER.pack(VERSION, len(groups)).ljust(HEADER_SIZE, b"\0")]
    out += [GROUP.pack(first, last, size, period or size) for first, last, size, period in groups]
    return b"".join(out)


def decode(data: bytes) -> list[int]:
    version, count = HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise ValueError(f"AvailabilityOfEntriesOfLedger version {version} is not supported")
    ids: list[int] = []
    for i in range(count):
        first, last, size, period = GROUP.unpack_from(data, HEADER_SIZE + i * GROUP.size)
        # A group of one run has sequencePeriod 0 in BookKeeper's own encoding (first == last): step 1 yields it once.
        for start in range(first, last + 1, period or 1):
            ids.extend(range(start, start + size))
    return ids


GROUPS = np.dtype([("first", ">i8"), ("last", ">i8"), ("size", ">i4"), ("period", ">i4")])


def _groups(data: bytes) -> np.ndarray:
    version, count = HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise ValueError(f"AvailabilityOfEntriesOfLedger version {version} is not supported")
    return np.frombuffer(data, dtype=GROUPS, count=count, offset=HEADER_SIZE)


def count(data: bytes) -> int:
    """How many entry ids the encoding lists, without listing them."""
    g = _groups(data)
    period = np.maximum(g["period"].astype(np.int64), 1)
    runs = (g["last"] - g["first"]) // period + 1
    return int((runs * g["size"]).sum())


def ids_array(data: bytes) -> np.ndarray:
    """The entry ids as a sorted int64 array (``decode`` without a Python int per id)."""
    parts = [np.empty(0, dtype=np.int64)]
    for first, last, size, period in _groups(data).tolist():
        starts = np.arange(first, last + 1, period or 1, dtype=np.int64)
        parts.append((starts[:, None] + np.arange(size, dtype=np.int64)).ravel())
    return np.concatenate(parts)
