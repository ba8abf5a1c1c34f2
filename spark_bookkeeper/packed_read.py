"""A packed partition's whole share of its bookie in one call (the ReadEntriesOfLedgers RPC).

A partition packs the slices one bookie serves (spark_bookkeeper/partition_packing.py); read slice by slice,
many small ledgers cost a call each, far more than their entries. Here the task first asks the bookie for
every slice at once and checks what comes as columns, a message at a time, whatever ledgers it holds: each
entry must be one a slice asked for (its ledger, its range, its stride) and pass its digest
(``DigestManager.digests_ok``); an entry sent twice counts once. A slice that got every entry it asked for is
done: its rows go to Spark in the message's batch, with no work per slice. Any other slice keeps what came
for it (``Prefetched``) and the reader reads, as for any slice, only what is still missing, from the other
bookies of its write set, then entry by entry; a slice the bookie answered (``rangesCovered``) is not asked
of it again. A bookie without the call (BookKeeper's native protocol) or one that fails it leaves every
slice to be read on its own.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa

from bookie.client.bookie_client import BookieClient
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import entry_format, status
from bookie.proto.checksum import MAC_LENGTH, DigestManager

log = logging.getLogger(__name__)


# rows(ledger ids, entry ids, payload offsets (n+1), payload bytes, owning slice of each row) -> a batch
Rows = Callable[[np.ndarray, np.ndarray, np.ndarray, bytes, np.ndarray], pa.RecordBatch]


@dataclass
class Prefetched:
    """What the bookie sent for one slice: its verified entries' ids and their rows (None: nothing)."""
    ids: np.ndarray
    batch: pa.RecordBatch | None


@dataclass
class ShareRead:
    """The answer to a partition's one call: ``batches`` hold every row of the ``complete`` slices (indices
    into the partition's slices); ``partial`` what came for the others; ``covered``: how many slices, from
    the first, the bookie answered completely (rangesCovered: what it has of them, it sent)."""
    batches: list[pa.RecordBatch] = field(default_factory=list)
    complete: set[int] = field(default_factory=set)
    partial: dict[int, Prefetched] = field(default_factory=dict)
    covered: int = 0


def slice_request(p) -> pb.ReadRangeRequest:
    """The range a slice (FragmentMemberPartition) reads from its member, as ReadEntries would ask for it."""
    ledger = p.ledger
    return pb.ReadRangeRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id, firstEntryId=p.first,
                               lastEntryId=p.last, stride=p.stride, offset=p.member if p.stride else 0)


class _Asked:
    """The ranges of a partition's slices, to tell which slice each entry of an answer belongs to."""

    def __init__(self, slices):
        self.by_ledger: dict[tuple[int, int], list[tuple[int, int, int, int, int]]] = {}
        for i, p in enumerate(slices):
            self.by_ledger.setdefault(tuple(p.ledger), []).append((i, p.first, p.last, p.stride, p.member))
        self.expected = np.array([slice_entries(p) for p in slices], dtype=np.int64)

    def owners(self, scopes: np.ndarray, lids: np.ndarray, eids: np.ndarray) -> np.ndarray:
        """The slice each entry was asked for (-1: none asked for it)."""
        owner = np.full(len(eids), -1, dtype=np.int64)
        for k, (scope, lid, eid) in enumerate(zip(scopes.tolist(), lids.tolist(), eids.tolist())):
            for i, first, last, stride, member in self.by_ledger.get((scope, lid), ()):
                if first <= eid <= last and (not stride or eid % stride == member):
                    owner[k] = i
                    break
        return owner


def slice_entries(p) -> int:
    """How many entries a slice (FragmentMemberPartition) reads from its bookie."""
    return entries_in(p.first, p.last, p.member, p.stride)


def entries_in(first: int, last: int, member: int, stride: int) -> int:
    """How many of ``first..last`` a slice reads: all (``stride`` 0), or those ``e % stride == member``."""
    if not stride:
        return last - first + 1
    return (last - member) // stride - (first - 1 - member) // stride


@dataclass
class _Message:
    """One answer message's entries that passed: their slice, ledger and entry ids, and payloads as columns."""
    owner: np.ndarray
    lids: np.ndarray
    eids: np.ndarray
    offsets: np.ndarray
    data: bytes


def _checked(blob: bytes, slices, asked: _Asked, password: bytes, max_entry_size: int, bookie: str) -> _Message | None:
    """The entries of one message that a slice asked for and whose digest matches (None: nothing usable)."""
    try:
        scopes, lids, eids, frames = entry_format.scan_ledgers(blob, max_entry_size)
    except ValueError as exc:
        log.warning("answer from %s cannot be read (%s); its slices are read one by one", bookie, exc)
        return None
    ends = np.append(frames[1:], len(blob))
    owner = asked.owners(scopes, lids, eids)
    good = owner >= 0
    payload_at = np.zeros(len(frames), dtype=np.int64)
    # Slices of one digest type and entry layout are checked in one go (a mixed message: a group each).
    kinds = {}
    for i in np.unique(owner[good]).tolist():
        kinds.setdefault((slices[i].ledger.scope_id != 0, slices[i].digest_type), []).append(i)
    for (_, digest_type), members in kinds.items():
        manager = DigestManager(slices[members[0]].ledger, password, digest_type)
        at = frames + entry_format.FRAME_LEN + manager.header_len + MAC_LENGTH[digest_type]
        ours = np.isin(owner, members)
        good[ours & (at > ends)] = False  # too short to hold its digest: bad, and not read past its end
        mine = ours & (at <= ends)
        ok = manager.digests_ok(blob, frames[mine], ends[mine])
        good[np.flatnonzero(mine)[~ok]] = False
        payload_at[mine] = at[mine]
    failed = (owner >= 0) & ~good
    if failed.any():
        log.warning("%d entries from %s failed their digest check (first: ledger %d entry %d); trying other "
                    "replicas", int(failed.sum()), bookie, int(lids[failed][0]), int(eids[failed][0]))
    keep = np.flatnonzero(good)
    starts, stops = payload_at[keep], ends[keep]
    offsets = np.zeros(len(keep) + 1, dtype=np.int32)
    np.cumsum(stops - starts, out=offsets[1:])
    view = memoryview(blob)
    data = b"".join(view[a:b] for a, b in zip(starts.tolist(), stops.tolist()))
    return _Message(owner[keep], lids[keep], eids[keep], offsets, data)


def _first_copies(messages: list[_Message]) -> list[np.ndarray]:
    """Per message, which of its entries to keep: an entry (slice, entry id) sent twice is kept once."""
    if not messages:
        return []
    owner = np.concatenate([m.owner for m in messages])
    eids = np.concatenate([m.eids for m in messages])
    order = np.lexsort((eids, owner))  # stable: the first copy leads each run of equal keys
    repeat = np.zeros(len(owner), dtype=bool)
    repeat[order[1:]] = (owner[order[1:]] == owner[order[:-1]]) & (eids[order[1:]] == eids[order[:-1]])
    bounds = np.cumsum([0] + [len(m.owner) for m in messages])
    return [~repeat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _rows(m: _Message, keep: np.ndarray, rows: Rows) -> pa.RecordBatch:
    if keep.all():
        return rows(m.lids, m.eids, m.offsets, m.data, m.owner)
    return rows(m.lids, m.eids, m.offsets, m.data, m.owner).filter(pa.array(keep))


def read_share(slices, clients, password: bytes, rows: Rows, max_entry_size: int = 1 << 30) -> ShareRead:
    """Ask the partition's bookie for every slice in one call and sort out what came (``ShareRead``)."""
    bookie = slices[0].bookie
    client = clients.bookie_client(bookie)
    if not isinstance(client, BookieClient):
        return ShareRead()
    blobs, covered = [], 0
    try:
        for message in client.read_entries_of_ledgers([slice_request(p) for p in slices],
                                                      clients.conf.readBatchBytes):
            if message.status != status.EOK:
                log.warning("read of %d slices from %s: %s %s; reading them one by one", len(slices), bookie,
                            status.name_of(message.status), message.message)
                break
            blobs.append(message.entries)
            covered = message.rangesCovered
    except Exception as exc:  # a bookie that cannot serve: each slice is read on its own, from the others
        log.warning("read of %d slices from %s failed (%s); reading them one by one", len(slices), bookie, exc)
    share = sort_share(slices, blobs, password, rows, max_entry_size, bookie)
    share.covered = covered
    return share


def sort_share(slices, blobs: list[bytes], password: bytes, rows: Rows, max_entry_size: int = 1 << 30,
               bookie: str = "the bookie") -> ShareRead:
    """What the answer messages ``blobs`` hold for each slice: the complete slices' rows, the others' parts."""
    share = ShareRead()
    asked = _Asked(slices)
    messages = [m for m in (_checked(blob, slices, asked, password, max_entry_size, bookie) for blob in blobs)
                if m is not None and len(m.owner)]
    firsts = _first_copies(messages)
    counts = np.zeros(len(slices), dtype=np.int64)
    for m, keep in zip(messages, firsts):
        counts += np.bincount(m.owner[keep], minlength=len(slices))
    done = counts == asked.expected
    share.complete = set(np.flatnonzero(done).tolist())
    partial: dict[int, list[tuple[np.ndarray, pa.RecordBatch]]] = {}
    for m, keep in zip(messages, firsts):
        whole = keep & done[m.owner]
        if whole.any():
            share.batches.append(_rows(m, whole, rows))
        rest = keep & ~done[m.owner]
        if rest.any():  # rare: a slice the bookie could not serve whole; its rows apart
            batch, owners, eids = _rows(m, rest, rows), m.owner[rest], m.eids[rest]
            for i in np.unique(owners).tolist():
                mine = owners == i
                partial.setdefault(i, []).append((eids[mine], batch.filter(pa.array(mine))))
    for i, parts in partial.items():
        share.partial[i] = Prefetched(np.concatenate([ids for ids, _ in parts]),
                                      pa.concat_batches([batch for _, batch in parts]))
    return share
