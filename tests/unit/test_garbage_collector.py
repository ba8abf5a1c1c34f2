"""The garbage collector on an in-process engine, against an in-memory metadata store whose listings
a test controls (ranges, gaps, a listing that fails part-way, a ledger visible to reads only)."""
from __future__ import annotations

import os
import struct

import pytest

from bookie.exceptions import (BKMetadataVersionException, BKNoSuchLedgerExistsOnMetadataServerException,
                               BKZKConnectionLossException, EntryLogCorruptedException, NoLedgerException)
from bookie.ledger_id import MAX_ID, LedgerId
from bookie.meta import layout
from bookie.meta.ledger_metadata import LedgerState
from bookie.meta.metadata_store import LedgerRange, Versioned
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server.entry_log_metadata import extract_entry_log_metadata
from bookie.server.entry_log_format import LOG_HEADER_SIZE, encode_log_header
from bookie.server.garbage_collector import GarbageCollectorThread
from bookie.server.ledger_dirs_monitor import disk_usage
from tests.helpers.sample_metadata import metadata

KEY = generate_master_key(b"pw")
LEAF = 10000  # ids per leaf range, as the hierarchical layout's


class FakeStore:
    """The metadata store GC reads: ledgers in leaf ranges of LEAF ids (only non-empty leaves exist)."""

    def __init__(self):
        self.ledgers: dict[LedgerId, Versioned] = {}
        self.hidden: set[LedgerId] = set()  # readable but missing from listings (a lagging listing)
        self.fail_after: int | None = None  # ranges listed before ConnectionLoss
        self.nodes: set[str] = set()
        self.created: list[str] = []
        self.syncs = 0

    def add(self, ledger: LedgerId, **changes) -> None:
        self.ledgers[ledger] = Versioned(metadata(**changes), 0)

    def sync(self) -> None:
        self.syncs += 1

    def scopes(self) -> list[int]:
        return sorted({s for s, _ in self.ledgers} - {0})

    def ledger_ranges(self, scope_id: int = 0):
        leaves: dict[int, set[int]] = {}
        for scope, lid in self.ledgers:
            if scope == scope_id and LedgerId(scope, lid) not in self.hidden:
                leaves.setdefault(lid // LEAF, set()).add(lid)
        for n, leaf in enumerate(sorted(leaves)):
            if self.fail_after is not None and n >= self.fail_after:
                raise BKZKConnectionLossException("listing failed: ConnectionLoss")
            yield LedgerRange(scope_id, leaf * LEAF, leaf * LEAF + LEAF - 1, frozenset(leaves[leaf]))

    def read_ledger(self, ledger: LedgerId) -> Versioned:
        if ledger not in self.ledgers:
            raise BKNoSuchLedgerExistsOnMetadataServerException(f"no ledger {ledger}")
        return self.ledgers[ledger]

    def read_node(self, path: str):
        return Versioned(b"", 0) if path in self.nodes else None

    def create_node(self, path: str, data: bytes, ephemeral: bool = False) -> str:
        """The under-replication layout and locks the over-replication check creates."""
        if path in self.nodes:
            raise BKMetadataVersionException(f"{path} exists already")
        self.nodes.add(path)
        self.created.append(path)
        return path

    def delete_node(self, path: str) -> bool:
        found = path in self.nodes
        self.nodes.discard(path)
        return found


@pytest.fixture
def engine(make_bookie):
    def make(**overrides):
        settings = {"entryLogSizeLimit": 4096, "bookieId": "127.0.0.1:3181", **overrides}
        bookie = make_bookie(**settings)
        store = FakeStore()
        gc = GarbageCollectorThread(bookie.conf, bookie.storage, store, bookie.conf.bookie_id, bookie.checkpoint)
        return bookie, store, gc
    return make


def write(bookie, ledger: LedgerId, count: int = 3, size: int = 1500) -> None:
    """``count`` entries of ``size`` bytes: with a 4 KiB entryLogSizeLimit, a log or two per ledger."""
    digest = DigestManager(ledger, b"pw")
    first = bookie.storage.ledger_exists(ledger) and bookie.storage.require(ledger).last_entry_id + 1 or 0
    for eid in range(first, first + count):
        bookie.add_entries(ledger, KEY, digest.build_framed(eid, eid - 1, 0, [bytes([eid % 256]) * size])[0]).result(10)


def finish_logs(bookie) -> None:
    """Roll the current log, so every log written so far is finished (GC leaves the current one alone),
    then checkpoint: the rolled log is fsynced and its header points at its ledgers map."""
    bookie.storage.entry_logger.roll()
    bookie.checkpoint()


def logs_holding(bookie, ledger: LedgerId) -> set[int]:
    logger = bookie.storage.entry_logger
    return {i for i in logger.log_ids() if i != logger.log_id and ledger in (logger.read_ledgers_map(i) or {})}


def test_a_ledger_gone_from_the_metadata_is_deleted_and_its_logs_removed(engine):
    bookie, store, gc = engine()
    live, dead = LedgerId(0, 1), LedgerId(0, 2)
    store.add(live)
    write(bookie, live)
    finish_logs(bookie)
    write(bookie, dead)
    finish_logs(bookie)
    dead_logs = logs_holding(bookie, dead) - logs_holding(bookie, live)
    paths = {i: bookie.storage.entry_logger.path_of(i) for i in dead_logs}
    assert dead_logs
    allocated = sum(os.stat(p).st_blocks * 512 for p in paths.values())

    gc.run_once()

    status = gc.status()
    assert status.passes == 1 and status.ledgers_deleted == 1 and status.entry_logs_deleted == len(dead_logs)
    assert status.bytes_reclaimed == allocated and store.syncs == 1
    assert not any(os.path.exists(p) for p in paths.values())
    assert not bookie.storage.ledger_exists(dead)
    with pytest.raises(NoLedgerException):
        bookie.read_entry(dead, 0)
    assert bookie.read_entry(live, 2)
    assert {u.entry_log_id for u in status.entry_logs} == logs_holding(bookie, live)
    assert all(u.usage == 1.0 and u.ledger_count == 1 for u in status.entry_logs)
    assert status.last_pass_start_ms > 0 and not status.pass_running and status.skipped == []


def test_a_listing_that_fails_part_way_deletes_nothing(engine):
    bookie, store, gc = engine()
    ledgers = [LedgerId(0, 5), LedgerId(0, 3 * LEAF + 1), LedgerId(0, 7 * LEAF)]
    for ledger in ledgers:
        store.add(ledger)
        write(bookie, ledger, 1)
    orphan = LedgerId(0, 9 * LEAF)  # really deleted: the pass would delete it on a full listing
    write(bookie, orphan, 1)
    store.fail_after = 1  # the second range fails: ledgers 30001 and 70000 were never seen
    gc.run_once()
    assert all(bookie.storage.ledger_exists(ledger) for ledger in [*ledgers, orphan])
    assert gc.status().ledgers_deleted == 0 and gc.status().passes == 1
    store.fail_after = None
    gc.run_once()
    assert [ledger for ledger in [*ledgers, orphan] if not bookie.storage.ledger_exists(ledger)] == [orphan]


def test_gaps_between_ranges_and_ids_past_the_last_range_are_compared(engine):
    bookie, store, gc = engine()
    kept = [LedgerId(0, 5), LedgerId(0, 2 * LEAF + 3), LedgerId(7, 4)]
    gone = [LedgerId(0, 6),  # in a listed range, missing from it
            LedgerId(0, LEAF + 1),  # in a range with no node at all (between two ranges)
            LedgerId(0, MAX_ID),  # past the last range
            LedgerId(7, 5),  # a scope's ledger missing from its range
            LedgerId(9, 1)]  # a scope with no ranges at all
    for ledger in kept:
        store.add(ledger)
    for ledger in kept + gone:
        write(bookie, ledger, 1, 100)
    gc.run_once()
    assert [ledger for ledger in kept + gone if bookie.storage.ledger_exists(ledger)] == kept
    assert gc.status().ledgers_deleted == len(gone)


@pytest.mark.parametrize("verify", [False, True])
def test_verify_metadata_on_gc(engine, verify):
    bookie, store, gc = engine(verifyMetadataOnGC=verify)
    lagging, gone = LedgerId(0, 1), LedgerId(0, 2)
    store.add(lagging)
    store.hidden.add(lagging)  # the listing does not show it, a read of it does
    write(bookie, lagging, 1, 100)
    write(bookie, gone, 1, 100)
    gc.run_once()
    assert not bookie.storage.ledger_exists(gone)
    assert bookie.storage.ledger_exists(lagging) == verify


def test_over_replicated_only_closed_and_absent_from_every_ensemble(engine):
    bookie, store, gc = engine(gcOverreplicatedLedgerWaitTime=1)
    me, other = "127.0.0.1:3181", ("127.0.0.1:1", "127.0.0.1:2")
    closed = dict(state=LedgerState.CLOSED, last_entry_id=9)
    cases = {
        LedgerId(0, 1): (dict(closed, ensembles=((0, other),)), False),  # moved away: deleted
        LedgerId(0, 2): (dict(ensembles=((0, other),)), True),  # OPEN: kept
        LedgerId(0, 3): (dict(closed, ensembles=((0, (me, *other)), (5, other))), True),  # in an older ensemble
        LedgerId(0, 4): (dict(closed, ensembles=((0, (me, *other)),)), True),  # this bookie holds it
        LedgerId(0, 5): (dict(closed, ensembles=((0, other),)), True),  # marked under-replicated
        LedgerId(0, 6): (dict(closed, ensembles=((0, other),)), True),  # a worker is replicating it
    }
    store.nodes |= {layout.under_replicated_ledger_path(5), layout.under_replication_lock_path(6)}
    for ledger, (changes, _) in cases.items():
        store.add(ledger, **changes)
        write(bookie, ledger, 1, 100)
    gc.run_once()
    assert {ledger: bookie.storage.ledger_exists(ledger) for ledger in cases} == {
        ledger: stays for ledger, (_, stays) in cases.items()}
    # Deleted under its replication lock, released afterwards; the worker's lock is left alone.
    assert layout.under_replication_lock_path(1) in store.created
    assert layout.under_replication_lock_path(1) not in store.nodes
    assert layout.under_replication_lock_path(6) in store.nodes
    assert layout.under_replicated_ledger_path(5) == "underreplication/ledgers/0000/0000/0000/0005/urL0000000005"


def test_over_replicated_check_waits_for_its_interval(engine):
    bookie, store, gc = engine()  # gcOverreplicatedLedgerWaitTime: a day
    ledger = LedgerId(0, 1)
    store.add(ledger, state=LedgerState.CLOSED, ensembles=((0, ("127.0.0.1:1",)),))
    write(bookie, ledger, 1, 100)
    gc.run_once()
    assert bookie.storage.ledger_exists(ledger)


def test_over_replicated_check_is_off_at_zero(engine):
    bookie, store, gc = engine(gcOverreplicatedLedgerWaitTime=0)  # BookKeeper: enabled only when > 0
    ledger = LedgerId(0, 1)
    store.add(ledger, state=LedgerState.CLOSED, ensembles=((0, ("127.0.0.1:1",)),))
    write(bookie, ledger, 1, 100)
    gc.run_once()
    gc.run_once()
    assert bookie.storage.ledger_exists(ledger)


def test_a_corrupt_log_is_skipped_and_reported_and_the_others_collected(engine):
    bookie, store, gc = engine()
    dead = LedgerId(0, 2)
    write(bookie, dead, 6)
    finish_logs(bookie)
    logger = bookie.storage.entry_logger
    logs = [i for i in logger.log_ids() if i != logger.log_id]
    assert len(logs) >= 3
    bad_header, bad_map = logs[0], logs[1]
    with open(logger.path_of(bad_header), "r+b") as f:  # the BKLO magic overwritten
        f.write(b"XXXX")
    with open(logger.path_of(bad_map), "r+b") as f:  # the ledgers map points past the end of the file
        f.seek(8)
        f.write(struct.pack(">q", 1 << 40))
    gc.run_once()
    skipped = {s.entry_log_id: s for s in gc.status().skipped}
    assert set(skipped) == {bad_header, bad_map}
    assert "bad header" in skipped[bad_header].reason and skipped[bad_header].path == logger.path_of(bad_header)
    assert "impossible header" in skipped[bad_map].reason
    assert set(logger.log_ids()) == {bad_header, bad_map, logger.log_id}  # the others were removed
    assert all(os.path.exists(s.path) for s in skipped.values())
    assert gc.status().entry_logs_deleted == len(logs) - 2


def write_unfinished_log(path: str, records: bytes, tail: bytes = b"") -> None:
    with open(path, "wb") as f:
        f.write(encode_log_header() + records + tail)


def framed(ledger: LedgerId, entry_id: int, size: int = 100) -> bytes:
    return DigestManager(ledger, b"pw").build_framed(entry_id, entry_id - 1, 0, [b"x" * size])[0]


def test_an_unfinished_log_is_scanned_and_its_torn_tail_is_not_corruption(tmp_path):
    path = str(tmp_path / "1.log")
    a, b = LedgerId(0, 1), LedgerId(3, 4)
    records = framed(a, 0) + framed(b, 0) + framed(a, 1)
    write_unfinished_log(path, records)
    meta = extract_entry_log_metadata(1, path, 1 << 20)
    assert meta.ledgers == {a: len(framed(a, 0)) * 2, b: len(framed(b, 0))}
    assert meta.total_size == len(records)
    write_unfinished_log(path, records, framed(a, 2)[:-30])  # the last record cut short by the crash
    assert extract_entry_log_metadata(1, path, 1 << 20).ledgers == meta.ledgers
    write_unfinished_log(path, records, b"\0" * 5000)  # written no further
    assert extract_entry_log_metadata(1, path, 1 << 20).ledgers == meta.ledgers
    open(path, "wb").close()  # created, then the crash
    assert extract_entry_log_metadata(1, path, 1 << 20).is_empty


@pytest.mark.parametrize("damage, reason", [
    (struct.pack(">i", -7) + b"\1" * 40, "impossible record size -7"),
    (struct.pack(">i", 0) + b"\0" * 64 + framed(LedgerId(0, 1), 9), "impossible record size 0"),
    (struct.pack(">i", 1 << 30) + b"\1" * 40, "impossible record size"),
])
def test_a_torn_record_in_the_middle_is_corruption(tmp_path, damage, reason):
    path = str(tmp_path / "1.log")
    write_unfinished_log(path, framed(LedgerId(0, 1), 0), damage + framed(LedgerId(0, 1), 1))
    with pytest.raises(EntryLogCorruptedException, match=reason) as err:
        extract_entry_log_metadata(1, path, 1 << 20)
    assert path in str(err.value) and str(LOG_HEADER_SIZE + len(framed(LedgerId(0, 1), 0))) in str(err.value)


def test_a_ledgers_map_that_does_not_parse_is_corruption(engine):
    bookie, _, _ = engine()
    write(bookie, LedgerId(0, 1), 1, 100)
    finish_logs(bookie)
    logger = bookie.storage.entry_logger
    log_id = min(logger.log_ids())
    path = logger.path_of(log_id)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 3)
    with pytest.raises(EntryLogCorruptedException, match="ledgers map at offset .* does not parse"):
        extract_entry_log_metadata(log_id, path, 1 << 20)


def test_metadata_is_kept_across_passes(engine, monkeypatch):
    bookie, store, gc = engine()
    live = LedgerId(0, 1)
    store.add(live)
    write(bookie, live)
    finish_logs(bookie)
    gc.run_once()
    known = dict(gc.entry_log_meta)
    assert known
    scanned = []
    monkeypatch.setattr("bookie.server.garbage_collector.extract_entry_log_metadata",
                        lambda *args: scanned.append(args) or extract_entry_log_metadata(*args))
    gc.run_once()
    assert scanned == [] and gc.entry_log_meta.keys() == known.keys()


def test_a_read_only_bookie_still_collects_and_is_writable_when_space_comes_back(engine):
    bookie, store, gc = engine()
    bookie.garbage_collector = gc  # as a bookie with a metadata store has it (disk events reach it)
    dead = LedgerId(0, 2)
    write(bookie, dead, 4)
    finish_logs(bookie)
    usage = disk_usage(bookie.ledger_dirs[0])
    bookie.conf.set("diskUsageThreshold", max(0.0, usage - 0.05))  # the real disk is now "full"
    assert bookie.dirs_monitor.check() and bookie.read_only
    status = gc.status()
    assert status.major_compaction_suspended and status.minor_compaction_suspended  # isForceGCAllowWhenNoSpace=false
    gc.run_once()
    assert not bookie.storage.ledger_exists(dead) and gc.status().entry_logs_deleted > 0
    bookie.conf.set("diskUsageThreshold", min(1.0, usage + 0.05))
    assert not bookie.dirs_monitor.check() and not bookie.read_only
    assert not gc.status().major_compaction_suspended and not gc.status().minor_compaction_suspended


def test_force_gc_allowed_when_no_space_forces_every_pass(engine):
    bookie, store, gc = engine(isForceGCAllowWhenNoSpace=True)
    bookie.garbage_collector = gc
    usage = disk_usage(bookie.ledger_dirs[0])
    bookie.conf.set("diskUsageThreshold", max(0.0, usage - 0.05))
    assert bookie.dirs_monitor.check()
    assert not gc.status().major_compaction_suspended
    gc.run_once()
    assert gc.status().force_compacting
    bookie.conf.set("diskUsageThreshold", min(1.0, usage + 0.05))
    assert not bookie.dirs_monitor.check()
    gc.run_once()
    assert not gc.status().force_compacting


def test_force_gc_returns_a_pass_that_starts_after_it(engine):
    bookie, store, gc = engine(gcWaitTime=3600000)
    dead = LedgerId(0, 2)
    write(bookie, dead, 1, 100)
    gc.start()
    try:
        target = gc.force_gc(major=True)
        assert target == 1
        assert gc.wait_for_pass(target, timeout=60)
        assert not bookie.storage.ledger_exists(dead)
        gc.suspend_major_gc()
        assert gc.status().major_compaction_suspended and not gc.status().minor_compaction_suspended
        gc.resume_major_gc()
        assert not gc.status().major_compaction_suspended
    finally:
        gc.shutdown()


class RollsBeforeListing:
    """The bookie's entry logger, rolled once while GC looks at which logs exist (after it read which
    one is being written, or just before it lists them): the moment a roll ran into in CI, when a log
    then being written was described from a scan and GC tried to remove it."""

    def __init__(self, logger):
        self._logger, self._rolled = logger, False

    def _roll_once(self) -> None:
        if not self._rolled:
            self._rolled = True
            self._logger.roll()

    @property
    def log_id(self) -> int:
        current = self._logger.log_id
        self._roll_once()  # right after the current log was read: a listing now holds a newer one
        return current

    def finished_log_ids(self) -> list[int]:
        self._roll_once()
        return self._logger.finished_log_ids()

    def __getattr__(self, name):
        return getattr(self._logger, name)


def test_a_log_rolled_in_while_gc_lists_the_logs_is_never_described_or_removed(engine):
    bookie, store, gc = engine()
    gone, kept = LedgerId(0, 1), LedgerId(0, 2)
    for ledger in (gone, kept):
        write(bookie, ledger)
    store.add(kept)
    real = bookie.storage.entry_logger
    bookie.storage.entry_logger = RollsBeforeListing(real)
    try:
        gc.run_once()
    finally:
        bookie.storage.entry_logger = real
    assert gc.status().passes == 1, "the pass failed"
    assert real.log_id not in gc.entry_log_meta  # the log being written is GC's only once finished
    assert bookie.storage.ledger_exists(kept) and not bookie.storage.ledger_exists(gone)
