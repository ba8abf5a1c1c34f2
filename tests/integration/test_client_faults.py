"""Client faults found by review and fault injection (issue 9): recovery reading from a replacement,
close racing an append, the closed length after failed appends, messages larger than a bookie takes,
recovery without enough bookies, and a lost ZooKeeper reply during a metadata update.

Real ZooKeeper and bookie processes; faults are injected by controlling processes (SIGSTOP/SIGKILL)
or, for a lost ZooKeeper reply, by wrapping the client's kazoo ``set`` so that it applies and then
raises ConnectionLoss, as a dropped connection does.
"""
from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import Future

import pytest
from kazoo.exceptions import ConnectionLoss

from bookie.client import BookKeeper
from bookie.client.ledger_handle import LedgerHandle
from bookie.client.ledger_reader import LedgerReader
from bookie.exceptions import (BKException, BKIncorrectParameterException, BKLedgerClosedException,
                               BKLedgerRecoveryException)
from bookie.meta.ledger_metadata import LedgerState
from bookie.proto import status
from tests.helpers.waiting import DEADLINE, wait_for

PW = b"pw"


def bookie_index(c, bookie_id: str) -> int:
    return next(b.index for b in c.bookies if b.bookie_id == bookie_id)


def signal_bookie(c, index: int, sig: int) -> None:
    os.killpg(c.bookies[index].proc.pid, sig)


def wait_unregistered(bk, bookie_ids) -> None:
    wait_for(lambda: not set(bookie_ids) & set(bk.writable_bookies()), f"{bookie_ids} to leave ZooKeeper")


def test_recovery_reads_the_tail_from_the_recorded_ensemble_not_from_a_replacement(bk_cluster, monkeypatch):
    """A recovery add that fails on B0 replaces B0 in the recovering handle's memory; the next scan
    batches must still ask B0 (which has every entry), not the replacement that has none of them."""
    c, bk = bk_cluster(4)
    b0, b1, b2 = (c.bookies[i].bookie_id for i in range(3))
    writer = bk.create_ledger(3, 2, 2, password=PW, bookies=[b0, b1, b2])
    writer.append_batch([f"e{i}".encode() for i in range(4000)]).result(DEADLINE)  # all carry LAC -1
    stopped: list[int] = []

    def stop(index: int) -> None:
        signal_bookie(c, index, signal.SIGSTOP)
        stopped.append(index)

    def resume(index: int) -> None:
        signal_bookie(c, index, signal.SIGCONT)
        stopped.remove(index)

    original_scan, original_append = LedgerReader.recovery_scan, LedgerHandle.append_batch
    scans = []

    def scan(self, metadata, first, count):
        scans.append(first)
        result = original_scan(self, metadata, first, count)
        if len(scans) == 1:
            stop(0)  # B0 will not answer the first batch of recovery adds: replaced in memory
        elif len(scans) == 2:
            resume(1)
        return result

    def append_batch(self, payloads):
        future = original_append(self, payloads)
        if self.recovery and len(scans) == 1:
            future.result(DEADLINE)  # acknowledged by the replacement once B0 timed out
            assert b0 not in self.ensemble
            resume(0)  # B0 is back, with all its data
            stop(1)  # and B1 will not answer the next scan batch
        return future

    monkeypatch.setattr(LedgerReader, "recovery_scan", scan)
    monkeypatch.setattr(LedgerHandle, "append_batch", append_batch)
    try:
        with BookKeeper(c.metadata_service_uri, {"addEntryTimeout": 1.0, "readTimeout": 1.0,
                                                  "speculativeReadTimeout": 0}) as other:
            rh = other.open_ledger(writer.ledger_id, password=PW)
            assert rh.metadata.state is LedgerState.CLOSED
            assert rh.metadata.last_entry_id == 3999, "recovery cut off acknowledged entries"
            assert len(scans) >= 4
            assert [e.payload for e in rh.read(3990, 3999)] == [f"e{i}".encode() for i in range(3990, 4000)]
    finally:
        for index in list(stopped):
            resume(index)


def test_close_racing_an_append_never_acknowledges_past_the_closed_end(bk_cluster):
    """An append that arrives while close() runs (here: between its drain and its metadata write, with
    the bookies held by SIGSTOP so nothing can be acknowledged meanwhile) fails; it is never
    acknowledged with an id past the closed ledger's last entry."""
    c, bk = bk_cluster(3, client_conf={"addEntryTimeout": 60.0})
    lh = bk.create_ledger(3, 2, 2, password=PW)
    for i in range(10):
        lh.append(f"e{i}".encode())
    late: dict = {}
    drain = lh.drain

    def drain_then_append(timeout=None):
        drain(timeout)
        for b in c.bookies:
            signal_bookie(c, b.index, signal.SIGSTOP)

        def append():
            try:
                late["future"] = lh.append_async(b"late")
            except BKException as exc:
                late["error"] = exc
        thread = threading.Thread(target=append)  # another thread of the application
        thread.start()
        thread.join()

    lh.drain = drain_then_append
    try:
        lh.close()
    finally:
        for b in c.bookies:
            signal_bookie(c, b.index, signal.SIGCONT)
    closed = bk.ledger_metadata(lh.ledger_id)
    assert closed.state is LedgerState.CLOSED and closed.last_entry_id == 9
    if "future" in late:
        try:
            entry_id = late["future"].result(DEADLINE)
        except BKException:
            pass
        else:
            assert entry_id <= closed.last_entry_id, f"entry {entry_id} acknowledged past the closed end"
    assert isinstance(late.get("error"), BKLedgerClosedException)


def test_close_after_failed_appends_records_the_length_through_the_last_entry(bk_cluster):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(3, 3, 3, password=PW)  # AQ=3: nothing completes once a bookie is gone
    for i in range(11):
        lh.append(bytes(100))
    c.kill_bookie(bookie_index(c, lh.ensemble[0]), signal.SIGKILL)
    outcomes = []  # once the first failure has stopped the handle, later appends are refused at once
    for _ in range(4):
        try:
            outcomes.append(lh.append_async(bytes(100)))
        except BKException as exc:
            outcomes.append(exc)
    assert isinstance(outcomes[0], Future)
    for outcome in outcomes:
        if isinstance(outcome, Future):
            with pytest.raises(BKException):
                outcome.result(DEADLINE)
    with pytest.raises(BKException):
        lh.close()  # reports why the appends failed, after recording the ledger closed
    md = bk.ledger_metadata(lh.ledger_id)
    assert md.state is LedgerState.CLOSED
    assert (md.last_entry_id, md.length) == (10, 1100)


def test_an_append_batch_larger_than_a_bookie_message_is_split_not_a_bookie_failure(bk_cluster):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(3, 3, 2, password=PW)  # every bookie gets every entry: 6 MB each
    payloads = [bytes([i]) * 60_000 for i in range(100)]  # in one call; a bookie takes 5 MiB a message
    assert lh.append_batch(payloads).result(DEADLINE) == range(0, 100)
    lh.close()
    md = bk.ledger_metadata(lh.ledger_id)
    assert len(md.ensembles) == 1, "a healthy bookie was replaced"
    assert (md.last_entry_id, md.length) == (99, 6_000_000)
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    assert [e.payload for e in rh.read(0, 99)] == payloads
    other = bk.create_ledger(3, 2, 2, password=PW)
    assert other.append(b"x") == 0


def test_an_entry_larger_than_a_bookie_takes_is_refused_clearly_and_loses_nothing(bk_cluster):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(3, 2, 2, password=PW)
    lh.append(b"before")
    with pytest.raises(BKIncorrectParameterException, match="nettyMaxFrameSizeBytes"):
        lh.append(bytes(6 << 20))
    with pytest.raises(BKIncorrectParameterException, match="nettyMaxFrameSizeBytes"):
        lh.append_batch([b"ok", bytes(6 << 20)])  # refused whole: no entry id is taken
    assert lh.append(b"after") == 1
    lh.close()
    assert [e.payload for e in bk.open_ledger(lh.ledger_id, password=PW).read(0, 1)] == [b"before", b"after"]


def test_a_message_the_bookie_refuses_for_its_size_is_not_a_bookie_failure(bk_cluster):
    """A client configured for larger messages than the bookies take gets a clear error; no bookie
    is replaced for it."""
    c, bk = bk_cluster(3, client_conf={"nettyMaxFrameSizeBytes": 16 << 20})
    lh = bk.create_ledger(3, 2, 2, password=PW)
    lh.append(b"before")
    with pytest.raises(BKException, match="nettyMaxFrameSizeBytes"):
        lh.append(bytes(8 << 20))
    md = bk.ledger_metadata(lh.ledger_id)
    assert len(md.ensembles) == 1, "a healthy bookie was replaced"
    assert not bk.quarantined()


def test_recovery_of_an_unconfirmed_tail_larger_than_a_bookie_message(bk_cluster):
    """400 entries of 40 KB acknowledged while the bookies' LAC is 99: recovery re-adds 12 MB."""
    c, bk = bk_cluster(3)
    writer = bk.create_ledger(3, 3, 2, password=PW)
    payloads = [bytes([i % 256]) * 40_000 for i in range(400)]
    writer.append_batch(payloads[:100]).result(DEADLINE)
    writer.append_batch(payloads[100:]).result(DEADLINE)  # these carry LAC 99; the writer then dies
    with BookKeeper(c.metadata_service_uri) as other:
        rh = other.open_ledger(writer.ledger_id, password=PW)
        assert rh.metadata.state is LedgerState.CLOSED and rh.metadata.last_entry_id == 399
        assert [e.payload for e in rh.read(390, 399)] == payloads[390:]


def test_recovery_re_adds_a_tail_of_small_messages_that_is_larger_than_one_message(bk_cluster):
    """Each of the writer's messages is within a bookie's limit, but three 4 MB batches framed while
    nothing could be acknowledged (the bookies held by SIGSTOP) all carry LAC 99: the tail recovery
    re-adds is 12 MB, more than one message. The writer's client then closes without closing the
    ledger; recovery closes it at the last acknowledged entry, every entry readable."""
    c, bk = bk_cluster(3)
    writer = bk.create_ledger(3, 3, 2, password=PW)
    payloads = [bytes([i % 256]) * 40_000 for i in range(400)]
    assert writer.append_batch(payloads[:100]).result(DEADLINE) == range(0, 100)
    for b in c.bookies:
        signal_bookie(c, b.index, signal.SIGSTOP)
    try:  # entries are framed with the writer's LAC when appended: 99 for all three batches
        futures = [writer.append_batch(payloads[k:k + 100]) for k in (100, 200, 300)]
    finally:
        for b in c.bookies:
            signal_bookie(c, b.index, signal.SIGCONT)
    assert [f.result(DEADLINE) for f in futures] == [range(100, 200), range(200, 300), range(300, 400)]
    assert writer.last_add_confirmed == 399
    bk.close()  # the writer dies: its client goes, the ledger stays open
    with BookKeeper(c.metadata_service_uri) as other:
        assert other.open_ledger(writer.ledger_id, password=PW, recovery=False).last_add_confirmed == 99
        rh = other.open_ledger(writer.ledger_id, password=PW, recovery=True)
        assert rh.metadata.state is LedgerState.CLOSED
        assert (rh.metadata.last_entry_id, rh.metadata.length) == (399, 16_000_000)
        for first in range(0, 400, 100):
            assert [e.payload for e in rh.read(first, first + 99)] == payloads[first:first + 100]


def test_recovery_without_enough_bookies_names_what_it_needs_and_leaves_the_ledger_readable(bk_cluster):
    c, bk = bk_cluster(4)
    writer = bk.create_ledger(3, 3, 2, password=PW)
    writer.append_batch([f"e{i}".encode() for i in range(50)]).result(DEADLINE)
    writer.append_batch([f"e{i}".encode() for i in range(50, 80)]).result(DEADLINE)  # bookies' LAC: 49
    # AQ=2 acknowledges before the third bookie answers; a writer that still awaits that answer when the
    # bookie dies records a new fragment from entry 80, and recovery rightly ends the ledger there.
    wait_for(lambda: all(bk.bookie_client(b).read_entry(writer.ledger, 79).status == status.EOK
                         for b in writer.ensemble), "every bookie of the ensemble to hold entry 79")
    dead = writer.ensemble[0]
    spare = next(b.bookie_id for b in c.bookies if b.bookie_id not in writer.ensemble)
    for bookie_id in (dead, spare):
        c.kill_bookie(bookie_index(c, bookie_id), signal.SIGKILL)
    with BookKeeper(c.metadata_service_uri, {"addEntryTimeout": 2.0, "readTimeout": 2.0}) as other:
        wait_unregistered(other, [dead, spare])
        with pytest.raises(BKLedgerRecoveryException) as failure:
            other.open_ledger(writer.ledger_id, password=PW)
        message = str(failure.value)
        assert dead in message and "Needs 1 more writable bookie" in message and "recovery=False" in message
        tail = other.open_ledger(writer.ledger_id, password=PW, recovery=False)
        assert tail.last_add_confirmed == 49
        assert [e.payload for e in tail.read(0, 49)] == [f"e{i}".encode() for i in range(50)]
    c.start_bookie(bookie_index(c, spare))
    with BookKeeper(c.metadata_service_uri) as again:
        rh = again.open_ledger(writer.ledger_id, password=PW)
        assert rh.metadata.last_entry_id == 79
        assert [e.payload for e in rh.read(0, 79)] == [f"e{i}".encode() for i in range(80)]


def lose_replies(store, count: int, apply: bool = True) -> list:
    """Make the next ``count`` znode sets of ``store`` raise ConnectionLoss, after applying (``apply``)
    or instead of it: what a connection dropped mid-request looks like to the client."""
    real_set = store.zk.set
    lost = []

    def set_then_lose(path, value, version=-1):
        if len(lost) >= count:
            return real_set(path, value, version=version)
        if apply:
            real_set(path, value, version=version)
        lost.append(path)
        raise ConnectionLoss()

    store.zk.set = set_then_lose
    return lost


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_a_lost_zookeeper_reply_during_an_ensemble_change_and_close_does_not_fail_the_writer(bk_cluster, applied):
    c, bk = bk_cluster(4)
    lh = bk.create_ledger(3, 2, 2, password=PW)
    for i in range(10):
        lh.append(f"e{i}".encode())
    lost = lose_replies(bk.store, 2, apply=applied)  # the ensemble change's CAS, then the close's
    c.kill_bookie(bookie_index(c, lh.ensemble[1]), signal.SIGKILL)
    futures = [lh.append_async(f"e{i}".encode()) for i in range(10, 210)]
    assert [f.result(DEADLINE) for f in futures] == list(range(10, 210))
    lh.close()
    assert len(lost) == 2
    md = bk.ledger_metadata(lh.ledger_id)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 209 and len(md.ensembles) == 2
    assert [e.payload for e in bk.open_ledger(lh.ledger_id, password=PW).read(0, 209)] == \
        [f"e{i}".encode() for i in range(210)]
