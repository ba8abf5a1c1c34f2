"""Metadata tables: ``.option("table", "ledgers" | "fragments" | "bookies" | "underreplicated")``, one row
per ledger / fragment / bookie / under-replicated ledger, from ZooKeeper (and GetBookieInfo for bookies;
LedgerUnderreplicationManager's znodes for under-replicated ledgers).

``ledgers`` and ``fragments`` are split by ledger ids: the driver only lists the ledger tree (ids, range by
range: BookKeeper's LedgerRangeIterator) into partitions of ``ledgersPerPartition`` ids, and each executor
reads its ledgers' metadata, many reads in flight (MetadataStore.read_ledgers), and builds their rows. The
driver never holds a ledger's metadata, so its memory does not grow with the rows; a ledger deleted between
the listing and the executor's read is left out, as a listing made a moment later would. ``bookies`` and
``underreplicated`` are small: built on the driver, one partition.

Columns for people beside the raw ones: ``bookies`` has each size in bytes (``total_disk``, ``free_disk``, to
compute with) and as text in binary units (``total_disk_human``, ``free_disk_human``: ``"931.3 GiB"``);
``ledgers`` has ``custom_metadata`` (the bytes) and ``custom_metadata_text`` (each value as text where it is
printable UTF-8, else ``0x`` and its hex)."""
from __future__ import annotations

import datetime as dt
import itertools
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, InputPartition

from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.util.chunks import chunks
from bookie.util.human import human_bytes, text_or_hex
from spark_bookkeeper import connections
from spark_bookkeeper.options import ReadOptions

SCHEMAS = {
    "ledgers": ("scope_id long, ledger_id long, state string, ensemble_size int, write_quorum int, ack_quorum int, "
                "last_entry_id long, length long, digest string, ctime timestamp, fragments int, "
                "bookies array<string>, custom_metadata map<string,binary>, custom_metadata_text map<string,string>"),
    "fragments": ("scope_id long, ledger_id long, fragment int, first_entry_id long, last_entry_id long, "
                  "ensemble array<string>, state string"),
    "bookies": ("bookie_id string, state string, total_disk long, free_disk long, total_disk_human string, "
                "free_disk_human string"),
    "underreplicated": ("scope_id long, ledger_id long, missing_replicas array<string>, state string, reason string, "
                        "marked_at timestamp, state_since timestamp, worker string"),
}
MARKED = "marked"  # an under-replicated ledger no worker has described yet (no state node)


def _timestamp(ms: int) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc) if ms >= 0 else None


def underreplicated_rows(store) -> list[tuple]:
    """Each marked ledger as AutoRecovery records it: missing replicas and when marked (the urL record),
    state and reason (the state node), the worker holding its lock."""
    manager = LedgerUnderreplicationManager(store)
    out = []
    for marked in manager.list_underreplicated():
        state = manager.get_state(marked.ledger)
        out.append((marked.ledger.scope_id, marked.ledger.ledger_id, list(marked.replicas),
                    state.state if state is not None else MARKED, state.reason if state is not None else "",
                    _timestamp(marked.ctime), _timestamp(state.mtime) if state is not None else None,
                    manager.lock_holder(marked.ledger)))
    return out


def rows(opts: ReadOptions) -> list[tuple]:
    """The rows of ``bookies`` or ``underreplicated`` (driver side)."""
    bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
    if opts.table == "underreplicated":
        return underreplicated_rows(bk.store)
    if opts.table != "bookies":
        raise ValueError(f"table {opts.table!r} is read by executors from ledger-id partitions (id_partitions)")
    return [bookie_row(bk, bookie, state)
            for state, bookies in (("rw", bk.writable_bookies()), ("ro", bk.readonly_bookies())) for bookie in bookies]


def bookie_row(bk, bookie: str, state: str) -> tuple:
    """The ``bookies`` row of one registered bookie: its disk as GetBookieInfo reports it, in bytes and as a
    person reads it (``"931.3 GiB"``); "unavailable" and no sizes when it does not answer."""
    try:
        info = bk.bookie_client(bookie).bookie_info()
    except Exception:  # registered but not answering
        return bookie, "unavailable", None, None, None, None
    total, free = info.totalDiskCapacity, info.freeDiskSpace
    return bookie, state, total, free, human_bytes(total), human_bytes(free)


@dataclass
class LedgerIdsPartition(InputPartition):
    """Ledgers as the driver listed them, ids only: ``(scope_id, ids)`` runs in listing order (ids as a
    compact int64 array). The executor reads their metadata."""

    runs: tuple[tuple[int, array], ...]

    def __init__(self, ledgers: Iterable[LedgerId]):
        super().__init__(None)
        self.runs = tuple((scope, array("q", (ledger.ledger_id for ledger in run)))
                          for scope, run in itertools.groupby(ledgers, key=lambda ledger: ledger.scope_id))

    def ledgers(self) -> Iterator[LedgerId]:
        for scope, ids in self.runs:
            for ledger_id in ids:
                yield LedgerId(scope, ledger_id)

    def count(self) -> int:
        return sum(len(ids) for _, ids in self.runs)


def id_partitions(store, scope: int | None, per_partition: int) -> list[LedgerIdsPartition]:
    """Every ledger of ``scope`` (None: all scopes) in listing order, ``per_partition`` ids a partition (at
    least one partition, maybe empty: Spark reads an empty table from it)."""
    if per_partition < 1:
        raise ValueError(f"ledgers per partition must be at least 1 (got {per_partition})")
    listed = store.iterate_ledgers(scope)
    return [LedgerIdsPartition(chunk) for chunk in chunks(listed, per_partition)] or [LedgerIdsPartition(())]


def read_ledger_rows(store, table: str, partition: LedgerIdsPartition) -> Iterator[tuple]:
    """The ``table`` rows of the partition's ledgers (executor side), their metadata read pipelined; a ledger
    deleted since the driver listed it has no rows."""
    build = LEDGER_ROWS[table]
    for ledger, versioned in store.read_ledgers(partition.ledgers()):
        if versioned is not None:
            yield from build(ledger, versioned.value)


def ledger_rows(ledger, md) -> list[tuple]:
    """The ``ledgers`` row of one ledger (a list of one, like ``fragment_rows``)."""
    bookies = sorted({b for _, ens in md.ensembles for b in ens})
    return [(ledger.scope_id, ledger.ledger_id, md.state.name, md.ensemble_size, md.write_quorum_size,
             md.ack_quorum_size, md.last_entry_id, md.length, md.digest_type.name.lower(), _timestamp(md.ctime),
             len(md.ensembles), bookies, dict(md.custom_metadata), custom_metadata_text(md.custom_metadata))]


def custom_metadata_text(custom_metadata) -> dict[str, str]:
    """Custom metadata as a person reads it: each value as text where it is printable UTF-8, else ``0x`` and its
    hex (the ``custom_metadata`` column keeps the bytes)."""
    return {key: text_or_hex(value) for key, value in custom_metadata}


def fragment_rows(ledger, md) -> list[tuple]:
    """The ``fragments`` rows of one ledger: one per ensemble it had."""
    return [(ledger.scope_id, ledger.ledger_id, i, first, last, list(ensemble), md.state.name)
            for i, (first, last, ensemble) in enumerate(md.fragments())]


# The tables built from each ledger's metadata alone: table → its rows of one ledger.
LEDGER_ROWS = {"ledgers": ledger_rows, "fragments": fragment_rows}


class TableReader(DataSourceReader):
    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def partitions(self):
        opts = self.opts
        if opts.table in LEDGER_ROWS:
            store = connections.driver_client(opts.uri, opts.zk_connect_timeout).store
            return id_partitions(store, opts.scope, opts.ledgers_per_partition)
        return [InputPartition(rows(opts))]

    def read(self, partition):
        if isinstance(partition, LedgerIdsPartition):
            # An executor's own ZooKeeper session (one per worker process, kept for its next tasks).
            store = connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout).store
            yield from read_ledger_rows(store, self.opts.table, partition)
        else:
            yield from partition.value
