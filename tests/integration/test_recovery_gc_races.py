"""Recoveries, replicators and the over-replicated GC meeting on one ledger (issue 29), with real
ZooKeeper and bookie processes. Each race is made to happen in the order that lost data before, by
holding one side at the right point (a held call in this process, or a bookie process held just after
its GC read the ledger's metadata), never by sleeping:

- a recovery's close, held while a replicator replaces a lost bookie of an earlier fragment, keeps
  that fix and every later fragment (it applies only its own change to the fresh metadata);
- a bookie's GC keeps the copy a manual recovery is making on it (the recovery holds the ledger's
  under-replication lock from its copy to its ensemble update);
- a GC that read the metadata before a worker finished keeps the worker's fresh replica (it deletes
  only under the lock, after reading the metadata again);
- a worker whose replacement dies right after acknowledging the copy leaves the ledger marked;
- a manual recovery and a worker on one ledger are serialized: no "NOT RECOVERED", no orphaned copy.
"""
from __future__ import annotations

import threading

import bookie.client.ledger_recovery as ledger_recovery
from bookie.client import BookKeeper
from bookie.client.bookkeeper_admin import BookKeeperAdmin
from bookie.client.ledger_fragment_replicator import LedgerFragmentReplicator
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerState
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.proto import bookkeeper_pb2 as pb
from bookie.replication.replication_worker import ReplicationSettings, ReplicationWorker
from tests.helpers.gc import NO_TIMED_PASS
from tests.helpers.held_bookie import restart_held
from tests.helpers.held_call import HeldCall, in_thread
from tests.helpers.replication import (CLIENT, assert_fully_replicated, assert_restored, holdings, marked, payloads,
                                       unregistered, write)
from tests.helpers.waiting import DEADLINE, wait_for

PW = b"pw"
# Every forced GC pass also looks for over-replicated ledgers; no pass runs on its own.
GC_EVERY_PASS = {"gcOverreplicatedLedgerWaitTime": 1, **NO_TIMED_PASS}
QUICK_RETRY = ReplicationSettings(rw_rereplicate_backoff_ms=100, lock_release_of_failed_ledger_grace_period_ms=500)


def closed_ledger_on(bk: BookKeeper, bookies: list[str], tag: str, entries: int = 20):
    """A closed ledger on ``bookies`` (E = WQ = AQ = their number) and what it holds."""
    handle = bk.create_ledger(len(bookies), len(bookies), len(bookies), bookies=bookies, password=PW)
    data = payloads(tag, entries)
    write(handle, data)
    handle.close()
    return handle.ledger_id, data


def lose(cluster, bk: BookKeeper, index: int) -> str:
    """SIGKILL bookie ``index`` and wait until it has left the registration; its id."""
    bookie = cluster.bookies[index].bookie_id
    cluster.kill_bookie(index)
    wait_for(unregistered(bk, bookie), f"{bookie} to leave the registration")
    return bookie


def held_copies(bk: BookKeeper, bookies: list[str], ledger: int) -> dict[str, list[int] | None]:
    """Bookie -> the entries of ``ledger`` it holds (None: none)."""
    return {b: entries for (b, _), entries in holdings(bk, bookies, [ledger]).items()}


def test_a_recoverys_close_keeps_a_replicators_fix_of_an_earlier_fragment_and_the_later_fragments(
        bk_cluster, monkeypatch):
    c, bk = bk_cluster(5, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    data = payloads("r", 20)
    writer = BookKeeper(c.metadata_service_uri, CLIENT)
    try:
        handle = writer.create_ledger(2, 2, 2, bookies=[b[0], b[1]], password=PW)
        ledger = handle.ledger_id
        write(handle, data[:10])
        c.kill_bookie(1)
        write(handle, data[10:15])  # bookie 1 fails: a fragment from entry 10
        c.start_bookie(1)  # back with its copies of entries 0..9
        c.kill_bookie(0)
        write(handle, data[15:])  # bookie 0 fails: a fragment from entry 15
    finally:
        writer.close()  # the writer is gone, its ledger still open
    assert [first for first, _ in bk.ledger_metadata(ledger).ensembles] == [0, 10, 15]
    wait_for(unregistered(bk, b[0]), f"{b[0]} to leave the registration")

    close = HeldCall(monkeypatch, ledger_recovery, "_close_recovered")
    recoverer = BookKeeper(c.metadata_service_uri, CLIENT)
    try:
        recovering = in_thread(lambda: recoverer.open_ledger(ledger, PW, recovery=True))
        close.wait_reached("the recovery to have re-added the tail, before its close")
        assert bk.ledger_metadata(ledger).state is LedgerState.IN_RECOVERY
        # A replicator replaces the lost bookie 0 in the fragments from 0 and 10 meanwhile.
        report = BookKeeperAdmin(bk).recover_bookie_data([b[0]], LedgerId(0, ledger))
        assert not report.failed, report.summary(False)
        assert [(r.first, r.last) for r in report.ledgers[0].fragments] == [(0, 9), (10, 14)]
        close.release()
        recovering.result(DEADLINE)
    finally:
        close.release()
        recoverer.close()
    md = bk.ledger_metadata(ledger)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 19
    assert [first for first, _ in md.ensembles] == [0, 10, 15], "the close dropped or rewrote fragments"
    assert not any(b[0] in ensemble for _, ensemble in md.ensembles), "the close put the lost bookie back"
    assert_fully_replicated(bk, ledger)
    with bk.open_ledger(ledger, PW, recovery=False) as reader:
        assert [e.payload for e in reader.read(0, 19)] == data


def test_gc_keeps_the_copy_a_manual_recovery_is_making(bk_cluster, monkeypatch):
    c, bk = bk_cluster(3, client_conf=CLIENT, **GC_EVERY_PASS)
    b = [x.bookie_id for x in c.bookies]
    ledger, data = closed_ledger_on(bk, b[:2], "m")
    lose(c, bk, 0)
    target = b[2]  # the only bookie outside the ensemble
    update = HeldCall(monkeypatch, LedgerFragmentReplicator, "_replace_ensemble")
    try:
        recovering = in_thread(lambda: BookKeeperAdmin(bk).recover_bookie_data([b[0]], LedgerId(0, ledger)))
        update.wait_reached("the recovery's copy, before its ensemble update")
        assert held_copies(bk, [target], ledger)[target] == list(range(20))
        client = bk.bookie_client(target)
        forced = client.garbage_collection(pb.GarbageCollectionRequest.FORCE).forcedPass
        wait_for(lambda: client.garbage_collection().passes >= forced, f"GC pass {forced} of {target}")
        assert held_copies(bk, [target], ledger)[target] == list(range(20)), \
            "the GC deleted the copy a recovery was making"
        update.release()
        report = recovering.result(DEADLINE)
    finally:
        update.release()
    assert not report.failed, report.summary(False)
    assert_restored(bk, {ledger: data}, b[0])


def test_a_gc_that_read_the_metadata_before_a_worker_finished_keeps_the_fresh_replica(
        bk_cluster, monkeypatch, tmp_path):
    c, bk = bk_cluster(3, client_conf=CLIENT, **GC_EVERY_PASS)
    b = [x.bookie_id for x in c.bookies]
    target = b[2]
    gc_read = restart_held(c, 2, tmp_path / "control", "gc-read-ledger")
    ledger, data = closed_ledger_on(bk, b[:2], "w")
    lose(c, bk, 0)
    manager = LedgerUnderreplicationManager(bk.store, "worker")
    manager.mark_ledger_underreplicated(ledger, [b[0]])
    worker = ReplicationWorker(bk, manager, QUICK_RETRY)
    update = HeldCall(monkeypatch, LedgerFragmentReplicator, "_replace_ensemble")
    released = False
    try:
        rereplicating = in_thread(lambda: worker.rereplicate_one(DEADLINE))
        update.wait_reached("the worker's copy, before its ensemble update")
        gc_read.arm(ledger)
        client = bk.bookie_client(target)
        forced = client.garbage_collection(pb.GarbageCollectionRequest.FORCE).forcedPass
        gc_read.wait_holding("the GC to have read the ledger's metadata (not naming the target yet)")
        update.release()
        assert rereplicating.result(DEADLINE) == LedgerId(0, ledger)
        assert ledger not in marked(bk.store) and not manager.is_ledger_being_replicated(ledger)
        gc_read.release()
        released = True
        wait_for(lambda: client.garbage_collection().passes >= forced, f"GC pass {forced} of {target}")
    finally:
        update.release()
        if not released:
            gc_read.release()
    assert held_copies(bk, [target], ledger)[target] == list(range(20)), "the GC deleted the worker's fresh replica"
    assert_restored(bk, {ledger: data}, b[0])


def test_a_replacement_lost_right_after_its_copy_leaves_the_ledger_marked_for_another_round(bk_cluster, monkeypatch):
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    ledger, data = closed_ledger_on(bk, b[:2], "d")
    lose(c, bk, 0)
    manager = LedgerUnderreplicationManager(bk.store, "worker")
    manager.mark_ledger_underreplicated(ledger, [b[0]])
    worker = ReplicationWorker(bk, manager, QUICK_RETRY)
    copied = HeldCall(monkeypatch, LedgerFragmentReplicator, "replicate", after=True)
    try:
        rereplicating = in_thread(lambda: worker.rereplicate_one(DEADLINE))
        copied.wait_reached("the worker's copy and ensemble update")
        target = next(x for x in b[2:] if any(x in e for _, e in bk.ledger_metadata(ledger).ensembles))
        lose(c, bk, b.index(target))  # acknowledged its copy, then died
        copied.release()
        assert rereplicating.result(DEADLINE) == LedgerId(0, ledger)
    finally:
        copied.release()
    assert ledger in marked(bk.store), "marked replicated though its new replica is gone"
    worker.start()  # the next rounds copy to the last bookie left
    try:
        wait_for(lambda: ledger not in marked(bk.store), f"ledger {ledger} to be replicated again")
    finally:
        worker.shutdown()
    assert_restored(bk, {ledger: data}, target)
    assert not any(b[0] in e for _, e in bk.ledger_metadata(ledger).ensembles)


def test_a_manual_recovery_waits_for_a_worker_on_the_same_ledger_and_orphans_no_copy(bk_cluster, monkeypatch):
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    ledger, data = closed_ledger_on(bk, b[:2], "s")
    lose(c, bk, 0)
    worker_bk = BookKeeper(c.metadata_service_uri, CLIENT)
    manager = LedgerUnderreplicationManager(worker_bk.store, "worker")
    manager.mark_ledger_underreplicated(ledger, [b[0]])
    worker = ReplicationWorker(worker_bk, manager, QUICK_RETRY)
    update = HeldCall(monkeypatch, LedgerFragmentReplicator, "_replace_ensemble")  # the worker's, the first
    asked = threading.Event()
    acquire = getattr(LedgerUnderreplicationManager, "acquire_underreplicated_ledger", None)

    def observed_acquire(self, *args, **kwargs):
        asked.set()
        return acquire(self, *args, **kwargs)

    monkeypatch.setattr(LedgerUnderreplicationManager, "acquire_underreplicated_ledger", observed_acquire,
                        raising=False)
    try:
        rereplicating = in_thread(lambda: worker.rereplicate_one(DEADLINE))
        update.wait_reached("the worker's copy, before its ensemble update")
        recovering = in_thread(lambda: BookKeeperAdmin(bk).recover_bookie_data([b[0]], LedgerId(0, ledger)))
        wait_for(lambda: asked.is_set() or recovering.done(), "the manual recovery to ask for the ledger's lock")
        update.release()
        assert rereplicating.result(DEADLINE) == LedgerId(0, ledger)
        report = recovering.result(DEADLINE)
    finally:
        update.release()
        worker_bk.close()
    assert not report.failed, report.summary(False)
    assert report.ledgers[0].fragments == [], "the manual recovery copied what the worker had copied"
    assert ledger not in marked(bk.store)
    assert_restored(bk, {ledger: data}, b[0])
    ensemble = {x for _, e in bk.ledger_metadata(ledger).ensembles for x in e}
    orphans = {x: held for x, held in held_copies(bk, b[1:], ledger).items() if held and x not in ensemble}
    assert not orphans, f"copies no ensemble names: {orphans}"
