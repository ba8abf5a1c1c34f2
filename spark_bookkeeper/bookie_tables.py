"""Per-bookie tables: ``.option("table", "entrylogs" | "bookie_ledgers")``, one partition per bookie, each
executor asking its bookie directly.

The driver lists the bookies (registered writable and read-only, and the bookies the ledger metadata names
that are not registered: lost) and, for ``bookie_ledgers``, what the metadata says each bookie should hold
(ledger state, the striping's inputs, the fragments it is a member of), in one pass over the metadata (each
ledger read once, pipelined) kept as compact int columns (``BookiePlan``), never every ledger's metadata.
Executors never use ZooKeeper: the partition carries the bookie's BookieServiceInfo and that summary.

- ``entrylogs``: the bookie's GarbageCollection status (this project's bookies only): each entry log as its
  garbage collector last described it, the logs it skipped as unreadable, and the log being written.
- ``bookie_ledgers``: per ledger, the entries the bookie lists (GetListOfEntriesOfLedger, which stock
  BookKeeper bookies answer too) against the entries the striping says it must hold
  (RoundRobinDistributionSchedule), and the ledger's live and deleted-not-reclaimed bytes in its entry logs.

A bookie that does not answer gives rows saying so (status ``unavailable``), never a failed job.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql.datasource import DataSourceReader, InputPartition

from bookie.client.bookie_client import BookieClient
from bookie.exceptions import BKException
from bookie.client.distribution_schedule import stored_count, stores
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BookieServiceInfo
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.proto import availability, status
from bookie.proto import bookkeeper_pb2 as pb
from bookie.util.chunks import chunks
from spark_bookkeeper import connections
from spark_bookkeeper.options import BOOKIE_TIMEOUT, ReadOptions

SCHEMAS = {
    "entrylogs": ("bookie_id string, entry_log_id long, total_bytes long, remaining_bytes long, usage double, "
                  "ledgers int, deleted_ledgers int, being_written boolean, minor_compaction_candidate boolean, "
                  "major_compaction_candidate boolean, status string, error string"),
    "bookie_ledgers": ("bookie_id string, scope_id long, ledger_id long, in_metadata boolean, expected_entries long, "
                       "entries long, missing_entries long, short_fragments array<int>, bytes long, "
                       "deleted_bytes long, deleted_at_pass long, gc_passes long, status string, error string"),
}
OK, SKIPPED, UNAVAILABLE, UNSUPPORTED, PARTIAL = "ok", "skipped", "unavailable", "unsupported", "partial"
# How long a bookie's answer is waited for: the bookieTimeout option (at least), plus the work the request asks
# for. A bookie listed a 2.9-million-entry ledger in 7.2 s (~400,000 entries a second; issue 35): allow four
# times that. A ledger's entries it is not told by the metadata (open, or without metadata) are counted from its
# bytes in the bookie's logs, at the fewest bytes an entry takes there (its ids, LAC and digest), an upper bound.
LISTED_ENTRY_SECONDS = 10e-6
DESCRIBED_LEDGER_SECONDS = 50e-6  # the GC status with ledger details: per ledger the metadata puts on the bookie
MIN_STORED_ENTRY_BYTES = 32
NOT_REGISTERED = "not registered (the ledger metadata names it, but it is neither writable nor read-only: lost?)"
NO_GC_STATE = ("a stock BookKeeper bookie: its protocol has no garbage-collection state (entry logs, "
               "bytes per ledger)")


@dataclass(frozen=True)
class LedgerOnBookie:
    """What the metadata says of one ledger on one bookie: the striping's inputs and, for a closed ledger,
    the fragments the bookie is a member of: (fragment index, first entry, last entry, member index)."""

    scope_id: int
    ledger_id: int
    closed: bool
    ensemble_size: int
    write_quorum: int
    fragments: tuple[tuple[int, int, int, int], ...] = ()

    def expected(self) -> list[int]:
        """How many entries of each fragment the bookie must hold (RoundRobinDistributionSchedule)."""
        return [stored_count(member, first, last, self.ensemble_size, self.write_quorum)
                for _, first, last, member in self.fragments]

    def held(self, stored: np.ndarray) -> list[int]:
        """How many of those entries ``stored`` (sorted entry ids, as a bookie lists them) has, per fragment."""
        out = []
        for _, first, last, member in self.fragments:
            lo, hi = np.searchsorted(stored, (first, last + 1))
            out.append(int(np.count_nonzero(stores(member, stored[lo:hi], self.ensemble_size, self.write_quorum))))
        return out


class LedgersOnBookie:
    """The LedgerOnBookie of many ledgers as flat int64 columns: what the driver's plan holds per bookie
    instead of objects (BOOKIE_LEDGER ints a ledger: scope, id, closed, E, WQ, fragment count; FRAGMENT ints a
    fragment: index, first, last, member). Iterating gives the LedgerOnBookie back, in the order added."""

    BOOKIE_LEDGER, FRAGMENT = 6, 4

    def __init__(self, ledgers: Iterable[LedgerOnBookie] = ()):
        self.ledgers, self.fragments = array("q"), array("q")
        for ledger in ledgers:
            self.append(ledger)

    def append(self, ledger: LedgerOnBookie) -> None:
        self.ledgers.extend((ledger.scope_id, ledger.ledger_id, int(ledger.closed), ledger.ensemble_size,
                             ledger.write_quorum, len(ledger.fragments)))
        for fragment in ledger.fragments:
            self.fragments.extend(fragment)

    def __iter__(self) -> Iterator[LedgerOnBookie]:
        at, n = 0, self.FRAGMENT
        for i in range(0, len(self.ledgers), self.BOOKIE_LEDGER):
            scope, ledger_id, closed, ensemble_size, write_quorum, count = self.ledgers[i:i + self.BOOKIE_LEDGER]
            fragments = tuple(tuple(self.fragments[j:j + n]) for j in range(at, at + count * n, n))
            at += count * n
            yield LedgerOnBookie(scope, ledger_id, bool(closed), ensemble_size, write_quorum, fragments)

    def count(self) -> int:
        return len(self.ledgers) // self.BOOKIE_LEDGER

    __len__ = count


class KnownLedgers:
    """Every ledger the metadata has, key → closed, as two compact columns (the driver's plan holds these, one
    copy for all bookies); ``get`` and ``in`` look a key up by binary search in a sorted copy made on first use
    on the executor (no Python object per ledger: a bookie is asked of far fewer ledgers than the cluster has)."""

    def __init__(self):
        self.keys, self.closed = array("q"), bytearray()
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, ledger: LedgerId, closed: bool) -> None:
        self.keys.extend((ledger.scope_id, ledger.ledger_id))
        self.closed.append(closed)

    def _lookup(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sorted is None:
            pairs = np.frombuffer(self.keys, dtype=np.int64).reshape(-1, 2) if self.keys else np.zeros((0, 2), np.int64)
            order = np.lexsort((pairs[:, 1], pairs[:, 0]))  # by scope, then ledger id
            self._sorted = (pairs[order], np.frombuffer(bytes(self.closed), dtype=np.uint8)[order])
        return self._sorted

    def get(self, key: tuple[int, int]) -> bool | None:
        pairs, closed = self._lookup()
        scopes = pairs[:, 0]
        lo, hi = np.searchsorted(scopes, key[0], "left"), np.searchsorted(scopes, key[0], "right")
        i = lo + int(np.searchsorted(pairs[lo:hi, 1], key[1]))
        return bool(closed[i]) if i < hi and pairs[i, 1] == key[1] else None

    def __contains__(self, key: tuple[int, int]) -> bool:
        return self.get(key) is not None

    def __getstate__(self) -> dict:
        return {"keys": self.keys, "closed": self.closed, "_sorted": None}  # the columns travel, not the copy


@dataclass
class BookiePartition(InputPartition):
    """One bookie: its registration (None if not registered) and, for bookie_ledgers, the ledgers the metadata
    puts on it and every ledger the metadata has (key → closed), to tell orphans from ledgers moved away."""

    bookie: str
    info: BookieServiceInfo | None
    registered: bool
    ledgers: LedgersOnBookie | list[LedgerOnBookie] = field(default_factory=list)
    known: KnownLedgers | dict[tuple[int, int], bool] = field(default_factory=dict)
    scope: int | None = None  # option scope: only that scope's ledgers
    timeout: float = BOOKIE_TIMEOUT  # option bookieTimeout: seconds a request waits at least


def on_bookies(ledger: LedgerId, md) -> dict[str, LedgerOnBookie]:
    """Each bookie the ledger's metadata names → what it should hold of that ledger."""
    closed = md.state == LedgerState.CLOSED
    fragments: dict[str, list[tuple[int, int, int, int]]] = {}
    for index, (first, last, ensemble) in enumerate(md.fragments()):
        for member, bookie in enumerate(ensemble):
            frags = fragments.setdefault(bookie, [])
            if closed and last >= first:  # an empty fragment (closed at its first entry) holds nothing
                frags.append((index, first, last, member))
    return {bookie: LedgerOnBookie(ledger.scope_id, ledger.ledger_id, closed, md.ensemble_size,
                                   md.write_quorum_size, tuple(frags))
            for bookie, frags in fragments.items()}


class BookiePlan:
    """What every bookie should hold by the metadata, from one pass over it (each ledger read once, pipelined,
    and dropped once summarized): per bookie its LedgersOnBookie, and the KnownLedgers. Both per-bookie tables
    are planned from it (the audits read them together)."""

    def __init__(self, bk, ledgers: Iterable[tuple[LedgerId, LedgerMetadata]], scope: int | None = None,
                 timeout: float = BOOKIE_TIMEOUT):
        self.bk, self.scope, self.timeout = bk, scope, timeout
        self.registered = list(dict.fromkeys(bk.writable_bookies() + bk.readonly_bookies()))
        self.on_bookie: dict[str, LedgersOnBookie] = {b: LedgersOnBookie() for b in self.registered}
        self.known = KnownLedgers()
        for ledger, md in ledgers:
            self.known.add(ledger, md.state == LedgerState.CLOSED)
            for bookie, summary in on_bookies(ledger, md).items():
                self.on_bookie.setdefault(bookie, LedgersOnBookie()).append(summary)

    def partitions(self, table: str) -> list[BookiePartition]:
        """One partition per bookie, registered or named by the metadata; for ``bookie_ledgers`` with what
        the metadata puts on it."""
        if table not in SCHEMAS:
            raise ValueError(f"table {table!r} is not a per-bookie table; those are {', '.join(SCHEMAS)}")
        with_ledgers = table == "bookie_ledgers"
        return [BookiePartition(bookie, self.bk.store.bookie_service_info(bookie) if bookie in self.registered
                                else None, bookie in self.registered, ledgers if with_ledgers else [],
                                self.known if with_ledgers else {}, self.scope, self.timeout)
                for bookie, ledgers in sorted(self.on_bookie.items())]


def plan(opts: ReadOptions) -> list[BookiePartition]:
    """The driver's part: every bookie, registered or named by the metadata, with what each needs."""
    bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
    return plan_from(bk, bk.store.ledgers_with_metadata(opts.scope), opts.table, opts.scope, opts.bookie_timeout)


def plan_from(bk, ledgers: Iterable[tuple[LedgerId, LedgerMetadata]], table: str,
              scope: int | None = None, timeout: float = BOOKIE_TIMEOUT) -> list[BookiePartition]:
    """``plan`` from ledgers being read (each with its metadata, e.g. ``store.ledgers_with_metadata``: each
    is summarized and dropped, never all held)."""
    return BookiePlan(bk, ledgers, scope, timeout).partitions(table)


# -- entrylogs ----------------------------------------------------------------------------------------
def entrylog_rows(bookie: str, state: pb.GarbageCollectionResponse) -> list[tuple]:
    """One row per entry log of the bookie's GC status, its skipped logs and the log being written."""
    out = []
    thresholds = (("minor", state.minorCompactionThreshold, state.minorCompactionSuspended),
                  ("major", state.majorCompactionThreshold, state.majorCompactionSuspended))
    skipped_ids = {skipped.entryLogId for skipped in state.skipped}
    for log in state.entryLogs:
        if log.entryLogId in skipped_ids:  # found corrupt since it was described: its skipped row says so
            continue
        usage = log.remainingSize / log.totalSize if log.totalSize > 0 else 0.0
        minor, major = (threshold > 0 and usage < threshold and not suspended for _, threshold, suspended in thresholds)
        deleted = sum(1 for ledger in log.ledgers if ledger.deletedAtPass)
        out.append((bookie, log.entryLogId, log.totalSize, log.remainingSize, usage, log.ledgerCount, deleted,
                    False, minor, major, OK, None))
    for skipped in state.skipped:
        out.append((bookie, skipped.entryLogId, None, None, None, None, None, False, False, False, SKIPPED,
                    f"{skipped.path}: {skipped.reason}"))
    current = state.currentEntryLog
    if state.HasField("currentEntryLog"):
        usage = 1.0 if current.totalSize > 0 else None  # nothing in it is collected yet
        out.append((bookie, current.entryLogId, current.totalSize, current.remainingSize, usage, current.ledgerCount,
                    0, True, False, False, OK, None))
    return out


def read_entrylogs(partition: BookiePartition):
    bookie = partition.bookie
    if not partition.registered:
        return [(bookie, *([None] * 9), UNAVAILABLE, NOT_REGISTERED)]
    try:
        client = connections.worker_clients().bookie_client(bookie, partition.info)
        if not isinstance(client, BookieClient):
            return [(bookie, *([None] * 9), UNSUPPORTED, NO_GC_STATE)]
        state = client.garbage_collection(ledger_details=True, timeout=partition.timeout)
    except BKException as exc:
        return [(bookie, *([None] * 9), UNAVAILABLE, f"{type(exc).__name__}: {exc}")]
    if state.status != status.EOK:
        return [(bookie, *([None] * 9), UNAVAILABLE,
                 f"garbage collection status: {status.name_of(state.status)} {state.message}")]
    return entrylog_rows(bookie, state)


# -- bookie_ledgers -----------------------------------------------------------------------------------
@dataclass
class HeldBytes:
    """A ledger's bytes in one bookie's entry logs."""

    live: int = 0
    deleted: int = 0
    deleted_at_pass: int | None = None  # the first GC pass that saw it deleted


def held_bytes(state: pb.GarbageCollectionResponse) -> dict[tuple[int, int], HeldBytes]:
    """Per ledger: live bytes (logs GC described, and the log being written), deleted-not-reclaimed bytes."""
    out: dict[tuple[int, int], HeldBytes] = {}
    logs = list(state.entryLogs) + ([state.currentEntryLog] if state.HasField("currentEntryLog") else [])
    for log in logs:
        for ledger in log.ledgers:
            held = out.setdefault((ledger.scopeId, ledger.ledgerId), HeldBytes())
            if ledger.deletedAtPass:
                held.deleted += ledger.bytes
                held.deleted_at_pass = min(held.deleted_at_pass or ledger.deletedAtPass, ledger.deletedAtPass)
            else:
                held.live += ledger.bytes
    return out


def stored_ids(response: pb.GetListOfEntriesOfLedgerResponse) -> np.ndarray | str:
    """The entry ids a bookie's answer lists (empty for no such ledger), or what it answered instead."""
    if response.status == status.ENOLEDGER:
        return np.empty(0, dtype=np.int64)
    if response.status != status.EOK:
        return f"list of entries: {status.name_of(response.status)} {response.message}".rstrip()
    return availability.ids_array(response.availabilityOfEntriesOfLedger)


LIST_CHUNK = 5000  # ledgers whose entries are listed, and rows made, at a time


class EntryLister:
    """The entry ids one bookie lists for each ledger, asked a chunk of ledgers at a time: this project's bookies
    answer many ledgers per request (GetListOfEntriesOfLedgers); a stock BookKeeper bookie one per request,
    several at a time. A request waits ``timeout`` seconds plus LISTED_ENTRY_SECONDS per entry it lists: a bookie
    listing a big ledger is slow, not gone. Once the bookie stops answering, the rest are not asked (each would
    wait out its own timeout) and say why."""

    def __init__(self, client, timeout: float):
        self.client, self.timeout = client, timeout
        self.gone: str | None = None

    def wait(self, entries: int) -> float:
        """Seconds a list of ``entries`` entries is waited for."""
        return self.timeout + LISTED_ENTRY_SECONDS * entries

    def __call__(self, keys: list[tuple[int, int]], entries: list[int]) -> list[np.ndarray | str]:
        """Each ledger's entry ids on the bookie (empty if it has no such ledger), or what failed; ``entries``:
        how many each lists, at most (``listed_at_most``)."""
        if self.gone is None and isinstance(self.client, BookieClient):
            try:
                return [stored_ids(r) for r in self.client.list_entries_of_ledgers([LedgerId(*key) for key in keys],
                                                                                   self.wait(sum(entries)))]
            except BKException as exc:
                self.gone = f"lists of entries: {type(exc).__name__}: {exc}"
        return list(connections.worker_clients().executor.map(self.one, keys, entries))

    def one(self, key: tuple[int, int], entries: int) -> np.ndarray | str:
        if self.gone is not None:
            return self.gone
        try:
            return stored_ids(self.client.list_entries(LedgerId(*key), self.wait(entries)))
        except BKException as exc:
            self.gone = f"list of entries: {type(exc).__name__}: {exc}"
            return self.gone


def listed_at_most(ledger: LedgerOnBookie | None, held: HeldBytes | None) -> int:
    """How many entries a bookie lists of a ledger, at most: the striping's count for a closed ledger the metadata
    puts there, else as many as its bytes in the bookie's logs could hold (0 when neither tells)."""
    if ledger is not None and ledger.closed:
        return sum(ledger.expected())
    return 0 if held is None else (held.live + held.deleted) // MIN_STORED_ENTRY_BYTES


def compare(ledger: LedgerOnBookie | None, stored: np.ndarray | None) -> tuple[int | None, int | None, list[int] | None]:
    """expected_entries, missing_entries, short_fragments; None for an open ledger or what is not known."""
    if ledger is None or not ledger.closed:
        return None, None, None
    expected = ledger.expected()
    if stored is None:
        return sum(expected), None, None
    lacking = [want - have for want, have in zip(expected, ledger.held(stored))]
    return (sum(expected), sum(lacking),
            [index for (index, *_), short in zip(ledger.fragments, lacking) if short])


def read_bookie_ledgers(partition: BookiePartition):
    bookie = partition.bookie

    def unavailable(error: str):
        for ledger in partition.ledgers:
            yield (bookie, ledger.scope_id, ledger.ledger_id, True, compare(ledger, None)[0], None, None, None, None,
                   None, None, None, UNAVAILABLE, error)

    if not partition.registered:
        yield from unavailable(NOT_REGISTERED)
        return
    try:
        client = connections.worker_clients().bookie_client(bookie, partition.info)
        wait = partition.timeout + DESCRIBED_LEDGER_SECONDS * len(partition.ledgers)
        state = client.garbage_collection(ledger_details=True, timeout=wait) \
            if isinstance(client, BookieClient) else None
    except BKException as exc:
        yield from unavailable(f"{type(exc).__name__}: {exc}")
        return
    if state is None:
        held, gc_error = {}, NO_GC_STATE
    elif state.status != status.EOK:  # one of our bookies without a garbage collector
        held, gc_error = {}, f"garbage collection status: {status.name_of(state.status)} {state.message}"
    else:
        held, gc_error = held_bytes(state), None
    gc_passes = state.passes if gc_error is None else None
    # Ledgers whose bytes are here but whose metadata does not name this bookie: orphans, or copies left behind.
    unnamed = {key: None for key in held if partition.scope in (None, key[0])}
    entry_lists = EntryLister(client, partition.timeout)

    def rows(keys: list[tuple[int, int]], named: dict[tuple[int, int], LedgerOnBookie]):
        entries = [listed_at_most(named.get(key), held.get(key)) for key in keys]
        for key, stored in zip(keys, entry_lists(keys, entries)):
            ledger = named.get(key)
            if ledger is None and partition.known.get(key):  # closed, and the metadata puts none of it here
                ledger = LedgerOnBookie(*key, closed=True, ensemble_size=1, write_quorum=1)
            row_status, error = (PARTIAL, gc_error) if gc_error else (OK, None)
            if isinstance(stored, str):
                row_status, error, stored = UNAVAILABLE, "; ".join(filter(None, (stored, gc_error))), None
            expected, missing, short = compare(ledger, stored)
            if gc_error:
                live = deleted = at = None
            else:
                b = held.get(key, HeldBytes())
                live, deleted, at = b.live, b.deleted, b.deleted_at_pass
            yield (bookie, key[0], key[1], key in named or key in partition.known, expected,
                   len(stored) if stored is not None else None, missing, short, live, deleted, at, gc_passes,
                   row_status, error)

    # A chunk at a time: a bookie the metadata names in 100,000 ledgers is not held as 100,000 objects and lists.
    for chunk in chunks(partition.ledgers, LIST_CHUNK):
        named = {(ledger.scope_id, ledger.ledger_id): ledger for ledger in chunk}
        for key in named:
            unnamed.pop(key, None)
        yield from rows(list(named), named)
    for keys in chunks(unnamed, LIST_CHUNK):
        yield from rows(keys, {})


class BookieTableReader(DataSourceReader):
    """``table=entrylogs`` or ``table=bookie_ledgers``: one partition per bookie."""

    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def partitions(self):
        return plan(self.opts)

    def read(self, partition: BookiePartition):
        yield from read_partition(self.opts.table, partition)


def read_partition(table: str, partition: BookiePartition) -> Iterator[tuple]:
    """The rows of ``table`` from one bookie (on an executor)."""
    if table == "entrylogs":
        yield from read_entrylogs(partition)
    else:
        yield from read_bookie_ledgers(partition)
