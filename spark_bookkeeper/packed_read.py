"""A packed partition's whole share of its bookie in one call (the ReadEntriesOfLedgers RPC).

A partition packs the slices one bookie serves (spark_bookkeeper/partition_packing.py); read slice by slice,
many small ledgers cost a call each, far more than their entries. Here the task first asks the bookie for
every slice at once, checks each ledger's entries (ledger id and digest, ``DigestManager.verify_columns``)
and hands each slice what came for it. The reader then reads, as for any slice, only what is still missing,
from the other bookies of its write set, then entry by entry: a slice the bookie answered is not asked of it
again. A bookie without the call (BookKeeper's native protocol) or one that fails it just leaves every slice
to be read on its own.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import entry_format, status
from bookie.proto.checksum import DigestManager

log = logging.getLogger(__name__)


@dataclass
class Prefetched:
    """What the bookie sent for one slice: its verified entries' ids and their rows (None: nothing)."""
    ids: np.ndarray
    batch: pa.RecordBatch | None


def slice_request(p) -> pb.ReadRangeRequest:
    """The range a slice (FragmentMemberPartition) reads from its member, as ReadEntries would ask for it."""
    E = len(p.ensemble)
    stride = E if p.striped and E > 1 else 0
    ledger = p.slice.ledger
    return pb.ReadRangeRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id, firstEntryId=p.first,
                               lastEntryId=p.last, stride=stride, offset=p.member if stride else 0)


def _by_ledger(blob: bytes, into: dict[LedgerId, list]) -> None:
    """Append each framed entry of ``blob`` (frame included) to its ledger's list."""
    view, offset, end = memoryview(blob), 0, len(blob)
    while offset < end:
        (size,) = entry_format.FRAME.unpack_from(view, offset)
        if size < 0 or offset + entry_format.FRAME_LEN + size > end:
            raise ValueError(f"bad frame at byte {offset} of {end}: size {size}")
        scope, ledger_id, _, _ = entry_format.peek_ids(view, offset + entry_format.FRAME_LEN)
        into.setdefault(LedgerId(scope, ledger_id), []).append(view[offset: offset + entry_format.FRAME_LEN + size])
        offset += entry_format.FRAME_LEN + size


def read_share(slices, clients, password: bytes, batch) -> tuple[dict[int, Prefetched], int]:
    """Ask the partition's bookie for every slice in one call: (slice index -> what came for it, how many
    slices, from the first, it answered completely). ``batch(slice, ids, offsets, data)`` makes the rows."""
    first = slices[0]
    bookie = first.ensemble[first.member]
    client = clients.bookie_client(bookie)
    if not isinstance(client, BookieClient):
        return {}, 0
    entries: dict[LedgerId, list] = {}
    covered = 0
    try:
        for message in client.read_entries_of_ledgers([slice_request(p) for p in slices],
                                                      clients.conf.readBatchBytes):
            if message.status != status.EOK:
                log.warning("read of %d slices from %s: %s %s; reading them one by one", len(slices), bookie,
                            status.name_of(message.status), message.message)
                break
            _by_ledger(message.entries, entries)
            covered = message.rangesCovered
    except Exception as exc:  # a bookie that cannot serve: each slice is read on its own, from the others
        log.warning("read of %d slices from %s failed (%s); reading them one by one", len(slices), bookie, exc)
    rows: dict[LedgerId, tuple[np.ndarray, pa.RecordBatch]] = {}
    by_ledger = {p.slice.ledger: p for p in slices}
    for ledger, frames in entries.items():
        p = by_ledger.get(ledger)
        if p is None:
            continue  # not asked for: nothing of the read
        md = p.slice.metadata
        ids, offsets, data, bad = DigestManager(ledger, password, md.digest_type).verify_columns(b"".join(frames))
        if bad:
            log.warning("ledger %s entries %s from %s failed their digest check; trying other replicas", ledger,
                        bad[:10], bookie)
        if len(ids):
            rows[ledger] = (ids, batch(p.slice, ids, offsets, data))
    out = {}
    for i, p in enumerate(slices):
        found = rows.get(p.slice.ledger)
        if found is None:
            out[i] = Prefetched(np.zeros(0, dtype=np.int64), None)
            continue
        ids, rows_of_ledger = found
        mine = (ids >= p.first) & (ids <= p.last)
        if p.striped and len(p.ensemble) > 1:
            mine &= ids % len(p.ensemble) == p.member
        if mine.all():
            out[i] = Prefetched(ids, rows_of_ledger)
        else:
            out[i] = Prefetched(ids[mine], rows_of_ledger.filter(pa.array(mine)) if mine.any() else None)
    return out, covered
