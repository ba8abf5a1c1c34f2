"""Re-replication end to end (real ZooKeeper, real bookie processes): a bookie SIGKILLed holding
ledgers striped and not, with several fragments, marked by hand; replication workers in the test
process bring each back to full replication, byte for byte; two workers never copy one ledger at once;
a write-quorum-1 ledger is reported unrecoverable once; an empty and a deleted ledger leave the list;
an open ledger whose writer is alive is left alone through the grace period."""
from __future__ import annotations


import pytest

from bookie.client import BookKeeper
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.client.ledger_checker import LedgerChecker
from bookie.client.ledger_fragment_replicator import LedgerFragmentReplicator
from bookie.exceptions import BKMetadataVersionException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerState
from bookie.meta.ledger_underreplication_manager import FAILED, UNRECOVERABLE, LedgerUnderreplicationManager
from bookie.proto import status
from bookie.replication.replication_worker import ReplicationSettings, ReplicationWorker
from tests.helpers.replication import CLIENT, Workers, assert_fully_replicated, payloads, write
from tests.helpers.waiting import wait_for

def closed_ledger_then_lost_bookie(bk_cluster, num_bookies: int, tag: str, entries: int = 20):
    """A cluster, a closed ledger (E 3, WQ 2) of ``entries`` entries on bookies 0-2, then bookie 0
    SIGKILLed: (cluster, client, bookie ids, ledger handle, payloads)."""
    cluster, bk = bk_cluster(num_bookies, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    ledger = bk.create_ledger(3, 2, 2, bookies=b[:3])
    data = payloads(tag, entries)
    write(ledger, data)
    ledger.close()
    cluster.kill_bookie(0)
    return cluster, bk, b, ledger, data


def test_a_lost_bookies_ledgers_come_back(bk_cluster):
    cluster, bk = bk_cluster(5, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    written = {}
    # Striped (E 3 > WQ 2), three fragments: b1 dies mid-write (replaced), comes back; b0 in every one.
    striped = bk.create_ledger(3, 2, 2, bookies=[b[0], b[1], b[2]], password=b"pw")
    written[striped.ledger_id] = payloads("s", 60)
    write(striped, written[striped.ledger_id][:30])
    cluster.kill_bookie(1)
    write(striped, written[striped.ledger_id][30:60])
    cluster.start_bookie(1)
    striped.close()
    assert len(bk.ledger_metadata(striped.ledger_id).ensembles) >= 2
    assert all(b[0] in ens for _, ens in bk.ledger_metadata(striped.ledger_id).ensembles)
    plain = bk.create_ledger(3, 3, 2, bookies=[b[0], b[2], b[3]], password=b"pw")
    written[plain.ledger_id] = payloads("p", 40)
    write(plain, written[plain.ledger_id])
    plain.close()
    single = bk.create_ledger(2, 1, 1, bookies=[b[0], b[2]])  # write quorum 1: b0's entries have no other copy
    write(single, payloads("w", 10))
    single.close()
    empty = bk.create_ledger(3, 2, 2, bookies=[b[0], b[1], b[2]])
    empty.close()
    deleted = bk.create_ledger(3, 2, 2, bookies=[b[0], b[1], b[2]])
    write(deleted, payloads("d", 5))
    deleted.close()

    cluster.kill_bookie(0)
    auditor = LedgerUnderreplicationManager(bk.store, "test-auditor")
    for handle in (striped, plain, single, empty, deleted):
        auditor.mark_ledger_underreplicated(handle.ledger_id, [b[0]])
    bk.delete_ledger(deleted.ledger_id)

    workers = Workers(cluster.metadata_service_uri, 2, ReplicationSettings(rw_rereplicate_backoff_ms=200)).start()
    try:
        wait_for(lambda: [u.ledger for u in auditor.list_underreplicated()] == [single.ledger]
                 and auditor.get_state(single.ledger_id) is not None
                 and auditor.get_state(single.ledger_id).state == UNRECOVERABLE,
                 "every recoverable ledger to leave the list and the write-quorum-1 one to be unrecoverable")
        state = auditor.get_state(single.ledger_id)
        # b0 is index 0 of [b0, b2] with write quorum 1: it alone held the even entries 0..8.
        assert "no surviving replica" in state.reason and (state.details["first"], state.details["last"]) == (0, 8)
        # Reported once, and not taken again: another round finds nothing to lock.
        assert workers.workers[0].rereplicate_one(timeout=0.5) is None
        assert workers.unrecoverable_reports == [single.ledger]
        assert workers.overlaps == []
    finally:
        workers.stop()

    for ledger_id, data in written.items():
        md = bk.ledger_metadata(ledger_id)
        assert all(b[0] not in ensemble for _, ensemble in md.ensembles)
        assert_fully_replicated(bk, ledger_id)
        with bk.open_ledger(ledger_id, b"pw") as reader:
            assert [e.payload for e in reader.read(0, len(data) - 1)] == data
    assert b[0] not in bk.ledger_metadata(empty.ledger_id).last_ensemble


def test_a_live_writers_open_ledger_is_not_fenced_within_the_grace_period(bk_cluster):
    cluster, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    writer = bk.create_ledger(3, 2, 2, bookies=[b[0], b[1], b[2]])
    write(writer, payloads("o", 20))
    cluster.kill_bookie(0)
    manager = LedgerUnderreplicationManager(bk.store, "auditor")
    manager.mark_ledger_underreplicated(writer.ledger_id, [b[0]])
    worker_bk = BookKeeper(cluster.metadata_service_uri, CLIENT)
    worker = ReplicationWorker(worker_bk, LedgerUnderreplicationManager(worker_bk.store, "w"),
                               ReplicationSettings(open_ledger_rereplication_grace_period_ms=600_000))
    try:
        assert worker.rereplicate_one(timeout=30) == writer.ledger
        state = manager.get_state(writer.ledger_id)
        assert state.state == "waiting-grace-period"
        assert manager.lock_holder(writer.ledger_id) == "w"  # kept through the grace period
        assert bk.ledger_metadata(writer.ledger_id).state is LedgerState.OPEN
        # The writer is alive: its next appends replace the dead bookie and are acknowledged.
        write(writer, payloads("o2", 10))
        assert bk.ledger_metadata(writer.ledger_id).state is LedgerState.OPEN
        worker.shutdown()  # releases the held lock
        # Its earlier fragment is closed now (the writer moved on): copied without fencing.
        worker = ReplicationWorker(worker_bk, LedgerUnderreplicationManager(worker_bk.store, "w2"))
        assert worker.rereplicate_one(timeout=30) == writer.ledger
        assert manager.get_underreplicated(writer.ledger_id) is None
        assert bk.ledger_metadata(writer.ledger_id).state is LedgerState.OPEN
        write(writer, payloads("o3", 5))
        writer.close()
        assert_fully_replicated(bk, writer.ledger_id)
    finally:
        worker.shutdown()
        worker_bk.close()


def test_a_dead_writers_open_ledger_is_fenced_after_the_grace_period_then_copied(bk_cluster):
    cluster, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    writer_bk = BookKeeper(cluster.metadata_service_uri, CLIENT)
    writer = writer_bk.create_ledger(3, 2, 2, bookies=[b[0], b[1], b[2]])
    data = payloads("x", 25)
    write(writer, data)
    writer_bk.close()  # the writer is gone; its ledger stays open
    cluster.kill_bookie(0)
    manager = LedgerUnderreplicationManager(bk.store, "auditor")
    manager.mark_ledger_underreplicated(writer.ledger_id, [b[0]])
    worker = ReplicationWorker(bk, LedgerUnderreplicationManager(bk.store, "w"),
                               ReplicationSettings(open_ledger_rereplication_grace_period_ms=0))
    try:
        assert worker.rereplicate_one(timeout=30) == writer.ledger  # past the grace period: fence + close
        assert bk.ledger_metadata(writer.ledger_id).state is LedgerState.CLOSED
        assert worker.rereplicate_one(timeout=30) == writer.ledger  # closed now: copied
        assert manager.get_underreplicated(writer.ledger_id) is None
    finally:
        worker.shutdown()
    assert_fully_replicated(bk, writer.ledger_id)
    with bk.open_ledger(writer.ledger_id) as reader:
        assert [e.payload for e in reader.read(0, len(data) - 1)] == data


def test_no_replacement_bookie_fails_with_backoff_then_succeeds_once_one_joins(bk_cluster):
    cluster, bk, b, ledger, _ = closed_ledger_then_lost_bookie(bk_cluster, 3, "f", 12)
    manager = LedgerUnderreplicationManager(bk.store, "auditor")
    manager.mark_ledger_underreplicated(ledger.ledger_id, [b[0]])
    worker_bk = BookKeeper(cluster.metadata_service_uri, CLIENT)
    worker = ReplicationWorker(worker_bk, LedgerUnderreplicationManager(worker_bk.store, "w"),
                               ReplicationSettings(rw_rereplicate_backoff_ms=100,
                                                   lock_release_of_failed_ledger_grace_period_ms=400))
    try:
        assert worker.rereplicate_one(timeout=30) == ledger.ledger  # no bookie outside the ensemble
        state = manager.get_state(ledger.ledger_id)
        assert state.state == FAILED and "writable" in state.reason and state.details["attempts"] == 1
        wait_for(lambda: not manager.is_ledger_being_replicated(ledger.ledger_id), "the failed ledger's release")
        assert worker.rereplicate_one(timeout=30) == ledger.ledger
        assert manager.get_state(ledger.ledger_id).details["attempts"] == 2
        cluster.add_bookie()
        wait_for(lambda: len(worker_bk.writable_bookies()) == 3, "the new bookie to register")
        wait_for(lambda: worker.rereplicate_one(timeout=5) is not None
                 and manager.get_underreplicated(ledger.ledger_id) is None, "the ledger to be re-replicated")
    finally:
        worker.shutdown()
        worker_bk.close()
    assert_fully_replicated(bk, ledger.ledger_id)


def test_rereplication_over_bookkeepers_native_protocol(bk_cluster):
    """Sources and target reached by BookKeeper's native protocol (as a stock bookie would be)."""
    cluster, bk, b, ledger, _ = closed_ledger_then_lost_bookie(bk_cluster, 4, "n", 40)
    LedgerUnderreplicationManager(bk.store, "auditor").mark_ledger_underreplicated(ledger.ledger_id, [b[0]])
    worker_bk = BookKeeper(cluster.metadata_service_uri, {**CLIENT, "bookieProtocol": "native"})
    worker = ReplicationWorker(worker_bk, LedgerUnderreplicationManager(worker_bk.store, "w"))
    try:
        assert worker.rereplicate_one(timeout=30) == ledger.ledger
        assert all(isinstance(worker_bk.bookie_client(x), NativeBookieClient) for x in b[1:])
        assert worker.manager.get_underreplicated(ledger.ledger_id) is None
    finally:
        worker.shutdown()
        worker_bk.close()
    assert_fully_replicated(bk, ledger.ledger_id)


def test_a_fragment_whose_ensemble_changed_meanwhile_is_not_replaced_again(bk_cluster):
    """Two replicators on the same fragment (as two workers would be without the lock): the second
    one's CAS is refused, the first one's ensemble stays."""
    _, bk, b, ledger, _ = closed_ledger_then_lost_bookie(bk_cluster, 5, "c")
    handle = bk.open_ledger(ledger.ledger_id, recovery=False)
    (fragment,) = LedgerChecker(bk).check_ledger(handle)
    first = LedgerFragmentReplicator(bk).replicate(handle, fragment, (b[3], b[1], b[2]))
    with pytest.raises(BKMetadataVersionException, match="changed meanwhile"):
        LedgerFragmentReplicator(bk).replicate(handle, fragment, (b[4], b[1], b[2]))
    assert bk.ledger_metadata(ledger.ledger_id).ensembles == first.value.ensembles == ((0, (b[3], b[1], b[2])),)
    assert bk.bookie_client(b[4]).list_entries(LedgerId(0, ledger.ledger_id)).status == status.ENOLEDGER  # nothing copied
    assert_fully_replicated(bk, ledger.ledger_id)


def test_a_worker_that_loses_the_race_for_a_fragment_checks_again_without_backoff(bk_cluster):
    _, bk, b, ledger, _ = closed_ledger_then_lost_bookie(bk_cluster, 5, "r")
    manager = LedgerUnderreplicationManager(bk.store, "auditor")
    manager.mark_ledger_underreplicated(ledger.ledger_id, [b[0]])
    worker = ReplicationWorker(bk, LedgerUnderreplicationManager(bk.store, "w"),
                               ReplicationSettings(rw_rereplicate_backoff_ms=600_000))
    check = worker.checker.check_ledger

    def check_then_lose_the_race(handle, include_open=True):
        found = check(handle, include_open)
        if handle.metadata.ensembles[0][1][0] == b[0]:  # someone else replaces b0 right after our check
            (fragment,) = found
            LedgerFragmentReplicator(bk).replicate(handle, fragment, (b[3], b[1], b[2]))
        return found

    worker.checker.check_ledger = check_then_lose_the_race
    try:
        assert worker.rereplicate_one(timeout=30) == ledger.ledger
        assert manager.get_state(ledger.ledger_id) is None  # not "failed": nothing went wrong
        assert not manager.is_ledger_being_replicated(ledger.ledger_id)  # released at once, no 600 s backoff
        assert worker.rereplicate_one(timeout=30) == ledger.ledger  # checked afresh: nothing missing
        assert manager.get_underreplicated(ledger.ledger_id) is None
    finally:
        worker.shutdown()
    assert bk.ledger_metadata(ledger.ledger_id).ensembles == ((0, (b[3], b[1], b[2])),)
