"""The BookKeeper client against real bookie processes and ZooKeeper (scenarios of BookKeeper's own client tests)."""
from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import threading
import time

import pytest

from bookie.client import BookKeeper
from bookie.exceptions import (BKDuplicateEntryIdException, BKException, BKIncorrectParameterException,
                               BKLedgerClosedException, BKLedgerFencedException, BKNoSuchLedgerExistsException,
                               BKNotEnoughBookiesException, BKReadException, BKUnauthorizedAccessException)
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerState
from bookie.server.entry_log_format import log_path
from bookie.testing.local_bookkeeper import LocalBookKeeper
from tests.helpers.disk_faults import flip_byte

PW = b"secret"


def payload(i: int) -> bytes:
    return (b"entry-%d-" % i) * 8


def write(lh, count: int, start: int = 0) -> None:
    futures = [lh.append_async(payload(i)) for i in range(start, start + count)]
    assert [f.result(30) for f in futures] == list(range(start, start + count))


def bookie_index(c: LocalBookKeeper, bookie_id: str) -> int:
    return next(b.index for b in c.bookies if b.bookie_id == bookie_id)


def test_write_read_close_reopen_list_delete(bk_cluster):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2, digest="crc32c", password=PW,
                          custom_metadata={"owner": b"etl"})
    assert lh.append(b"first") == 0
    write(lh, 499, start=1)
    assert lh.last_add_confirmed == 499
    assert [e.payload for e in lh.read(1, 3)] == [payload(i) for i in (1, 2, 3)]
    lh.close()
    lh.close()  # idempotent
    md = bk.ledger_metadata(lh.ledger_id)
    assert (md.state, md.last_entry_id, md.length) == (LedgerState.CLOSED, 499, 5 + sum(len(payload(i)) for i in range(1, 500)))
    assert md.custom() == {"owner": b"etl"} and len(md.ensembles) == 1
    with pytest.raises(BKLedgerClosedException):
        lh.append(b"after close")
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    entries = rh.read(0, rh.last_add_confirmed)
    assert [e.entry_id for e in entries] == list(range(500))
    assert entries[0].payload == b"first" and [e.payload for e in entries[1:]] == [payload(i) for i in range(1, 500)]
    with pytest.raises(BKReadException, match="readable entries are 0..499"):
        rh.read(0, 500)
    assert LedgerId(0, lh.ledger_id) in bk.list_ledgers()
    bk.delete_ledger(lh.ledger_id)
    with pytest.raises(BKNoSuchLedgerExistsException):
        bk.open_ledger(lh.ledger_id, password=PW)


@pytest.mark.parametrize("digest", ["crc32", "mac", "dummy"])
def test_other_digests_and_a_scoped_ledger(bk_cluster, digest):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(3, 3, 2, digest=digest, password=PW, scope_id=77)
    assert lh.ledger.scope_id == 77
    write(lh, 20)
    lh.close()
    rh = bk.open_ledger(lh.ledger.qualified_name, password=PW)
    assert [e.payload for e in rh.read(0, 19)] == [payload(i) for i in range(20)]


def test_bad_parameters_wrong_password_not_enough_bookies(bk_cluster):
    c, bk = bk_cluster(3)
    for e, w, a in [(3, 4, 2), (3, 2, 3), (3, 2, 0), (0, 0, 0)]:
        with pytest.raises(BKIncorrectParameterException, match="0 < ack_quorum <= write_quorum <= ensemble_size"):
            bk.create_ledger(e, w, a)
    with pytest.raises(BKNotEnoughBookiesException, match="need 5 writable bookies, 3 available"):
        bk.create_ledger(5, 2, 2)
    lh = bk.create_ledger(3, 2, 2, password=PW)
    lh.append(b"x")
    with pytest.raises(BKUnauthorizedAccessException, match="wrong password"):
        bk.open_ledger(lh.ledger_id, password=b"guess")
    with pytest.raises(BKUnauthorizedAccessException):
        bk.open_ledger(lh.ledger_id, password=b"guess", recovery=False)


def test_old_writer_cannot_add_after_recovery_open_and_its_close_fails(bk_cluster):
    c, bk = bk_cluster(3)
    writer = bk.create_ledger(3, 2, 2, password=PW)
    write(writer, 50)
    with BookKeeper(c.metadata_service_uri) as other:
        recovered = other.open_ledger(writer.ledger_id, password=PW)
        assert recovered.metadata.state is LedgerState.CLOSED and recovered.last_add_confirmed == 49
    with pytest.raises(BKLedgerFencedException):
        writer.append(b"too late")
    with pytest.raises(BKException):
        writer.close()
    assert bk.ledger_metadata(writer.ledger_id).last_entry_id == 49


def test_recovery_of_an_empty_ledger(bk_cluster):
    c, bk = bk_cluster(3)
    writer = bk.create_ledger(3, 2, 2, password=PW)
    rh = bk.open_ledger(writer.ledger_id, password=PW)
    assert rh.metadata.state is LedgerState.CLOSED and rh.last_add_confirmed == -1 and rh.metadata.length == 0


def test_recovery_with_one_bookie_down(bk_cluster):
    c, bk = bk_cluster(4)  # a spare bookie takes the dead one's place for the re-added tail
    writer = bk.create_ledger(3, 2, 2, password=PW)
    write(writer, 100)
    dead = writer.ensemble[1]
    c.kill_bookie(bookie_index(c, dead), signal.SIGKILL)
    with BookKeeper(c.metadata_service_uri) as other:
        rh = other.open_ledger(writer.ledger_id, password=PW)
        assert rh.last_add_confirmed == 99
        assert [e.payload for e in rh.read(0, 99)] == [payload(i) for i in range(100)]
        # The entries past the fenced LAC were re-added with the dead bookie replaced (from LAC+1 on,
        # which is entry 0 when every entry still carried LAC -1).
        assert dead not in rh.metadata.ensembles[-1][1]


def test_sigkill_of_a_bookie_mid_stream_changes_the_ensemble_and_loses_nothing(bk_cluster):
    c, bk = bk_cluster(4)
    lh = bk.create_ledger(3, 3, 2, password=PW)
    victim = lh.ensemble[0]
    futures = [lh.append_async(payload(i)) for i in range(3000)]
    futures[500].result(30)
    c.kill_bookie(bookie_index(c, victim), signal.SIGKILL)
    futures += [lh.append_async(payload(i)) for i in range(3000, 6000)]
    assert [f.result(60) for f in futures] == list(range(6000))
    lh.close()
    md = bk.ledger_metadata(lh.ledger_id)
    assert len(md.ensembles) >= 2 and victim not in md.ensembles[-1][1]
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    assert [e.payload for e in rh.read(0, 5999)] == [payload(i) for i in range(6000)]


def test_bookie_failure_during_recovery_changes_the_ensemble(bk_cluster):
    c, bk = bk_cluster(4)
    writer = bk.create_ledger(3, 3, 3, password=PW)  # AQ=3: recovery adds need every bookie of the write set
    write(writer, 20)
    # A bookie of the ensemble dies before anyone recovers: re-adding the unconfirmed tail needs a new one.
    killed = bookie_index(c, writer.ensemble[2])
    c.kill_bookie(killed, signal.SIGKILL)
    with BookKeeper(c.metadata_service_uri) as other:
        rh = other.open_ledger(writer.ledger_id, password=PW)
        assert rh.last_add_confirmed == 19 and rh.metadata.state is LedgerState.CLOSED
        assert [e.payload for e in rh.read(0, 19)] == [payload(i) for i in range(20)]
        assert c.bookies[killed].bookie_id not in rh.metadata.ensembles[-1][1]


def test_two_concurrent_recoveries_agree(bk_cluster):
    c, bk = bk_cluster(3)
    writer = bk.create_ledger(3, 2, 2, password=PW)
    futures = [writer.append_async(payload(i)) for i in range(2000)]
    futures[-1].result(30)
    clients = [BookKeeper(c.metadata_service_uri) for _ in range(2)]
    try:
        with cf.ThreadPoolExecutor(2) as pool:
            handles = list(pool.map(lambda b: b.open_ledger(writer.ledger_id, password=PW), clients))
        assert handles[0].last_add_confirmed == handles[1].last_add_confirmed == 1999
        assert handles[0].metadata.last_entry_id == handles[1].metadata.last_entry_id == 1999
    finally:
        for client in clients:
            client.close()


def test_a_corrupted_replica_is_read_from_another(bk_cluster):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(3, 3, 2, password=PW)
    write(lh, 30)
    lh.close()
    # The first bookie of entry 7's write set, in the ensemble that wrote it (a bookie the writer took
    # for failed under load may have been replaced after it).
    owner = lh.metadata.ensemble_at(7)[7 % 3]
    index = bookie_index(c, owner)
    c.kill_bookie(index, signal.SIGTERM)  # a clean stop flushes the entry log
    bookie = c.bookies[index]
    log_file = log_path(bookie.ledger_dir, 0)
    data = open(log_file, "rb").read()
    at = data.index(payload(7)) + 3
    flip_byte(log_file, at, 0x01)
    c.start_bookie(index)
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    assert [e.payload for e in rh.read(0, 29)] == [payload(i) for i in range(30)]
    assert rh.read(7, 7)[0].payload == payload(7)


@pytest.mark.parametrize("wq", [2, 3], ids=["striped", "every-bookie"])
def test_a_dead_bookies_share_is_range_read_from_the_next_replica(bk_cluster, monkeypatch, wq):
    from bookie.client.ledger_reader import LedgerReader
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(3, wq, 2, password=PW)
    lh.append_batch([payload(i) for i in range(600)]).result(30)
    lh.close()
    c.kill_bookie(bookie_index(c, lh.ensemble[1]), signal.SIGKILL)

    def no_single_reads(*args, **kwargs):
        raise AssertionError("an entry was read on its own")
    monkeypatch.setattr(LedgerReader, "read_entry", no_single_reads)
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    assert [e.payload for e in rh.read(0, 599)] == [payload(i) for i in range(600)]


def test_tailing_reader_long_polls_without_disturbing_the_writer(bk_cluster):
    c, bk = bk_cluster(3)
    writer = bk.create_ledger(3, 2, 2, password=PW)
    for i in range(5):
        writer.append(payload(i))  # one at a time: entry i carries LAC i-1
    tail = bk.open_ledger(writer.ledger_id, password=PW, recovery=False)
    assert tail.last_add_confirmed == 3  # entry 4 is acknowledged; its LAC travels on the next entry
    lac, entry = tail.read_last_add_confirmed_and_entry(10, timeout=0.3)
    assert entry is None
    result = {}
    waiter = threading.Thread(target=lambda: result.update(r=tail.read_last_add_confirmed_and_entry(5, timeout=10)))
    waiter.start()
    time.sleep(0.2)
    writer.append(payload(5))
    writer.append(payload(6))  # carries LAC 5
    waiter.join(15)
    lac, entry = result["r"]
    assert lac >= 5 and entry.entry_id == 5 and entry.payload == payload(5)
    writer.append(b"still writing")  # the reader never fenced the writer
    assert bk.ledger_metadata(writer.ledger_id).state is LedgerState.OPEN


def test_explicit_lac_makes_the_last_entry_visible(bk_cluster):
    c, bk = bk_cluster(3, client_conf={"explicitLacInterval": 0.2})
    writer = bk.create_ledger(3, 2, 2, password=PW)
    write(writer, 10)
    tail = bk.open_ledger(writer.ledger_id, password=PW, recovery=False)
    deadline = time.monotonic() + 10
    while tail.read_last_add_confirmed() < 9:
        assert time.monotonic() < deadline, "the explicit LAC never reached the bookies"
        time.sleep(0.1)
    assert tail.read(9, 9)[0].payload == payload(9)


def test_create_ledger_adv_with_caller_chosen_ids(bk_cluster):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger_adv(3, 2, 2, password=PW)
    done = []
    f2 = lh.add_entry_async(2, b"two")
    f0 = lh.add_entry_async(0, b"zero")
    for f in (f2, f0):
        f.add_done_callback(lambda fut: done.append(fut.result()))
    with pytest.raises(BKDuplicateEntryIdException):
        lh.add_entry(2, b"again")
    f0.result(10)
    time.sleep(0.3)
    assert not f2.done(), "entry 2 completed before entry 1 was even added"
    f1 = lh.add_entry_async(1, b"one")
    f1.add_done_callback(lambda fut: done.append(fut.result()))
    assert f2.result(10) == 2 and f1.result(10) == 1
    time.sleep(0.1)
    assert done == [0, 1, 2]
    with pytest.raises(BKDuplicateEntryIdException):
        lh.add_entry(1, b"one again")
    lh.close()
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    assert [e.payload for e in rh.read(0, 2)] == [b"zero", b"one", b"two"]


def test_closing_the_client_fails_pending_appends(bk_cluster):
    c, _ = bk_cluster(3)
    bk = BookKeeper(c.metadata_service_uri)
    lh = bk.create_ledger(3, 2, 2, password=PW)
    write(lh, 3)  # connected to every bookie
    for b in c.bookies:
        os.killpg(b.proc.pid, signal.SIGSTOP)  # bookies that hang: appends stay pending
    try:
        future = lh.append_async(b"never acknowledged")
        bk.close()
        with pytest.raises(BKException, match="client closed"):
            future.result(10)
    finally:
        for b in c.bookies:
            os.killpg(b.proc.pid, signal.SIGCONT)


def test_append_batch_with_striping_mixes_with_single_appends(bk_cluster):
    c, bk = bk_cluster(5)
    lh = bk.create_ledger(5, 2, 2, password=PW)  # each bookie stores 2 of every 5 entries
    first = lh.append_async(payload(0))
    batch = lh.append_batch([payload(i) for i in range(1, 2500)])  # split into several add messages
    last = lh.append_async(payload(2500))
    assert first.result(30) == 0 and batch.result(30) == range(1, 2500) and last.result(30) == 2500
    lh.close()
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    assert [e.payload for e in rh.read(0, 2500)] == [payload(i) for i in range(2501)]
    for index, bookie in enumerate(lh.ensemble):  # every bookie holds exactly its stripes
        from bookie.proto import availability
        stored = availability.decode(bk.bookie_client(bookie).list_entries(lh.ledger).availabilityOfEntriesOfLedger)
        assert stored == [e for e in range(2501) if (index - e) % 5 < 2]
