"""BookKeeper 4.17's batch read on the bookie side (BatchedReadEntryProcessor): the entries of one ledger
from ``entryId`` on, while they exist and fit, as the framed-entries body of a v2 BATCH_READ_ENTRY answer.

The rules are BookKeeper's (bookie/client/batched_read.py lists them as probed on a real bookie): the first
entry always comes, or its failure is the answer; then up to ``maxCount`` entries (0: no limit) while the
whole answer frame stays within min(``maxSize``, the bookie's ``maxBatchReadSize``); the answer stops, with
EOK, before the first entry not read.

The entries are read as one range (``Bookie.read_entries_parts``: one index lookup and one read per run of
records), and the storage's framing, ``(size:i32 | entry)*``, is the answer's body as it is: the entries are
checked and cut with numpy (``entry_format.scan_batch``), not one Python read each.
"""
from __future__ import annotations

import numpy as np

from bookie.ledger_id import LedgerId
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import entry_format
from bookie.server.bookie import Bookie

_MIN_FRAME = entry_format.FRAME_LEN + 16  # the least an entry adds to an answer: its frame, its ledger and entry ids


def read_batch(bookie: Bookie, ledger: LedgerId, request: v2.BatchedReadRequest, max_batch_read_size: int) -> bytes:
    """The framed entries answering ``request``; raises what reading its first entry raises."""
    first = request.entry_id
    budget = min(request.max_size, max_batch_read_size)
    room = budget - v2.batched_read_frame_size(0, 0)  # bytes of framed entries that fit
    count = request.max_count if request.max_count > 0 else max(1, room // _MIN_FRAME + 1)
    if first >= 0:
        try:
            parts, got, _ = bookie.read_entries_parts(ledger, first, first + count - 1, max(room, 1))
        except Exception:
            parts, got = [], 0  # read entry by entry below: the first entry's failure is the answer
        if got:
            framed = _consecutive_within(b"".join(parts), ledger, first, count, room)
            if framed:
                return framed
    return _read_one_by_one(bookie, ledger, first, count, room)


def _consecutive_within(blob: bytes, ledger: LedgerId, first: int, count: int, room: int) -> bytes:
    """The prefix of ``blob`` whose entries are ``first, first + 1, ...`` (at most ``count``) and fit in
    ``room`` bytes (the first entry always); empty if ``first`` is not its first entry."""
    ids, offsets, _ = entry_format.scan_batch(blob, ledger, len(blob))
    n = min(len(ids), count)
    wrong = np.flatnonzero(ids[:n] != np.arange(first, first + n))
    if len(wrong):
        n = int(wrong[0])
    if not n:
        return b""
    ends = np.append(offsets[1:n], offsets[n] if n < len(offsets) else len(blob))
    n = max(1, int(np.searchsorted(ends, room, side="right")))
    end = int(ends[n - 1])
    return blob if end == len(blob) else blob[:end]


def _read_one_by_one(bookie: Bookie, ledger: LedgerId, first: int, count: int, room: int) -> bytes:
    """The same answer by single reads, for what the range read could not give (a first entry that is
    absent or unreadable, whose failure is the answer)."""
    frame = entry_format.FRAME.pack
    entry = bookie.read_entry(ledger, first)  # its failure is the answer's
    parts, size = [frame(len(entry)), entry], entry_format.FRAME_LEN + len(entry)
    entry_id = first
    while len(parts) // 2 < count:
        entry_id += 1
        try:
            entry = bookie.read_entry(ledger, entry_id)
        except Exception:
            break  # the batch ends at the first entry not read
        size += entry_format.FRAME_LEN + len(entry)
        if size > room:
            break
        parts += (frame(len(entry)), entry)
    return b"".join(parts)
