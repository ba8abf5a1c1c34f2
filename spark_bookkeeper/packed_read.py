"""A packed partition's whole share of its bookie in one call (the ReadEntriesOfLedgers RPC).

A partition packs the slices one bookie serves (spark_bookkeeper/partition_packing.py); read slice by slice,
many small ledgers cost a call each, far more than their entries. Here the task first asks the bookie for
every slice at once (the slices as columns, ``SliceColumns``, sent as the request's range columns) and checks
what comes as columns, a message at a time, whatever ledgers it holds: each
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
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from bookie.client.bookie_client import BookieClient
from bookie.proto import entry_format, status
from bookie.proto.checksum import MAC_LENGTH, DigestManager, DigestType
from bookie.proto.range_columns import RangeColumns
from spark_bookkeeper.read_partitions import SliceColumns

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


def share_ranges(share: SliceColumns) -> RangeColumns:
    """The ranges the slices read from their bookie, as ReadEntries would ask for each."""
    return RangeColumns(share.scopes, share.ledgers, share.firsts, share.lasts, share.strides,
                        np.where(share.strides > 0, share.members, 0))


def expected_entries(share: SliceColumns) -> np.ndarray:
    """How many entries each slice reads from its bookie (``entries_in`` of every row)."""
    stride = np.maximum(share.strides, 1)
    strided = (share.lasts - share.members) // stride - (share.firsts - 1 - share.members) // stride
    return np.where(share.strides > 0, strided, share.lasts - share.firsts + 1)


class _Asked:
    """The ranges of a partition's slices, to tell which slice each entry of an answer belongs to."""

    def __init__(self, share: SliceColumns):
        self.share = share
        self.order = np.lexsort((share.firsts, share.ledgers))  # by ledger id, then first entry (stable)
        self.sorted_ledgers = share.ledgers[self.order]
        self.expected = expected_entries(share)

    def owners(self, scopes: np.ndarray, lids: np.ndarray, eids: np.ndarray) -> np.ndarray:
        """The slice each entry was asked for (-1: none asked for it). A ledger has one slice here, unless the
        bookie serves several of its fragments: those entries are matched one by one."""
        lo = np.searchsorted(self.sorted_ledgers, lids, "left")
        hi = np.searchsorted(self.sorted_ledgers, lids, "right")
        owner = np.full(len(eids), -1, dtype=np.int64)
        one = np.flatnonzero(hi - lo == 1)
        candidate = self.order[lo[one]]
        held = self._holds(candidate, scopes[one], eids[one])
        owner[one[held]] = candidate[held]
        for k in np.flatnonzero(hi - lo > 1).tolist():
            candidates = self.order[lo[k]:hi[k]]
            hits = candidates[self._holds(candidates, scopes[k], eids[k])]
            if len(hits):
                owner[k] = hits[0]
        return owner

    def _holds(self, slices: np.ndarray, scopes, eids) -> np.ndarray:
        """Whether each of ``slices`` asked for entry ``eids`` of its ledger in scope ``scopes``."""
        s = self.share
        stride = s.strides[slices]
        return ((s.scopes[slices] == scopes) & (s.firsts[slices] <= eids) & (eids <= s.lasts[slices])
                & ((stride == 0) | (eids % np.maximum(stride, 1) == s.members[slices])))


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


def _checked(blob: bytes, share: SliceColumns, asked: _Asked, password: bytes, max_entry_size: int,
             bookie: str) -> _Message | None:
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
    # Entries of one digest type and entry layout (v2 records: a scope) are checked in one go.
    kind = np.where(good, share.digests[owner] * 2 + (share.scopes[owner] != 0), -1)
    for group in np.unique(kind[good]).tolist():
        ours = kind == group
        digest_type = DigestType(group // 2)
        manager = DigestManager(share.ledger(int(owner[np.argmax(ours)])), password, digest_type)
        at = frames + entry_format.FRAME_LEN + manager.header_len + MAC_LENGTH[digest_type]
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


def read_share(share: SliceColumns, bookie: str, clients, password: bytes, rows: Rows,
               max_entry_size: int = 1 << 30) -> ShareRead:
    """Ask ``bookie`` for every slice of ``share`` in one call and sort out what came (``ShareRead``). Each
    message is checked as it comes, while the bookie reads the next one."""
    client = clients.bookie_client(bookie)
    if not isinstance(client, BookieClient):
        return ShareRead()
    covered = [0]

    def blobs() -> Iterator[bytes]:
        try:
            for message in client.read_entries_of_ledgers(share_ranges(share), clients.conf.readBatchBytes):
                if message.status != status.EOK:
                    log.warning("read of %d slices from %s: %s %s; reading them one by one", len(share), bookie,
                                status.name_of(message.status), message.message)
                    return
                covered[0] = message.rangesCovered
                yield message.entries
        except Exception as exc:  # a bookie that cannot serve: each slice is read on its own, from the others
            log.warning("read of %d slices from %s failed (%s); reading them one by one", len(share), bookie, exc)
    result = sort_share(share, blobs(), password, rows, max_entry_size, bookie)
    result.covered = covered[0]
    return result


def sort_share(share: SliceColumns, blobs: Iterable[bytes], password: bytes, rows: Rows, max_entry_size: int = 1 << 30,
               bookie: str = "the bookie") -> ShareRead:
    """What the answer messages ``blobs`` hold for each slice: the complete slices' rows, the others' parts.
    Each message is checked as ``blobs`` gives it."""
    result = ShareRead()
    asked = _Asked(share)
    messages = [m for m in (_checked(blob, share, asked, password, max_entry_size, bookie) for blob in blobs)
                if m is not None and len(m.owner)]
    firsts = _first_copies(messages)
    counts = np.zeros(len(share), dtype=np.int64)
    for m, keep in zip(messages, firsts):
        counts += np.bincount(m.owner[keep], minlength=len(share))
    done = counts == asked.expected
    result.complete = set(np.flatnonzero(done).tolist())
    partial: dict[int, list[tuple[np.ndarray, pa.RecordBatch]]] = {}
    for m, keep in zip(messages, firsts):
        whole = keep & done[m.owner]
        if whole.any():
            result.batches.append(_rows(m, whole, rows))
        rest = keep & ~done[m.owner]
        if rest.any():  # rare: a slice the bookie could not serve whole; its rows apart
            batch, owners, eids = _rows(m, rest, rows), m.owner[rest], m.eids[rest]
            for i in np.unique(owners).tolist():
                mine = owners == i
                partial.setdefault(i, []).append((eids[mine], batch.filter(pa.array(mine))))
    for i, parts in partial.items():
        result.partial[i] = Prefetched(np.concatenate([ids for ids, _ in parts]),
                                       pa.concat_batches([batch for _, batch in parts]))
    return result
