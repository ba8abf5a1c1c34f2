"""Garbage collection against the real ZooKeeper: bookie processes give a deleted ledger's disk space
back and a SIGKILL does not bring it back; an engine in this process, whose scan a test holds right
after its local snapshot, shows that no live ledger is deleted when ZooKeeper stops mid-scan, when a
listing loses its connection, or when a ledger is created during the scan, in every layout."""
from __future__ import annotations

import os
import signal
import threading
import uuid

import pytest

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server.garbage_collector import GarbageCollectorThread
from tests.helpers.held_process import hold
from tests.helpers.sample_metadata import metadata
from tests.helpers.waiting import DEADLINE, wait_for

KEY = generate_master_key(b"pw")


def allocated(directory: str) -> int:
    """Bytes the directory's files take on disk (``du``), not their lengths."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(directory) for f in files)


def test_a_deleted_ledgers_disk_space_comes_back(bk_cluster):
    c, bk = bk_cluster(1, entryLogSizeLimit=65536, gcWaitTime=300)
    dead = bk.create_ledger(1, 1, 1)
    dead.append_batch([os.urandom(4000) for _ in range(1000)]).result(DEADLINE)  # 4 MB over ~60 logs
    dead.close()
    live = bk.create_ledger(1, 1, 1)
    live.append_batch([b"live %d" % i for i in range(100)]).result(DEADLINE)
    live.close()
    ledger_dir = c.bookies[0].ledger_dir
    before = allocated(ledger_dir)
    bk.delete_ledger(dead.ledger.ledger_id)
    wait_for(lambda: allocated(ledger_dir) < before - 3_500_000, "the deleted ledger's 4 MB to leave the disk")
    reader = bk.open_ledger(live.ledger.ledger_id)
    assert [e.payload for e in reader.read(0, 99)] == [b"live %d" % i for i in range(100)]


def test_a_deleted_ledger_stays_deleted_after_sigkill_and_journal_replay(bk_cluster):
    # No checkpoint but GC's own: the ledger's master key and entries are in the journal after the
    # LastLogMark, so replay would recreate it unless GC moved the mark before deleting.
    c, bk = bk_cluster(1, gcWaitTime=300, flushInterval=3600000)
    handle = bk.create_ledger(1, 1, 1)
    handle.append_batch([b"entry %d" % i for i in range(50)]).result(DEADLINE)
    handle.close()
    ledger = handle.ledger
    client = BookieClient(c.bookies[0].bookie_id, address=c.bookies[0].grpc_address)
    try:
        assert client.read_entry(ledger, 49).status == status.EOK
        bk.delete_ledger(ledger.ledger_id)
        wait_for(lambda: client.read_entry(ledger, 0).status == status.ENOLEDGER, "GC to delete the ledger")
    finally:
        client.close()
    c.kill_bookie(0, signal.SIGKILL)
    c.start_bookie(0, gcWaitTime=3600000)  # no GC after the restart: what replay does is what we see
    client = BookieClient(c.bookies[0].bookie_id, address=c.bookies[0].grpc_address)
    try:
        assert client.read_entry(ledger, 0).status == status.ENOLEDGER
        assert client.read_entry(ledger, 49).status == status.ENOLEDGER
    finally:
        client.close()


# -- an engine in this process, its scan held after the local snapshot --------------------------------
@pytest.fixture
def gc_engine(make_bookie, zookeeper):
    """(bookie engine, metadata store on a fresh root of the real ZooKeeper, GC) for a layout."""
    stores = []

    def make(manager: str = "hierarchical", **settings):
        store = ZKMetadataStore(f"zk+{manager}://{zookeeper.connect_string}/gc-{uuid.uuid4().hex[:8]}", 2000)
        stores.append(store)
        store.init_new_cluster()
        bookie = make_bookie(bookieId="127.0.0.1:3181", **settings)
        gc = GarbageCollectorThread(bookie.conf, bookie.storage, store, bookie.conf.bookie_id, bookie.checkpoint)
        return bookie, store, gc

    yield make
    for store in stores:
        store.close()


def add(bookie, ledger: LedgerId, count: int = 2) -> None:
    digest = DigestManager(ledger, b"pw")
    bookie.add_entries(ledger, KEY, digest.build_framed(0, count - 2, 0, [b"x%d" % i for i in range(count)])[0]).result(10)


def create(store, bookie, ledger: LedgerId) -> None:
    """What a client does: the znode first, then entries on the bookie."""
    store.create_ledger(ledger, metadata())
    add(bookie, ledger)


def stored(bookie, ledgers) -> list[LedgerId]:
    return [ledger for ledger in ledgers if bookie.storage.ledger_exists(ledger)]


def drop_empty_znodes(store, path: str) -> None:
    """What an operator's clean-up cron does: remove every empty inner node of the ledger tree."""
    for child in store.zk.get_children(path):
        if child.isdigit():
            drop_empty_znodes(store, f"{path}/{child}")
            if not store.zk.get_children(f"{path}/{child}"):
                store.zk.delete(f"{path}/{child}")


@pytest.mark.parametrize("manager", ["flat", "hierarchical", "longhierarchical"])
def test_layouts_with_empty_and_removed_ranges_delete_only_the_deleted(gc_engine, manager):
    bookie, store, gc = gc_engine(manager)
    ids = [1, 2, 10_001, 20_005, 99_999_999, layout.MAX_SHORT_ID - 1, layout.MAX_SHORT_ID, (1 << 31) + 5,
           (1 << 50) + 7]
    ledgers = [LedgerId(0, i) for i in ids] + [LedgerId(5, 1), LedgerId(5, 70_000), LedgerId(6, 3)]
    for ledger in ledgers:
        create(store, bookie, ledger)
    deleted = [LedgerId(0, 2), LedgerId(0, 10_001), LedgerId(0, (1 << 31) + 5), LedgerId(5, 70_000)]
    for ledger in deleted:
        store.delete_ledger(ledger)  # 10001's and 70000's ranges are now empty
    drop_empty_znodes(store, store.root)  # and 10001's range node is gone
    gc.run_once()
    assert stored(bookie, ledgers) == [ledger for ledger in ledgers if ledger not in deleted]
    assert gc.status().ledgers_deleted == len(deleted)


@pytest.mark.parametrize("verify", [False, True])
def test_a_ledger_created_during_the_scan_is_kept(gc_engine, verify):
    bookie, store, gc = gc_engine(verifyMetadataOnGC=verify)
    old, gone = LedgerId(0, 10), LedgerId(0, 11)
    for ledger in (old, gone):
        create(store, bookie, ledger)
    store.delete_ledger(gone)
    newcomers = [LedgerId(0, 12), LedgerId(0, 40_000), LedgerId(0, 1 << 40)]  # a range of its own, past the last
    gc.scanner.after_snapshot = lambda: [create(store, bookie, ledger) for ledger in newcomers]
    gc.run_once()
    assert stored(bookie, [old, gone, *newcomers]) == [old, *newcomers]


def test_zookeeper_sigstopped_mid_scan_deletes_nothing(gc_engine, zookeeper):
    bookie, store, gc = gc_engine()
    live, gone = LedgerId(0, 1), LedgerId(0, 2)
    for ledger in (live, gone):
        create(store, bookie, ledger)
    store.delete_ledger(gone)
    stopped = []

    def stop_zookeeper():
        stopped.append(hold(zookeeper.proc.pid))  # every thread stopped: no answer slips out after it

    gc.scanner.after_snapshot = stop_zookeeper
    scan = threading.Thread(target=gc.run_once)
    try:
        scan.start()
        scan.join(DEADLINE)  # the listing fails once the client sees the server silent (2 s session)
        assert not scan.is_alive()
    finally:
        for resume in stopped:
            resume()
        scan.join(DEADLINE)
    assert stored(bookie, [live, gone]) == [live, gone] and gc.status().ledgers_deleted == 0
    gc.scanner.after_snapshot = None
    wait_for(lambda: store.zk.connected, "the store to reconnect")
    gc.run_once()
    assert stored(bookie, [live, gone]) == [live]


def test_connection_loss_during_the_listing_deletes_nothing(gc_engine, zookeeper):
    bookie, store, gc = gc_engine()
    ledgers = [LedgerId(0, 1), LedgerId(0, 2), LedgerId(0, 50_000)]
    for ledger in ledgers:
        create(store, bookie, ledger)
    store.delete_ledger(ledgers[1])  # garbage in the first range: seen before the connection is lost
    ranges = store.ledger_ranges

    def lose_connection_after_the_first_range(scope_id=0):
        listing = ranges(scope_id)
        yield next(listing)
        resume = hold(zookeeper.proc.pid)
        try:
            yield from listing
        finally:
            resume()

    store.ledger_ranges = lose_connection_after_the_first_range
    gc.run_once()
    assert stored(bookie, ledgers) == ledgers and gc.status().ledgers_deleted == 0
    store.ledger_ranges = ranges
    wait_for(lambda: store.zk.connected, "the store to reconnect")
    gc.run_once()
    assert stored(bookie, ledgers) == [ledgers[0], ledgers[2]]
