"""Compaction whatever the entry ids and whatever fails (issue 29, item 4): a ledger holding the largest
entry id the bookie accepts is compacted at the cost of the index pages it stores, and a log whose
compaction fails is skipped and reported by the GC pass, which compacts the others."""
from __future__ import annotations

import os

import pytest

from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager
from bookie.server.compactor import STEPS, TransactionalEntryLogCompactor, logs_to_compact
from bookie.server.garbage_collector import GarbageCollectorThread
from bookie.server.index import MAX_ENTRY_ID
from bookie.testing.deleted_ledgers import delete_and_measure
from tests.helpers.engine_entries import PASSWORD, write
from tests.unit.test_garbage_collector import FakeStore, finish_logs, logs_holding
from tests.unit.test_garbage_collector import write as write_big

HUGE = {"compactionRateByEntries": 10 ** 12, "compactionRateByBytes": 10 ** 15}
PROBES = 1000  # index-page probes one compaction may make here: hundreds of times what it needs


def limit_page_probes(cache) -> None:
    """Make the ledger cache refuse a walk over index pages that hold nothing: a compaction that probed
    the 134 million pages below entry 2^37-1 one by one (possible where memory is overcommitted and a
    1 TiB array is granted) fails here at once instead of holding the test for hours."""
    probe, count = cache._stored_page, [0]

    def bounded(ledger, page_no):
        count[0] += 1
        assert count[0] <= PROBES, "the compaction walks the index pages between the stored ones"
        return probe(ledger, page_no)

    cache._stored_page = bounded


def read_back(bookie, ledger: LedgerId, entries: dict[int, bytes]) -> None:
    digest = DigestManager(ledger, PASSWORD)
    for eid, payload in entries.items():
        assert digest.verify(bookie.read_entry(ledger, eid), eid)[1].tobytes() == payload


@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_a_ledger_holding_the_largest_entry_id_is_compacted_at_the_cost_of_its_stored_pages(make_bookie, cache):
    """Entries 0..39 and 2^37-1 of one ledger share a log with a deleted ledger. Compaction copies all 41,
    from index pages in the cache ("warm") or only in the index file after a restart ("cold"), loading a
    handful of pages: the last entry id's 134 million pages below it are never allocated or visited."""
    settings = dict(entryLogSizeLimit=1 << 20, pageLimit=64, **HUGE)
    bookie = make_bookie(**settings)
    kept, dead = LedgerId(0, 1), LedgerId(0, 2)
    entries = dict(enumerate(write(bookie, kept, 0, 40, size=300)))
    write(bookie, dead, 0, 40, size=300)
    entries[MAX_ENTRY_ID] = write(bookie, kept, MAX_ENTRY_ID, 1, size=300)[0]
    bookie.storage.entry_logger.roll()
    if cache == "cold":
        bookie.checkpoint()
        bookie.shutdown()
        bookie = make_bookie(**settings)
    assert bookie.storage.descriptor(kept).last_entry_id == MAX_ENTRY_ID
    (target,) = [m for m in logs_to_compact(delete_and_measure(bookie.storage, {dead}), 0.8) if kept in m.ledgers]
    storage = bookie.storage
    limit_page_probes(storage.cache)
    before = storage.cache.pages_loaded

    compactor = TransactionalEntryLogCompactor(storage, bookie.conf)
    assert compactor.compact(target) > target.total_size // 3  # the deleted ledger's half is given back
    compactor.drain()

    # Two pages of the ledger hold entries (and a page sharing a file-system block with one of them may be
    # read); every page up to the last id would be 134 million.
    assert storage.cache.pages_loaded - before <= 16
    logger = storage.entry_logger
    assert target.entry_log_id not in logger.log_ids()
    (new_id,) = {storage.cache.get(kept, eid) >> 32 for eid in entries}
    assert new_id != target.entry_log_id and logger.read_ledgers_map(new_id) == {kept: target.ledgers[kept]}
    read_back(bookie, kept, entries)
    bookie.shutdown()
    read_back(make_bookie(**settings), kept, entries)  # the repointed index was flushed


KEPT_ENTRIES = {eid: bytes([eid]) * 900 for eid in range(6)}  # what tests.unit.test_garbage_collector.write writes


def half_dead_logs(make_bookie):
    """A bookie whose finished logs each hold entries of a ledger its metadata store has and of one it
    no longer has, and its GC thread (not started: a test runs its passes) with the bookie's compactor.
    Returns the bookie, the thread, the kept ledger and the logs holding both (compacted by a major pass)."""
    bookie = make_bookie(entryLogSizeLimit=4096, bookieId="127.0.0.1:3181", **HUGE)
    store = FakeStore()
    gc = GarbageCollectorThread(bookie.conf, bookie.storage, store, bookie.conf.bookie_id, bookie.checkpoint)
    gc.compactor = bookie.compactor
    kept, dead = LedgerId(0, 1), LedgerId(0, 2)
    store.add(kept)
    for _ in KEPT_ENTRIES:  # with 4 KiB logs, three entries a log: each finished log holds both ledgers
        write_big(bookie, kept, 1, 900)
        write_big(bookie, dead, 1, 900)
    finish_logs(bookie)
    candidates = sorted(logs_holding(bookie, kept) & logs_holding(bookie, dead))
    assert len(candidates) >= 3
    return bookie, gc, kept, candidates


def test_a_log_whose_compaction_fails_is_skipped_and_reported_and_the_others_are_compacted(make_bookie, monkeypatch):
    """Any error of one log's compaction (here a MemoryError, as a dense index lookup gave) skips that log
    only: reported in the GC status with the error named, its file and entries kept, the other candidate
    logs of the pass compacted; the next pass compacts it."""
    bookie, gc, kept, candidates = half_dead_logs(make_bookie)
    failing = candidates[1]
    logger = bookie.storage.entry_logger
    failing_path = logger.path_of(failing)
    live_entries = bookie.compactor._live_entries

    def fails_for_one_log(old_id, ledgers):
        if old_id == failing:
            raise MemoryError("Unable to allocate 1.00 TiB for an array")
        return live_entries(old_id, ledgers)

    monkeypatch.setattr(bookie.compactor, "_live_entries", fails_for_one_log)
    gc.force_gc(major=True)
    gc.run_once()

    status = gc.status()
    assert [(s.entry_log_id, s.path) for s in status.skipped] == [(failing, failing_path)]
    assert "MemoryError" in status.skipped[0].reason and "1.00 TiB" in status.skipped[0].reason
    assert status.major_compaction_count == len(candidates) - 1 and not status.major_compacting
    assert set(logger.log_ids()) & set(candidates) == {failing} and os.path.exists(failing_path)
    assert not [n for n in os.listdir(os.path.dirname(failing_path)) if "compact" in n]
    assert not bookie.storage.ledger_exists(LedgerId(0, 2))
    read_back(bookie, kept, KEPT_ENTRIES)

    monkeypatch.undo()  # the next pass compacts it
    gc.force_gc(major=True)
    gc.run_once()
    assert gc.status().skipped == [] and failing not in logger.log_ids()
    read_back(bookie, kept, KEPT_ENTRIES)


@pytest.mark.parametrize("which", ["first", "last"])
@pytest.mark.parametrize("step", STEPS)
def test_a_compaction_failing_at_any_step_is_skipped_then_rolled_back_or_forward(make_bookie, step, which):
    """An error (not a crash: the bookie goes on) at each step of the first or last log a pass compacts:
    the pass reports one log skipped, every entry stays readable, and the next pass's clean-up rolls the
    copy back or forward and compacts what is left: no compaction file and no old log remain, nothing is
    reported (a log recovery removed is not taken for a missing one)."""
    bookie, gc, kept, candidates = half_dead_logs(make_bookie)
    logger = bookie.storage.entry_logger
    step_of, seen = bookie.compactor._step, [0]
    fail_at = 1 if which == "first" else len(candidates)

    def failing_step(name):
        if name == step:
            seen[0] += 1
            if seen[0] == fail_at:
                raise RuntimeError(f"injected at step {name}")
        step_of(name)

    bookie.compactor._step = failing_step
    gc.force_gc(major=True)
    gc.run_once()
    (skipped,) = gc.status().skipped
    assert skipped.entry_log_id in candidates and f"RuntimeError: injected at step {step}" in skipped.reason
    read_back(bookie, kept, KEPT_ENTRIES)

    del bookie.compactor._step
    gc.force_gc(major=True)
    gc.run_once()
    assert gc.status().skipped == []
    assert not [n for n in os.listdir(os.path.join(bookie.ledger_dirs[0], "current")) if "compact" in n]
    assert not set(logger.log_ids()) & set(candidates)
    read_back(bookie, kept, KEPT_ENTRIES)
