"""Batch reads: slices per (ledger, fragment, ensemble member), packed by bytes into Spark partitions,
read straight from bookies.

Planning (driver, from metadata): every ledger of the log / list / scope, each ledger's metadata read
once with many reads in flight (``checked_metadata``); a closed ledger needs nothing more (its last entry
is in its metadata), an open one is read up to its LAC (asked of its bookies, never fenced) unless
``recover=true`` closes it first. Each
fragment ``[first, last]`` of a ledger is shared among the bookies of its ensemble, so all of them
serve at once. Where every bookie holds every entry (WQ == E, e.g. Pulsar's default E=WQ=2) each
gets contiguous pieces, which a bookie reads sequentially and BookKeeper's native protocol serves by
batch reads (``bookie/client/batched_read.py``); otherwise (striped, WQ < E) bookie i reads the
entries it is first in the write set for (``e % E == i``). No slice holds more than
``maxEntriesPerPartition`` entries of a fragment.

A read of a log reads the segments its positions select (``startingOffsets``/``endingOffsets`` or
``startingTimestamp``/``endingTimestamp``, as Kafka's batch source: spark_bookkeeper/log_offsets.py
``batch_range``), resolved when the plan is made; ``load()`` checks every segment's ledger (a stream reads
the same schema and is placed later). A read of nothing has no partition of ours: Spark's one empty
partition reads no rows.

Those slices are then packed (spark_bookkeeper/partition_packing.py) into partitions of about
``maxBytesPerPartition`` estimated bytes, each slice counting ``openCostInBytes`` more, a partition
holding the slices of one bookie only: many small ledgers are read by few tasks, each reading its
bookie's slices in turn over one connection. A slice's bytes are estimated from its ledger's metadata
(a closed ledger's length per entry; an open one's from the closed ledgers of the read, else
DEFAULT_ENTRY_BYTES per entry).

A striped read would start 0, E, 2E, ... (the first partition is one bookie's, serving every E-th entry), so
the read's first entries (at most HEAD_ENTRIES of its first HEAD_LEDGERS ledgers, HEAD_BYTES) are cut from
the slices as its *head* (``split_head``), which the first partition reads first from every bookie that holds
them and hands over sorted by entry id: ``show()`` and ``take(n)`` list the first entries in order. Nothing
else is sorted: the other partitions, and the rest of the first, come as their bookies serve them.

The driver also reads each bookie's registration (BookieTransports) and hands it to the partition, so
the executor, which has no ZooKeeper, reaches every bookie as the driver would: by gRPC where the
bookie registered it (a range read), by BookKeeper's native protocol otherwise (a stock bookie).

Reading (executor), one set of connections per partition. A partition of several slices first asks its
bookie for all of them in one call (spark_bookkeeper/packed_read.py, the ReadEntriesOfLedgers RPC), so
many small ledgers cost one request, not one each; then, slice by slice in plan order, what is still
missing is read as for a slice alone (not from that bookie again if it answered the call): a range read
of the slice's entries (contiguous, or with that stride) from the member bookie; every entry's ledger id
and digest are checked into column buffers (``DigestManager.verify_columns``). Entries missing or bad there are range-read the same way from the
next bookie of their write set (they all share it: striped, by the stride; WQ == E, every bookie
holds them), then the next; what no replica sends is read entry by entry, which tells "no such entry"
from a failure. Out come ``pyarrow.RecordBatch``es built from those buffers, joined into batches of at
least COALESCE_ROWS rows (a batch costs Spark far more than a row).

The plan, ``load()``'s check and a partition's packed read run with CPython's cyclic collector paused
(bookie/util/gc_pause.py), as does making a packed partition's slice objects (read_partitions.py):
metadata, slices and entries by the ten thousand, none of them garbage.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from bookie.client.distribution_schedule import write_set
from bookie.client.ledger_reader import LedgerReader
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BookieServiceInfo
from bookie.meta.ledger_metadata import LedgerAccess, LedgerMetadata
from bookie.meta.metadata_store import Versioned
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from bookie.util.gc_pause import gc_paused
from spark_bookkeeper import connections
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions
from spark_bookkeeper.packed_read import Prefetched, ShareRead, entries_in, read_share
from spark_bookkeeper.partition_packing import Piece, pack
from spark_bookkeeper.read_partitions import (ROW, FragmentMemberPartition, Head, PackedPartition, SliceKinds,
                                             fragment_member_partition, stride_of)

log = logging.getLogger(__name__)


@dataclass
class LedgerSlice:
    """What the plan reads of one ledger (driver side: the metadata stays there)."""
    ledger: LedgerId
    metadata: LedgerMetadata
    first: int
    last: int
    log: str | None
    segment: int | None


class BookieTransports:
    """What each bookie offers (its registration's BookieServiceInfo, None if it is not registered),
    read on the driver once per planning and handed to the partitions that read from it. One dict per
    ensemble, shared by its partitions."""

    def __init__(self, bk):
        self.store = bk.store
        self._infos: dict[str, BookieServiceInfo | None] = {}
        self._of: dict[tuple[str, ...], dict[str, BookieServiceInfo | None]] = {}

    def of(self, ensemble) -> dict[str, BookieServiceInfo | None]:
        ensemble = tuple(ensemble)
        if ensemble not in self._of:
            for bookie in ensemble:
                if bookie not in self._infos:
                    self._infos[bookie] = self.store.bookie_service_info(bookie)
            self._of[ensemble] = {bookie: self._infos[bookie] for bookie in ensemble}
        return self._of[ensemble]


DEFAULT_ENTRY_BYTES = 1024  # per entry of an open ledger, when no closed ledger of the read tells better


def estimate_entry_bytes(metadata: dict) -> dict:
    """Estimated bytes per entry of each ledger (``metadata``: any key to its LedgerMetadata): a closed ledger's
    length over its entries; an open one's the average of the closed ones here, else DEFAULT_ENTRY_BYTES (the
    client learns an open ledger's LAC from its bookies, not its length)."""
    known = {key: md.length / (md.last_entry_id + 1) for key, md in metadata.items()
             if md.is_closed and md.last_entry_id >= 0}
    average = sum(known.values()) / len(known) if known else DEFAULT_ENTRY_BYTES
    return {key: known.get(key, average) for key in metadata}


def entry_bytes(slices: list[LedgerSlice]) -> dict[LedgerId, float]:
    """Estimated bytes per entry of each ledger of ``slices`` (``estimate_entry_bytes``)."""
    return estimate_entry_bytes({sl.ledger: sl.metadata for sl in slices})


def pack_partitions(slices: list[LedgerSlice], transports: "BookieTransports", opts: ReadOptions) -> list[PackedPartition]:
    """The partitions of a read of ``slices``: planned per (ledger, fragment, member), then packed by bytes
    per serving bookie (pieces of one fragment stay apart: they were cut to be read in parallel). A plan of
    many small ledgers makes tens of thousands of pieces: what a fragment's pieces share is worked out once."""
    per_entry = entry_bytes(slices)
    kinds = SliceKinds()
    rows, pieces = [], []
    for n, sl in enumerate(slices):
        md, ledger, size = sl.metadata, sl.ledger, per_entry[sl.ledger]
        head = (ledger.scope_id, ledger.ledger_id)
        segment = -1 if sl.segment is None else sl.segment
        for ensemble, striped, shares in fragment_shares(sl, opts.max_entries_per_partition):
            k = kinds.index(ensemble, md.write_quorum_size, md.digest_type, striped, sl.log,
                            lambda ensemble=ensemble: transports.of(ensemble))
            stride, apart = stride_of(ensemble, striped), (n, ensemble)
            for member, lo, hi in shares:
                rows.append((k, *head, lo, hi, member, segment))
                pieces.append(Piece(ensemble[member], int(entries_in(lo, hi, member, stride) * size), apart))
    table = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * ROW).reshape(-1, ROW)
    return [PackedPartition(kinds.kinds, table[group])
            for group in pack(pieces, opts.max_bytes_per_partition, opts.open_cost_in_bytes)]


def plan(opts: ReadOptions) -> list[PackedPartition]:
    """The partitions of a batch read (driver side); the first one carries the read's head (``split_head``)."""
    transports = BookieTransports(connections.driver_client(opts.uri, opts.zk_connect_timeout))
    with gc_paused():  # metadata and slices by the ten thousand, none of them garbage: bookie/util/gc_pause.py
        head, rest = split_head(resolve_slices(opts), opts)
        partitions = pack_partitions(rest, transports, opts)
    if not head:
        return partitions
    first = partitions[0] if partitions else PackedPartition([], ())
    return [first.with_head(tuple(tuple(slice_partitions(sl, transports, opts.max_entries_per_partition))
                                  for sl in head)), *partitions[1:]]


HEAD_ENTRIES = 100  # entries of a striped read's head at most (show() lists 20) ...
HEAD_LEDGERS = 8  # ... of that many ledgers at most (each read with a call per bookie, not the packed one)
HEAD_BYTES = 16 << 20  # ... and about that many bytes (they are sorted in the task's memory)


def split_head(slices: list[LedgerSlice], opts: ReadOptions) -> tuple[list[LedgerSlice], list[LedgerSlice]]:
    """(head, rest): the first entries of a read that starts on a striped fragment (WQ < E), cut from its
    first ledgers (at most HEAD_ENTRIES of HEAD_LEDGERS ledgers, about HEAD_BYTES or maxBytesPerPartition, what
    is less), and the rest of the read. Each bookie of a striped fragment serves every E-th entry (those it is
    first in the write set for), so its partition starts 0, E, 2E, ...: the head, read by the first partition
    from all of them and sorted there, is what ``show()`` and ``take(n)`` see first, in entry order. No head
    where the read starts on a fragment whose bookies all hold every entry (its first partition holds the
    first entries already) or where one entry is estimated over the budget (``maxBytesPerPartition=1``: a
    partition per slice, no head)."""
    if not slices or slices[0].metadata.write_quorum_size == slices[0].metadata.ensemble_size:
        return [], slices
    per_entry = {ledger: max(size, 1.0) for ledger, size in entry_bytes(slices[:HEAD_LEDGERS]).items()}
    head, rest = [], list(slices)
    entries, budget = min(HEAD_ENTRIES, opts.max_entries_per_partition), min(HEAD_BYTES, opts.max_bytes_per_partition)
    while rest and len(head) < HEAD_LEDGERS:
        sl = rest[0]
        count = min(sl.last - sl.first + 1, entries, int(budget // per_entry[sl.ledger]))
        if count < 1:
            break
        head.append(dataclasses.replace(sl, last=sl.first + count - 1))
        if count == sl.last - sl.first + 1:
            rest.pop(0)
        else:
            rest[0] = dataclasses.replace(sl, first=sl.first + count)
        entries, budget = entries - count, budget - count * per_entry[sl.ledger]
    return head, rest


def fragment_shares(sl: LedgerSlice, per_partition: int
                    ) -> list[tuple[tuple[str, ...], bool, list[tuple[int, int, int]]]]:
    """(ensemble, striped, [(member, first, last), ...]) of each fragment of one ledger slice: the fragment
    shared among its ensemble's bookies, at most ``per_partition`` entries of it per piece."""
    out = []
    md = sl.metadata
    for f_first, f_last, ensemble in md.fragments():
        f_last = sl.last if f_last < 0 else f_last
        a, b = max(sl.first, f_first), min(sl.last, f_last)
        if a > b:
            continue
        if md.write_quorum_size != len(ensemble):
            out.append((ensemble, True, [(member, lo, min(b, lo + per_partition - 1)) for member in range(len(ensemble))
                                         for lo in range(a, b + 1, per_partition)]))
        else:
            out.append((ensemble, False, contiguous_shares(a, b, len(ensemble), per_partition)))
    return out


def slice_partitions(sl: LedgerSlice, transports: BookieTransports, per_partition: int) -> list[FragmentMemberPartition]:
    """The partitions of one ledger slice (``fragment_shares``) on their own."""
    md = sl.metadata
    return [fragment_member_partition(sl.ledger, ensemble, member, lo, hi, md.write_quorum_size, md.digest_type,
                                       transports.of(ensemble), striped, sl.log, sl.segment)
            for ensemble, striped, shares in fragment_shares(sl, per_partition) for member, lo, hi in shares]


BALANCE_ROUNDS = 4
MIN_SHARE_ENTRIES = 8192


def contiguous_shares(first: int, last: int, ensemble_size: int, per_partition: int) -> list[tuple[int, int, int]]:
    """(member, first, last) of contiguous pieces of ``[first, last]`` for a fragment whose every bookie
    holds every entry: a multiple of ``ensemble_size`` pieces of near-equal size (each bookie serves as
    much as the others), none over ``per_partition`` entries, up to BALANCE_ROUNDS per bookie where they
    hold MIN_SHARE_ENTRIES each, piece k read from member ``k % E``."""
    count = last - first + 1
    # Several rounds even where one would do: a task per bookie is one wave too few for most core counts
    # (3 tasks on 2 cores leave one running alone), and pieces of MIN_SHARE_ENTRIES amortize a task's cost.
    rounds = max(-(-count // (ensemble_size * per_partition)),
                 min(BALANCE_ROUNDS, count // (ensemble_size * MIN_SHARE_ENTRIES)), 1)
    pieces = min(count, ensemble_size * rounds)
    bounds = [first + count * k // pieces for k in range(pieces + 1)]
    return [(k % ensemble_size, bounds[k], bounds[k + 1] - 1) for k in range(pieces)]


Target = tuple[LedgerId, "str | None", "int | None", int, "int | None"]  # ledger, log, segment, first, last


def _targets(bk, opts: ReadOptions, positioned: bool = True) -> list[Target]:
    """(ledger, log, segment, first entry, last entry or None: its end) of everything the read selects. A log's
    segments are those its positions select (``log_offsets.batch_range``) when ``positioned``; every segment
    otherwise (load()'s check of a log a stream, placed later, may read)."""
    from spark_bookkeeper.log import LogNotFoundException, read_log
    from spark_bookkeeper.log_offsets import batch_range, commit_time
    if opts.log is not None:
        try:
            log = read_log(bk.store, opts.log)
        except LogNotFoundException as exc:
            raise BookKeeperOptionException(f"option log: {exc}") from None
        ranges = batch_range(log, opts, commit_time(bk)) if positioned else [(n, 0, None) for n, _ in log.numbered()]
        targets = [(log.segment(n).ledger, opts.log, n, first, last) for n, first, last in ranges]  # absolute numbers
    elif opts.ledgers is not None:
        targets = [(lid, None, None, 0, None) for lid in opts.ledgers]
    else:
        targets = [(lid, None, None, 0, None) for lid in bk.list_ledgers(opts.scope)]
    if opts.ledger_filter is not None:  # pushed down: ledger_id = / IN
        targets = [t for t in targets if t[0].ledger_id in opts.ledger_filter]
    return targets


def _check(opts: ReadOptions, ledger: LedgerId, md: LedgerMetadata | LedgerAccess) -> None:
    if md.password != opts.password:
        raise BookKeeperOptionException(f"wrong password for ledger {ledger}: set option password")
    if opts.digest is not None and opts.digest != md.digest_type:
        raise BookKeeperOptionException(f"option digest={opts.digest.name.lower()} but ledger {ledger} uses "
                                    f"{md.digest_type.name.lower()}")


def checked_metadata(bk, opts: ReadOptions, targets: list[Target], access_only: bool = False
                     ) -> Iterator[tuple[Target, Versioned[LedgerMetadata]]]:
    """Each target with its metadata, checked against the options: read once per ledger, many reads in flight
    (MetadataStore.read_ledgers, as BookKeeper's LedgerManager.asyncProcessLedgers walks them; ``access_only``:
    only the password and digest type, a LedgerAccess). A ledger the user named (option ledgers, or a log's
    segment) that does not exist fails, naming it; one a scope's listing found and deleted since is left out
    (the scope no longer has it)."""
    listed = opts.log is None and opts.ledgers is None
    read = bk.store.read_ledger_access if access_only else bk.store.read_ledgers
    for target, (ledger, versioned) in zip(targets, read(t[0] for t in targets)):
        if versioned is None:
            if listed:
                continue
            raise BookKeeperOptionException(f"ledger {ledger} does not exist (metadataServiceUri {opts.uri})")
        _check(opts, ledger, versioned.value)
        yield target, versioned


def check_selection(opts: ReadOptions) -> None:
    """Fail now, naming it, if the cluster, a log, a ledger, the password or the digest is wrong. The plan
    (at execution) reads the metadata again: ledgers may change between load() and the action."""
    bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
    with gc_paused():
        for _ in checked_metadata(bk, opts, _targets(bk, opts, positioned=False), access_only=True):
            pass


def readable_end(bk, opts: ReadOptions, ledger: LedgerId, versioned: Versioned[LedgerMetadata]
                 ) -> tuple[LedgerMetadata, int]:
    """The metadata to read by and the last readable entry: a closed ledger's last entry (no bookie asked); an
    open one's LAC from its bookies, or its last entry once recovered (``recover``)."""
    md = versioned.value
    if md.is_closed:
        return md, md.last_entry_id
    handle = bk.open_ledger(ledger, password=opts.password, recovery=opts.recover, versioned=versioned)
    return handle.metadata, handle.last_add_confirmed


def resolve_slices(opts: ReadOptions) -> list[LedgerSlice]:
    """The entry range to read of each ledger (an open one: up to its LAC, or recovered first), each ledger's
    metadata read once: what the read's positions select (a log's), within startEntry/endEntry (which pushed-down
    entry_id filters narrow)."""
    bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
    slices = []
    for (ledger, log_name, segment, first, upto), versioned in checked_metadata(bk, opts, _targets(bk, opts)):
        md, lac = readable_end(bk, opts, ledger, versioned)
        first = max(first, opts.start_entry)
        last = min(x for x in (lac, opts.end_entry, upto) if x is not None)
        if last >= first:
            slices.append(LedgerSlice(ledger, md, first, last, log_name, segment))
    return slices


class BookKeeperReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema, arrow_schema: pa.Schema):
        self.opts = opts
        self.schema = schema
        self.arrow_schema = arrow_schema

    def partitions(self):
        return plan(self.opts)

    def read(self, partition: PackedPartition | FragmentMemberPartition):
        if not isinstance(partition, (PackedPartition, FragmentMemberPartition)):
            return iter(())  # a read of nothing (e.g. a log range past its last commit): Spark's one empty partition
        if isinstance(partition, PackedPartition):
            clients = connections.worker_clients().for_bookies(partition.services())
            return coalesced(itertools.chain(self._read_head(partition.head, clients),
                                             self._read_packed(partition, clients)), COALESCE_ROWS)
        clients = connections.worker_clients().for_bookies(partition.services)
        return coalesced(self._read_slice(partition, clients), COALESCE_ROWS)

    def _read_head(self, head: Head, clients):
        """The head's ledgers in turn, each one's entries in id order: its slices read as on their own (from
        every bookie of a striped fragment), then sorted (HEAD_ENTRIES rows at most)."""
        for group in head:
            batches = [batch for p in group for batch in self._read_slice(p, clients)]
            if batches:
                yield from pa.Table.from_batches(batches, schema=self.arrow_schema).sort_by("entry_id").to_batches()

    def _read_packed(self, partition: PackedPartition, clients):
        """Many slices: the bookie's whole share in one call first (``read_share``, the slices as columns); then
        each slice it did not serve whole reads what is missing."""
        share = ShareRead()
        if len(partition) > 1:
            columns = partition.columns()
            segments = np.maximum(columns.segments, 0).astype(np.int32)
            with gc_paused():  # an entry by the thousand
                share = read_share(columns, partition.bookie, clients, self.opts.password,
                                   lambda lids, ids, offsets, data, owner: self._rows(lids, ids, offsets, data,
                                                                                      segments[owner]),
                                   clients.conf.nettyMaxFrameSizeBytes)
            yield from share.batches
        for i in range(len(partition)):
            if i not in share.complete:
                yield from self._read_slice(partition.slice(i), clients, share.partial.get(i), i < share.covered)

    def _read_slice(self, p: FragmentMemberPartition, clients, ahead: Prefetched | None = None,
                    member_answered: bool = False):
        """The slice's entries: ``ahead`` (what its bookie sent in the partition's one call), then what is missing,
        from the bookies of its write set in turn (not the member again if it ``member_answered`` that call)."""
        digest = DigestManager(p.ledger, self.opts.password, p.digest_type)
        E, first = len(p.ensemble), p.first
        wanted = np.arange(first, p.last + 1, dtype=np.int64)
        stride = p.stride
        if stride:
            wanted = wanted[wanted % E == p.member]
        if not len(wanted):
            return
        seen = np.zeros(p.last - first + 1, dtype=bool)
        if ahead is not None and ahead.batch is not None:
            seen[ahead.ids - first] = True
            yield ahead.batch
        # Every entry here has the same write set (striped: e % E == member; WQ == E: the ensemble): what
        # the member could not serve is range-read the same way from the next bookie of it, and so on.
        for index in write_set(p.member, E, p.write_quorum):
            todo = wanted[~seen[wanted - first]]
            if not len(todo):
                return
            if member_answered and index == p.member:
                continue
            for ids, offsets, data in self._range(clients, p.ledger, digest, p.ensemble[index], int(todo[0]),
                                                  int(todo[-1]), stride, p.member):
                fresh = ~seen[ids - first]
                seen[ids - first] = True
                batch = self._batch(p, ids, offsets, data)
                yield batch if fresh.all() else batch.filter(pa.array(fresh))
        missing = wanted[~seen[wanted - first]].tolist()
        if missing:  # on no replica in one piece: entry by entry, which tells "no such entry" from failure
            reader = LedgerReader(clients, p.ledger, digest)
            payloads = [reader.read_verified_in(p.ensemble, p.write_quorum, e)[1].tobytes() for e in missing]
            offsets = np.zeros(len(missing) + 1, dtype=np.int32)
            np.cumsum([len(payload) for payload in payloads], out=offsets[1:])
            yield self._batch(p, np.array(missing, dtype=np.int64), offsets, b"".join(payloads))

    @staticmethod
    def _range(clients, ledger: LedgerId, digest: DigestManager, bookie: str, first: int, last: int, stride: int,
               member: int):
        """(ids, payload offsets, payload bytes) of the verified entries of ``[first, last]`` (those with
        ``e % stride == member`` if ``stride``) that ``bookie`` sends; stops, warning, where it fails."""
        try:
            for message in clients.bookie_client(bookie).read_entries(
                    ledger, first, last, clients.conf.readBatchBytes, stride, member):
                if message.status != status.EOK:
                    log.warning("ledger %s entries %d..%d from %s: %s; trying other replicas", ledger, first,
                                last, bookie, status.name_of(message.status))
                    return
                ids, offsets, data, bad = digest.verify_columns(message.entries)
                if bad:
                    log.warning("ledger %s entries %s from %s failed their digest check; trying other replicas",
                                ledger, bad[:10], bookie)
                if len(ids):
                    yield ids, offsets, data
        except Exception as exc:  # a bookie that cannot serve: its entries come from the other replicas
            log.warning("ledger %s entries %d..%d: bookie %s failed (%s); trying other replicas", ledger, first,
                        last, bookie, exc)

    def _batch(self, p: FragmentMemberPartition, ids: np.ndarray, offsets: np.ndarray, data: bytes) -> pa.RecordBatch:
        n = len(ids)
        return self._rows(np.full(n, p.ledger.ledger_id, dtype=np.int64), ids, offsets, data,
                          np.full(n, p.segment or 0, dtype=np.int32))

    def _rows(self, lids: np.ndarray, ids: np.ndarray, offsets: np.ndarray, data: bytes,
              segments: np.ndarray) -> pa.RecordBatch:
        """Rows of the read's schema (``segments``: each row's log segment, for a log read)."""
        n = len(ids)
        payload = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        columns = [pa.array(lids), pa.array(ids), payload]
        if self.opts.log is not None:
            columns += [pa.repeat(pa.scalar(self.opts.log, pa.string()), n), pa.array(segments)]
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)


COALESCE_ROWS = 8192  # rows per batch handed to Spark at least (a batch costs Spark far more than a row)


def coalesced(batches, rows: int):
    """``batches`` joined into batches of at least ``rows`` rows (the last may be smaller); a big batch
    passes as it is. Many small ledgers give a batch per slice of a few rows each otherwise."""
    held, count = [], 0
    for batch in batches:
        if not held and batch.num_rows >= rows:
            yield batch
            continue
        held.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.concat_batches(held)
            held, count = [], 0
    if held:
        yield held[0] if len(held) == 1 else pa.concat_batches(held)


class PushdownBookKeeperReader(BookKeeperReader):
    """The reader with filter pushdown (option ``filterPushdown=true``; Spark also needs
    ``spark.sql.python.filterPushdown.enabled=true``, and fails any read of a source that takes
    filters without it, hence the opt-in). ``ledger_id = / IN`` narrows the ledgers, comparisons on
    ``entry_id`` the entry range; Spark still applies every filter to what is read."""

    def pushFilters(self, filters):
        from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
        opts = self.opts
        for f in filters:
            column = f.attribute[0] if len(f.attribute) == 1 else None
            if column == "ledger_id" and isinstance(f, (EqualTo, In)):
                keep = {f.value} if isinstance(f, EqualTo) else set(f.value)
                opts.ledger_filter = keep if opts.ledger_filter is None else opts.ledger_filter & keep
            elif column == "entry_id" and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
                lo = {EqualTo: f.value, GreaterThan: f.value + 1, GreaterThanOrEqual: f.value}.get(type(f))
                hi = {EqualTo: f.value, LessThan: f.value - 1, LessThanOrEqual: f.value}.get(type(f))
                if lo is not None:
                    opts.start_entry = max(opts.start_entry, lo)
                if hi is not None:
                    opts.end_entry = hi if opts.end_entry is None else min(opts.end_entry, hi)
            yield f  # Spark evaluates it again on the rows: narrowing is an optimisation only
