"""Failures end (issue 30, item 3): a writer that cannot reach a write quorum fails with an error naming
the bookies it tried, within bounds the user sets, instead of retrying for ever; an ensemble change that
cannot reach ZooKeeper fails the writer after the zkTimeout-based doubt window; a read of a bookie that
does not answer falls back to the next replica within ``readTimeout``.

Real ZooKeeper and bookie processes. A bookie that cannot be reached is a registration at a port nobody
listens on, or a bookie process held by SIGSTOP of its process group; ZooKeeper is held the same way,
only the one of a cluster the test starts for itself. Every process held is resumed, also on failure.
Each wait is bounded: a failure to end shows as a timeout of ``DEADLINE``, never as a hung test.
"""
from __future__ import annotations

import os
import signal
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

import pytest

from bookie.client import BookKeeper
from bookie.exceptions import (BKAddEntryQuorumTimeoutException, BKNotEnoughBookiesException, BKWriteException,
                               BKZKException)
from bookie.meta.bookie_service_info import GRPC, Endpoint
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.util.processes import free_ports
from tests.helpers.waiting import DEADLINE, wait_for

PW = b"pw"
READ_TIMEOUT = 3.0
READ_DEADLINE = 20.0  # generous for a fallback after READ_TIMEOUT; the stream's own deadline is 12 of them


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@contextmanager
def stopped(pid: int):
    """The process group ``pid`` leads, stopped by SIGSTOP (the kernel reports it stopped) until the block ends."""
    os.killpg(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: process_state(pid) == "T", f"process {pid} to stop")
        yield
    finally:
        os.killpg(pid, signal.SIGCONT)


@contextmanager
def held(*pids: int):
    """Processes ``pids`` stopped until the block ends; each is resumed, whatever fails."""
    with ExitStack() as stack:
        for pid in pids:
            stack.enter_context(stopped(pid))
        yield


def bookie_pids(c, bookie_ids) -> list[int]:
    return [b.proc.pid for b in c.bookies if b.bookie_id in bookie_ids]


@contextmanager
def unreachable_bookies(uri: str, count: int):
    """``count`` bookies registered (writable, with a gRPC endpoint) at ports nobody listens on: what a
    client sees when ZooKeeper answers and the bookies do not (another network namespace)."""
    ports = free_ports(2 * count)
    ids = [f"127.0.0.1:{port}" for port in ports[:count]]
    with ZKMetadataStore(uri) as store:
        for bookie_id, grpc_port in zip(ids, ports[count:]):
            store.register_bookie(bookie_id, False, (Endpoint("grpc", "127.0.0.1", grpc_port, GRPC),))
        yield ids


def test_an_append_that_reaches_no_bookie_fails_naming_the_bookies_it_tried(bk_cluster):
    """Every bookie unreachable, BookKeeper's defaults (no quorum timeout, no limit on ensemble changes):
    the ensemble change runs out of bookies that have not failed this writer and the append fails with
    BKNotEnoughBookiesException naming them, instead of replacing one dead bookie by another for ever."""
    c, bk = bk_cluster(3, client_conf={"addEntryTimeout": 2.0, "readTimeout": 2.0})
    real = [b.bookie_id for b in c.bookies]
    # Six that stay registered: a change always finds E bookies outside the ensemble to try.
    with unreachable_bookies(c.metadata_service_uri, 6) as dead, held(*bookie_pids(c, real)):
        wait_for(lambda: set(dead) <= set(bk.writable_bookies()), "the unreachable bookies to be listed")
        ensemble = [real[0], dead[0], dead[1]]
        lh = bk.create_ledger(3, 2, 2, password=PW, bookies=ensemble)
        with ThreadPoolExecutor(1) as pool:  # append_async itself may wait for connections
            future = pool.submit(lh.append_async, b"never acknowledged").result(DEADLINE)
            error = future.exception(DEADLINE)
        assert isinstance(error, BKNotEnoughBookiesException), error
        message = str(error)
        assert f"ledger {lh.ledger_id}" in message and "entries 0..0" in message
        for bookie in [real[0], *dead]:
            assert bookie in message, f"{bookie} not named: {message}"
        for bookie in ensemble[:2]:  # entry 0's write set (WQ = 2)
            assert f"{bookie} (BK" in message, f"{bookie}'s failure not named: {message}"
        with pytest.raises(BKNotEnoughBookiesException):
            lh.append(b"after")


def test_an_add_not_acknowledged_within_the_quorum_timeout_fails_the_writer(bk_cluster):
    """addEntryQuorumTimeoutSec: an add whose write quorum cannot acknowledge it (AQ = 3, one bookie held)
    fails with BKAddEntryQuorumTimeoutException naming what each bookie of its write set answered, long
    before addEntryTimeout would replace the bookie; the writer stops."""
    c, bk = bk_cluster(3, client_conf={"addEntryTimeout": 600.0, "addEntryQuorumTimeoutSec": 2})
    lh = bk.create_ledger(3, 3, 3, password=PW)
    assert lh.append(b"first") == 0
    silent = lh.ensemble[2]
    with held(*bookie_pids(c, [silent])):
        error = lh.append_async(b"second").exception(DEADLINE)
        assert isinstance(error, BKAddEntryQuorumTimeoutException), error
        message = str(error)
        assert f"ledger {lh.ledger_id}: entries 1..1" in message and "addEntryQuorumTimeoutSec 2 s" in message
        assert f"{silent}: no answer" in message
        for bookie in lh.ensemble[:2]:
            assert f"{bookie}: acknowledged" in message
        with pytest.raises(BKAddEntryQuorumTimeoutException):
            lh.append(b"third")
    assert lh.last_add_confirmed == 0
    assert [e.payload for e in bk.open_ledger(lh.ledger_id, password=PW).read(0, 0)] == [b"first"]


def test_an_ensemble_change_past_max_num_ensemble_changes_fails_naming_the_bookies_replaced(bk_cluster):
    c, bk = bk_cluster(5, client_conf={"addEntryTimeout": 1.0, "readTimeout": 1.0, "maxNumEnsembleChanges": 1})
    ids = [b.bookie_id for b in c.bookies]
    lh = bk.create_ledger(3, 3, 3, password=PW, bookies=ids[:3])
    assert lh.append(b"e0") == 0
    with held(*bookie_pids(c, [ids[0]])):
        assert lh.append_async(b"e1").result(DEADLINE) == 1  # the one change allowed
        replacement = lh.ensemble[0]
        assert replacement not in ids[:3]
        with held(*bookie_pids(c, [ids[1]])):
            error = lh.append_async(b"e2").exception(DEADLINE)
    assert isinstance(error, BKWriteException), error
    message = str(error)
    assert "maxNumEnsembleChanges 1" in message and "entries 2..2" in message
    assert f"{ids[0]} -> {replacement} from entry 1 (BKTimeoutException" in message
    assert f"Failing now: {ids[1]} (BKTimeoutException" in message
    assert [e.payload for e in bk.open_ledger(lh.ledger_id, password=PW).read(0, 1)] == [b"e0", b"e1"]


def test_an_ensemble_change_that_cannot_reach_zookeeper_fails_the_writer_and_loses_nothing(tmp_path):
    """ZooKeeper held while a bookie fails: the change cannot be recorded; after the doubt window (two
    zkTimeouts, or zkConnectTimeout) the writer fails and every pending append with it. Once ZooKeeper
    is back, recovery finds every acknowledged entry."""
    c = LocalBookKeeper(4, base_dir=str(tmp_path / "cluster"), root=f"/ledgers-{uuid.uuid4().hex[:8]}",
                        tick_time=500, bookie_settings={"zkTimeout": 4000}).start()
    try:
        ids = [b.bookie_id for b in c.bookies]
        with BookKeeper(c.metadata_service_uri, {"addEntryTimeout": 1.0, "readTimeout": 1.0, "zkTimeout": 2000,
                                                 "zkConnectTimeout": 3.0}) as bk:
            lh = bk.create_ledger(3, 3, 3, password=PW, bookies=ids[:3])
            for i in range(10):
                assert lh.append(b"e%d" % i) == i
            # ZooKeeper first: the client's list of bookies stays as it was, so a replacement is found.
            with held(c.zookeeper.proc.pid):
                with held(*bookie_pids(c, [ids[0]])):
                    pending = [lh.append_async(b"e%d" % i) for i in (10, 11)]
                    errors = [future.exception(DEADLINE) for future in pending]
                for error in errors:
                    assert isinstance(error, BKZKException), error
                message = str(errors[0])
                assert f"ledger {lh.ledger_id}: the ensemble change replacing {ids[0]} (BKTimeoutException" in message
                assert "entries 10..11 fail" in message and "doubt window" in message
                with pytest.raises(BKZKException):
                    lh.append(b"after")
                assert lh.last_add_confirmed == 9
        with BookKeeper(c.metadata_service_uri) as other:
            rh = other.open_ledger(lh.ledger_id, password=PW)
            assert rh.metadata.last_entry_id >= 9
            assert [e.payload for e in rh.read(0, 9)] == [b"e%d" % i for i in range(10)]
    finally:
        c.stop()


@pytest.mark.parametrize("entries", [(0, 29), (4, 4)], ids=["range", "one entry"])
def test_a_read_whose_first_replica_does_not_answer_falls_back_within_read_timeout(bk_cluster, entries):
    """The first replica held by SIGSTOP: the read asks the next one once the first has been silent for
    readTimeout, not after the whole stream's deadline."""
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(3, 3, 2, password=PW)
    payloads = [b"e%d" % i for i in range(30)]
    lh.append_batch(payloads).result(DEADLINE)
    lh.close()
    first, last = entries
    with BookKeeper(c.metadata_service_uri, {"readTimeout": READ_TIMEOUT}) as reader:
        rh = reader.open_ledger(lh.ledger_id, password=PW)  # closed: no bookie is asked
        with held(*bookie_pids(c, [lh.ensemble[0]])), ThreadPoolExecutor(1) as pool:
            read = pool.submit(rh.read, first, last)
            entries_read = read.result(READ_DEADLINE)
            assert [e.payload for e in entries_read] == payloads[first:last + 1]
            # The silent bookie is asked last from now on (the handle's failure history).
            assert [e.payload for e in pool.submit(rh.read, 0, 29).result(READ_DEADLINE)] == payloads
