"""Ledger metadata on a real ZooKeeper, in BookKeeper's layout."""
from __future__ import annotations

import threading
import uuid

import pytest

from bookie.exceptions import (BKLedgerExistException, BKMetadataVersionException,
                               BKNoSuchLedgerExistsOnMetadataServerException, BKZKException)
from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta import ledger_metadata
from bookie.meta.ledger_id_generator import ZkLedgerIdGenerator
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto.checksum import DigestType
from tests.helpers.sample_metadata import metadata


def test_init_new_cluster_writes_bookkeepers_nodes(metadata_store):
    zk, root = metadata_store.zk, metadata_store.root
    assert zk.get(f"{root}/LAYOUT")[0] == b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
    assert uuid.UUID(zk.get(f"{root}/INSTANCEID")[0].decode())
    assert zk.exists(f"{root}/available/readonly")
    assert metadata_store.init_new_cluster() is False  # idempotent


def test_create_read_cas_update_delete(metadata_store):
    ledger = LedgerId(0, 7)
    md = metadata()
    assert metadata_store.create_ledger(ledger, md).version == 0
    with pytest.raises(BKLedgerExistException):
        metadata_store.create_ledger(ledger, metadata())
    assert metadata_store.create_ledger(ledger, md).version == 0  # a resent create with the same token succeeded
    read = metadata_store.read_ledger(ledger)
    assert read.value == md and read.version == 0
    closed = md.with_state(ledger_metadata.LedgerState.CLOSED, 9, 900)
    assert metadata_store.write_ledger(ledger, closed, 0).version == 1
    with pytest.raises(BKMetadataVersionException):  # a writer with the old version loses
        metadata_store.write_ledger(ledger, md.with_state(ledger_metadata.LedgerState.IN_RECOVERY), 0)
    assert metadata_store.read_ledger(ledger).value.state is ledger_metadata.LedgerState.CLOSED
    metadata_store.delete_ledger(ledger)
    with pytest.raises(BKNoSuchLedgerExistsOnMetadataServerException):
        metadata_store.read_ledger(ledger)


def test_iteration_covers_short_long_and_scoped_ids(metadata_store):
    short = [LedgerId(0, i) for i in (1, 2, 10_001, 99_999_999)]
    long = [LedgerId(0, (1 << 31) + 5), LedgerId(0, 1 << 50)]
    scoped = [LedgerId(5, 1), LedgerId(5, 2), LedgerId(6, 1)]
    for ledger in short + long + scoped:
        metadata_store.create_ledger(ledger, metadata())
    assert list(metadata_store.iterate_ledgers()) == short + long
    assert list(metadata_store.iterate_ledgers(5)) == scoped[:2]
    assert list(metadata_store.iterate_ledgers(None)) == short + long + scoped


def test_flat_layout(zookeeper):
    with ZKMetadataStore(f"zk+flat://{zookeeper.connect_string}/flat-{uuid.uuid4().hex[:6]}") as store:
        store.init_new_cluster()
        for i in (3, 1):
            store.create_ledger(LedgerId(0, i), metadata())
        assert store.zk.exists(f"{store.root}/L0000000003")
        assert list(store.iterate_ledgers()) == [LedgerId(0, 1), LedgerId(0, 3)]
    with pytest.raises(BKZKException, match="uses flat"):
        ZKMetadataStore(f"zk+hierarchical://{zookeeper.connect_string}{store.root}").manager


def test_ledger_ids_from_zookeeper(metadata_store):
    ids = [metadata_store.generate_ledger_id() for _ in range(5)]
    assert ids == sorted(set(ids)) and ids[0] >= 0
    assert not metadata_store.zk.get_children(f"{metadata_store.root}/idgen")  # id znodes are deleted at once
    long_ids = [ZkLedgerIdGenerator(metadata_store.zk, metadata_store.root).generate_long() for _ in range(3)]
    assert all(i > layout.MAX_SHORT_ID for i in long_ids) and long_ids == sorted(set(long_ids))


def test_watch_sees_updates_and_deletion(metadata_store):
    ledger = LedgerId(0, 8)
    versioned = metadata_store.create_ledger(ledger, metadata())
    seen, changed = [], threading.Event()

    def on_change(value):
        seen.append(None if value is None else value.version)
        changed.set()
    def wait_for(last) -> None:
        for _ in range(50):
            if seen[-1:] == [last]:
                return
            changed.wait(0.1)
            changed.clear()

    stop = metadata_store.watch_ledger(ledger, on_change)
    wait_for(0)
    metadata_store.write_ledger(ledger, versioned.value.with_state(ledger_metadata.LedgerState.CLOSED, 0, 1), 0)
    # A ZooKeeper watch fires once and the value is read afterwards: a version replaced before that
    # read is never seen. So the deletion waits until the update has been.
    wait_for(1)
    metadata_store.delete_ledger(ledger)
    wait_for(None)
    assert seen == [0, 1, None]
    stop()


def test_unreachable_zookeeper_is_a_clear_error():
    from bookie.util.processes import free_port
    with pytest.raises(BKZKException, match="not reachable"):
        ZKMetadataStore(f"zk://127.0.0.1:{free_port()}/ledgers", connect_timeout=1.0)


@pytest.mark.parametrize("multi_read", [True, False], ids=["multiRead", "getData-each"])
def test_read_ledgers_pipelines_in_order_and_reports_missing_ones(metadata_store, monkeypatch, multi_read):
    """Batched in multiRead requests (ZooKeeper 3.6+, as the harness's) or one getData per ledger (older
    servers): the same answers, in the order asked."""
    monkeypatch.setattr(metadata_store, "_multi_read", multi_read)
    ledgers = [LedgerId(0, i) for i in range(1, 40)]
    for ledger in ledgers:
        metadata_store.create_ledger(ledger, metadata(length=ledger.ledger_id))
    metadata_store.delete_ledger(ledgers[5])
    asked = [*ledgers, LedgerId(0, 10**6)]
    got = list(metadata_store.read_ledgers(asked, window=7))
    assert [ledger for ledger, _ in got] == asked
    for ledger, versioned in got:
        if ledger == ledgers[5] or ledger.ledger_id == 10**6:
            assert versioned is None
        else:
            assert versioned.value.length == ledger.ledger_id and versioned.version == 0
    assert [lid for lid, _ in metadata_store.ledgers_with_metadata(0)] == [l for l in ledgers if l != ledgers[5]]
    # Only the password and digest type (a Spark read's check at load()): the same ledgers, the same gaps.
    access = list(metadata_store.read_ledger_access(asked, window=7))
    assert [ledger for ledger, _ in access] == asked
    assert [None if v is None else (v.value, v.version) for _, v in access] == [
        None if v is None else ((b"pw", DigestType.CRC32C), 0) for _, v in got]


def test_multi_read_reads_many_znodes_in_few_requests(metadata_store, zookeeper):
    """bookie/meta/multi_read.py against the real server: 1,200 ledgers (3 batches) and a missing one in a
    handful of requests, through a chrooted client too."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    from bookie.meta.multi_read import read_many, supports_multi_read
    from bookie.testing.zookeeper_server import received_requests
    zk = metadata_store.zk
    assert supports_multi_read(zk)  # the harness's ZooKeeper is 3.9
    base = f"{metadata_store.root}/multi"
    zk.ensure_path(base)
    for pending in [zk.create_async(f"{base}/n{i}", str(i).encode()) for i in range(1200)]:
        pending.get(30)
    items = [(i, f"{base}/n{i}") for i in range(1200)] + [(-1, f"{base}/none")]
    before = received_requests(zookeeper.port)
    answers = list(read_many(zk, items))
    assert received_requests(zookeeper.port) - before < 20  # 3 multiReads and the sessions' pings
    assert [i for i, _ in answers] == [i for i, _ in items]
    assert all(answer[0] == str(i).encode() and answer[1].version == 0 for i, answer in answers[:-1])
    assert isinstance(answers[-1][1], NoNodeError)
    chrooted = KazooClient(zookeeper.connect_string + base)
    chrooted.start(15)
    try:
        assert [a[0] for _, a in read_many(chrooted, [(0, "/n7"), (1, "/n8")])] == [b"7", b"8"]
    finally:
        chrooted.stop()
        chrooted.close()
