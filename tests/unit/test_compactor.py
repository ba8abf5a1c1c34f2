"""Entry-log compaction: selection, throttle arithmetic, the recovery decision table, and compaction of
a bookie's storage in this process (copy, repoint, reads going on, a crash at each step rolled back or
forward by clean_up_and_recover)."""
from __future__ import annotations

import os

import pytest

from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager
from bookie.server.compaction_throttler import Throttler
from bookie.server.compactor import (STEPS, RecoveryStep, TransactionalEntryLogCompactor,
                                     compacted_name, compacting_name, logs_to_compact, recovery_plan)
from bookie.server.entry_log_metadata import EntryLogMetadata
from bookie.testing.deleted_ledgers import delete_and_measure
from tests.helpers.engine_entries import KEY, PASSWORD, write

HUGE = {"compactionRateByEntries": 10 ** 12, "compactionRateByBytes": 10 ** 15}


def meta(log_id: int, total: int, remaining: int, ledgers: int = 1) -> EntryLogMetadata:
    m = EntryLogMetadata(log_id, total, remaining)
    m.ledgers = {LedgerId(0, n): 1 for n in range(ledgers)}
    return m


# -- selection ----------------------------------------------------------------------------------------
def test_logs_under_the_threshold_are_compacted_emptiest_first():
    metas = [meta(1, 100, 50), meta(2, 100, 10), meta(3, 100, 79), meta(4, 100, 80), meta(5, 100, 10)]
    assert [m.entry_log_id for m in logs_to_compact(metas, 0.8)] == [2, 5, 1, 3]
    assert [m.entry_log_id for m in logs_to_compact(metas, 0.2)] == [2, 5]


def test_selection_skips_empty_logs_and_a_disabled_threshold():
    metas = [meta(1, 100, 0, ledgers=0), meta(2, 0, 0), meta(3, 100, 5)]
    assert [m.entry_log_id for m in logs_to_compact(metas, 0.5)] == [3]  # empty logs are GC's to delete
    assert logs_to_compact(metas, 0.0) == [] and logs_to_compact(metas, -1) == []


# -- throttle -----------------------------------------------------------------------------------------
class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_throttle_by_entries_waits_for_what_the_bucket_lacks():
    clock = FakeClock()
    t = Throttler(False, 1000, clock=clock, sleep=clock.sleep)
    t.acquire(1000, 10 ** 9)  # one second of budget is in the bucket; bytes do not count
    assert clock.slept == []
    t.acquire(500, 0)  # the bucket is empty: half a second
    assert clock.slept == [pytest.approx(0.5)]
    clock.now += 10  # idle time earns at most one second of budget
    t.acquire(1500, 0)
    assert clock.slept[-1] == pytest.approx(0.5)


def test_throttle_by_bytes_and_from_conf():
    clock = FakeClock()
    t = Throttler.from_conf({"isThrottleByBytes": True, "compactionRateByBytes": 1000000,
                             "compactionRateByEntries": 1}, clock=clock, sleep=clock.sleep)
    assert t.by_bytes and t.rate == 1000000
    t.acquire(10 ** 6, 3_000_000)  # entries do not count; 2 s of bytes over the bucket
    assert clock.slept == [pytest.approx(2.0)]
    assert Throttler.from_conf({"isThrottleByBytes": False, "compactionRateByEntries": 7,
                                "compactionRateByBytes": 1}).rate == 7
    with pytest.raises(ValueError):
        Throttler(False, 0)


# -- recovery decision table --------------------------------------------------------------------------
def test_recovery_plan_rolls_back_copies_and_forward_commits():
    names = ["3.log", "lastId", compacting_name(0x1f), compacted_name(0x20, 0x3), "a.log",
             compacted_name(0x21, 0x9), "x.log.compacting"]
    assert recovery_plan(names) == [
        RecoveryStep("roll_back", "1f.log.compacting", 0x1f),
        RecoveryStep("roll_forward", "20.log.3.compacted", 0x20, 0x3),
        RecoveryStep("roll_forward", "21.log.9.compacted", 0x21, 0x9),
    ]
    assert recovery_plan(["1.log", "2.log", "lastId"]) == []


# -- compaction of a bookie's storage -----------------------------------------------------------------
def fill(bookie, ledgers: int = 6, rounds: int = 20) -> dict[LedgerId, list[bytes]]:
    """Interleaved ledgers over several rolled logs."""
    written = {LedgerId(0, n): [] for n in range(1, ledgers + 1)}
    for r in range(rounds):
        for ledger, payloads in written.items():
            payloads += write(bookie, ledger, r * 3, 3, size=300)
    bookie.storage.entry_logger.roll()
    return written


def metas_after_deleting(bookie, dead: set[LedgerId]) -> list[EntryLogMetadata]:
    return delete_and_measure(bookie.storage, dead)


def check_all(bookie, written: dict[LedgerId, list[bytes]]) -> None:
    for ledger, payloads in written.items():
        digest = DigestManager(ledger, PASSWORD)
        for eid, payload in enumerate(payloads):
            assert digest.verify(bookie.read_entry(ledger, eid), eid)[1].tobytes() == payload
        blob, count, _ = bookie.read_entries(ledger, 0, len(payloads) - 1, max_bytes=1 << 30)
        assert count == len(payloads)


def files_of(bookie) -> list[str]:
    return sorted(os.listdir(os.path.join(bookie.ledger_dirs[0], "current")))


def test_compaction_copies_live_entries_and_reclaims_the_rest(make_bookie):
    bookie = make_bookie(entryLogSizeLimit=16 * 1024, **HUGE)
    written = fill(bookie)
    dead = {LedgerId(0, n) for n in (1, 3, 5)}
    metas = metas_after_deleting(bookie, dead)
    live = {ledger: p for ledger, p in written.items() if ledger not in dead}
    compactor = TransactionalEntryLogCompactor(bookie.storage, bookie.conf)
    chosen = logs_to_compact(metas, 0.8)
    assert len(chosen) == len(metas) >= 4
    before = sum(os.path.getsize(bookie.storage.entry_logger.path_of(m.entry_log_id)) for m in chosen)
    reclaimed = sum(compactor.compact(m) for m in chosen)
    compactor.drain()  # the last log's file work overlaps nothing more: wait for it, as a GC pass does
    assert before * 0.4 < reclaimed < before * 0.6  # half the ledgers, equal sizes
    assert not [n for n in files_of(bookie) if "compact" in n]
    assert not {m.entry_log_id for m in chosen} & set(bookie.storage.entry_logger.log_ids())
    check_all(bookie, live)
    # The new logs are finished logs: their ledgers maps hold exactly the live ledgers.
    logger = bookie.storage.entry_logger
    new_ids = [i for i in logger.log_ids() if i > max(m.entry_log_id for m in chosen) and i != logger.log_id]
    assert new_ids and all(set(logger.read_ledgers_map(i)) <= set(live) for i in new_ids)
    bookie.shutdown()
    again = make_bookie(entryLogSizeLimit=16 * 1024, **HUGE)  # the index was made durable
    check_all(again, live)


def test_the_first_log_is_compacted_although_striped_ledgers_leave_index_holes(make_bookie):
    """A bookie holds every other entry of a striped ledger: its index has empty slots (location 0) between
    them. Location 0 is not a record of log 0 (it lies in the log's header): log 0 compacts like any other."""
    bookie = make_bookie(entryLogSizeLimit=1 << 20, **HUGE)
    striped, dead = LedgerId(0, 1), LedgerId(0, 2)
    stripe = {e: write(bookie, striped, e, 1, size=300)[0] for e in range(0, 40, 2)}
    write(bookie, dead, 0, 40, size=300)
    bookie.storage.entry_logger.roll()
    (first,) = [m for m in metas_after_deleting(bookie, {dead}) if m.entry_log_id == 0]
    assert first.ledgers == {striped: first.remaining_size}
    compactor = TransactionalEntryLogCompactor(bookie.storage, bookie.conf)
    assert compactor.compact(first) > first.total_size // 2  # not skipped as "entries outside the log"
    compactor.drain()
    assert 0 not in bookie.storage.entry_logger.log_ids()
    digest = DigestManager(striped, PASSWORD)
    for eid, payload in stripe.items():
        assert digest.verify(bookie.read_entry(striped, eid), eid)[1].tobytes() == payload


def test_an_entry_written_again_during_compaction_keeps_its_newer_location(make_bookie):
    bookie = make_bookie(entryLogSizeLimit=16 * 1024, **HUGE)
    written = fill(bookie, ledgers=2, rounds=10)
    target = min(logs_to_compact(metas_after_deleting(bookie, set()), 1.01), key=lambda m: m.entry_log_id)
    ledger = next(iter(target.ledgers))
    cache = bookie.storage.cache
    eid = next(e for e in range(len(written[ledger])) if cache.get(ledger, e) >> 32 == target.entry_log_id)
    newer = os.urandom(300)

    class RewriteMidCopy(Throttler):
        def acquire(self, entries, nbytes):  # runs between the copy's windows: a recovery add arrives
            digest = DigestManager(ledger, PASSWORD)
            bookie.add_entries(ledger, KEY, digest.build_framed(eid, eid - 1, 0, [newer])[0], recovery=True).result(10)

    compactor = TransactionalEntryLogCompactor(bookie.storage, bookie.conf, RewriteMidCopy(False, 1))
    compactor.compact(target)
    compactor.drain()
    assert cache.get(ledger, eid) >> 32 == bookie.storage.entry_logger.log_id  # not the compacted copy
    written[ledger][eid] = newer
    check_all(bookie, written)


class Crash(BaseException):
    """Not an Exception: the compactor's clean-up of a failed copy must not run, as after a kill."""


def abandon(bookie) -> None:
    """Stop the bookie's threads as a kill would, without a checkpoint or finishing the entry log."""
    bookie.running = False
    bookie.dirs_monitor.shutdown()
    bookie.sync_thread.shutdown()
    for journal in bookie.journals:
        journal.shutdown()


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_each_step_is_rolled_back_or_forward(make_bookie, step):
    """The compactor stops at ``step`` (the process would be killed there; this one just abandons the
    bookie without a shutdown) and a new bookie on the same directories recovers at start."""
    settings = dict(entryLogSizeLimit=16 * 1024, **HUGE)
    bookie = make_bookie(**settings)
    written = fill(bookie, ledgers=4, rounds=12)
    dead = {LedgerId(0, 2), LedgerId(0, 4)}
    live = {ledger: p for ledger, p in written.items() if ledger not in dead}
    bookie.checkpoint()
    target = logs_to_compact(metas_after_deleting(bookie, dead), 0.8)[0]
    old_name = f"{target.entry_log_id:x}.log"

    class Stopping(TransactionalEntryLogCompactor):
        def _step(self, name):
            if name == step:
                raise Crash(name)

    stopping = Stopping(bookie.storage, bookie.conf)
    with pytest.raises(Crash):
        stopping.compact(target)
        stopping.drain()  # the steps after the index flush run on the finisher thread
    abandon(bookie)
    left = [n for n in files_of(bookie) if "compact" in n]
    expected = {"copying": ".compacting", "compacting_written": ".compacting", "done": None}.get(step, ".compacted")
    assert [n[n.rindex("."):] for n in left] == ([expected] if expected else [])
    after = make_bookie(**settings)  # TransactionalEntryLogCompactor.clean_up_and_recover at start
    names = files_of(after)
    assert not [n for n in names if n.endswith((".compacting", ".compacted"))]
    assert (old_name in names) == (step in ("copying", "compacting_written"))  # rolled back, or forward
    check_all(after, live)
