"""LedgerUnderreplicationManager on a real ZooKeeper: BookKeeper's znodes and formats, merging marks,
one worker per ledger (ephemeral locks), blocking until a ledger can be locked, enable/disable, the
recovery delay, and the state node beyond BookKeeper."""
from __future__ import annotations

import threading

import pytest
from google.protobuf import text_format

from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta.ledger_underreplication_manager import (COPYING, UNRECOVERABLE, LedgerUnderreplicationManager,
                                                         ReplicationState, state_path)
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto.data_formats_pb2 import LockDataFormat, UnderreplicatedLedgerFormat
from tests.helpers.waiting import DEADLINE, wait_for


@pytest.fixture
def second_session(metadata_store):
    """Another ZooKeeper session on the same root (a second worker)."""
    store = ZKMetadataStore(str(metadata_store.uri))
    yield store
    store.close()


def test_znodes_and_formats_are_bookkeepers(metadata_store):
    urm = LedgerUnderreplicationManager(metadata_store, "worker-1")
    assert metadata_store.read_node("underreplication/LAYOUT").value.decode().split() == \
        ['type:', '"BASIC"', 'version:', '1']
    urm.mark_ledger_underreplicated(0x1_0002_0003, ["127.0.0.1:3181"])
    node = "underreplication/ledgers/0000/0001/0002/0003/urL4295098371"
    assert layout.under_replicated_ledger_path(0x1_0002_0003) == node
    record = text_format.Parse(metadata_store.read_node(node).value.decode(), UnderreplicatedLedgerFormat())
    assert list(record.replica) == ["127.0.0.1:3181"] and record.ctime > 0
    assert urm.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 0x1_0002_0003)
    lock = metadata_store.read_node("underreplication/locks/urL4295098371").value.decode()
    assert text_format.Parse(lock, LockDataFormat()).bookieId == "worker-1"
    urm.set_lost_bookie_recovery_delay(30)
    assert metadata_store.read_node("underreplication/lostBookieRecoveryDelay").value == b"30"


def test_remarking_merges_replicas_and_keeps_ctime(metadata_store):
    urm = LedgerUnderreplicationManager(metadata_store)
    urm.mark_ledger_underreplicated(7, ["b1"])
    first = urm.get_underreplicated(7)
    urm.mark_ledger_underreplicated(7, ["b2", "b1"])
    urm.mark_ledger_underreplicated(9, ["b3"])
    assert urm.get_underreplicated(7).replicas == ("b1", "b2")
    assert urm.get_underreplicated(7).ctime == first.ctime
    assert [u.ledger for u in urm.list_underreplicated()] == [LedgerId(0, 7), LedgerId(0, 9)]
    assert [u.ledger for u in urm.list_underreplicated(lambda replicas: "b3" in replicas)] == [LedgerId(0, 9)]


def test_one_worker_per_ledger_and_locks_die_with_the_session(metadata_store, second_session):
    a = LedgerUnderreplicationManager(metadata_store, "a")
    b = LedgerUnderreplicationManager(second_session, "b")
    a.mark_ledger_underreplicated(5, ["lost"])
    assert a.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 5)
    assert a.is_ledger_being_replicated(5) and b.lock_holder(5) == "a"
    got = []
    waiter = threading.Thread(target=lambda: got.append(b.get_ledger_to_rereplicate(timeout=DEADLINE)))
    waiter.start()
    a.release_underreplicated_ledger(5)  # a failed: the ledger goes to b, which was blocked on its watch
    waiter.join()
    assert got == [LedgerId(0, 5)] and b.lock_holder(5) == "b"
    second_session.close()  # b dies: its ephemeral lock goes with its session
    wait_for(lambda: not a.is_ledger_being_replicated(5), "the dead worker's lock to go")
    assert a.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 5)


def test_blocks_until_a_ledger_is_marked_and_skips(metadata_store, second_session):
    worker = LedgerUnderreplicationManager(metadata_store, "w")
    auditor = LedgerUnderreplicationManager(second_session, "auditor")
    auditor.mark_ledger_underreplicated(3, ["lost"])
    got = []
    waiter = threading.Thread(target=lambda: got.append(
        worker.get_ledger_to_rereplicate(timeout=DEADLINE, skip=lambda ledger: ledger == LedgerId(0, 3))))
    waiter.start()
    auditor.mark_ledger_underreplicated(0x5_0000_0000, ["lost"])  # another top-level branch of the tree
    waiter.join()
    assert got == [LedgerId(0, 0x5_0000_0000)] and not worker.is_ledger_being_replicated(3)


def test_nothing_to_lock_returns_none_after_the_timeout(metadata_store):
    urm = LedgerUnderreplicationManager(metadata_store)
    assert urm.get_ledger_to_rereplicate(timeout=0.2) is None


def test_mark_replicated_deletes_urL_state_lock_and_empty_parents(metadata_store):
    urm = LedgerUnderreplicationManager(metadata_store, "w")
    urm.mark_ledger_underreplicated(11, ["lost"])
    urm.mark_ledger_underreplicated(12, ["lost"])
    assert urm.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 11)
    urm.set_state(11, ReplicationState(COPYING, "copying fragment 0", {"from": "b1", "to": "b4", "progress": 0.5}))
    assert urm.get_state(11).details["to"] == "b4"
    urm.mark_ledger_replicated(11)
    assert urm.get_underreplicated(11) is None and urm.get_state(11) is None
    assert not urm.is_ledger_being_replicated(11)
    assert metadata_store.read_node(state_path(11)) is None
    assert urm.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 12)
    urm.mark_ledger_replicated(12)
    assert metadata_store.node_children("underreplication/ledgers") == []
    urm.set_state(12, ReplicationState(UNRECOVERABLE, "gone"))  # not marked: no state outlives its urL node
    assert urm.get_state(12) is None


def test_a_ledger_remarked_while_locked_stays_marked(metadata_store, second_session):
    worker = LedgerUnderreplicationManager(metadata_store, "w")
    auditor = LedgerUnderreplicationManager(second_session, "auditor")
    auditor.mark_ledger_underreplicated(21, ["b1"])
    assert worker.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 21)
    auditor.mark_ledger_underreplicated(21, ["b2"])  # another bookie of it lost meanwhile
    worker.mark_ledger_replicated(21)
    assert auditor.get_underreplicated(21).replicas == ("b1", "b2")
    assert not worker.is_ledger_being_replicated(21)


def test_disable_enable_and_wait(metadata_store, second_session):
    urm = LedgerUnderreplicationManager(metadata_store)
    admin = LedgerUnderreplicationManager(second_session)
    assert urm.is_ledger_replication_enabled()
    admin.disable_ledger_replication()
    assert metadata_store.read_node("underreplication/disable") is not None
    assert not urm.is_ledger_replication_enabled()
    assert not urm.wait_until_enabled(timeout=0.2)
    done = []
    waiter = threading.Thread(target=lambda: done.append(urm.wait_until_enabled(timeout=DEADLINE)))
    waiter.start()
    admin.enable_ledger_replication()
    waiter.join()
    assert done == [True] and urm.is_ledger_replication_enabled()


def test_recovery_delay_and_check_times(metadata_store):
    urm = LedgerUnderreplicationManager(metadata_store)
    assert urm.get_lost_bookie_recovery_delay() is None
    assert urm.initialize_lost_bookie_recovery_delay(10)
    assert not urm.initialize_lost_bookie_recovery_delay(99)  # the stored value wins
    seen = []
    stop = urm.watch_lost_bookie_recovery_delay(seen.append)
    urm.set_lost_bookie_recovery_delay(0)
    wait_for(lambda: seen[-1:] == [0], "the watch to see the new delay")
    stop()
    assert seen[0] == 10 and urm.get_lost_bookie_recovery_delay() == 0
    assert urm.get_check_all_ledgers_ctime() == -1
    urm.set_check_all_ledgers_ctime(1234)
    urm.set_placement_policy_check_ctime(5)
    urm.set_replicas_check_ctime(6)
    assert (urm.get_check_all_ledgers_ctime(), urm.get_placement_policy_check_ctime(),
            urm.get_replicas_check_ctime()) == (1234, 5, 6)


def test_an_unknown_layout_is_refused(metadata_store):
    metadata_store.create_node("underreplication/LAYOUT", b'type: "FANCY" version: 2')
    with pytest.raises(ValueError, match="FANCY"):
        LedgerUnderreplicationManager(metadata_store)


def test_an_idle_worker_does_not_pile_up_watches(metadata_store):
    urm = LedgerUnderreplicationManager(metadata_store)
    urm.mark_ledger_underreplicated(1, ["lost"])
    assert urm.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 1)  # ours now: the others find nothing to lock
    for _ in range(3):
        assert urm.get_ledger_to_rereplicate(timeout=0.05) is None
    watchers = metadata_store.zk._child_watchers
    assert all(len(watchers[path]) == 1 for path in watchers), {p: len(w) for p, w in watchers.items()}


def test_scoped_ledgers_are_marked_locked_and_released_apart_from_bookkeepers_tree(metadata_store, second_session):
    """A 128-bit (BP-35) ledger has no urL%010d name: it is marked in a tree of its own that BookKeeper's
    tools never walk, listed after scope 0's, locked one worker at a time, and cleaned up like the others."""
    worker = LedgerUnderreplicationManager(metadata_store, "w")
    other = LedgerUnderreplicationManager(second_session, "other")
    scoped, plain = LedgerId(0x7, 0x5), LedgerId(0, 0x7_0000_0005)  # same 64-bit halves, different ledgers
    worker.mark_ledger_underreplicated(scoped, ["b1"])
    worker.mark_ledger_underreplicated(plain, ["b2"])
    node = ("underreplication/scopedledgers/0000/0000/0000/0007/0000/0000/0000/"
            "urS00000000000000070000000000000005")
    assert layout.under_replicated_ledger_path(scoped) == node and metadata_store.read_node(node) is not None
    assert [u.ledger for u in worker.list_underreplicated()] == [plain, scoped]
    assert worker.get_underreplicated(scoped).replicas == ("b1",)
    assert worker.get_ledger_to_rereplicate(timeout=DEADLINE, skip=lambda ledger: ledger == plain) == scoped
    assert other.lock_holder(scoped) == "w" and other.lock_holder(plain) is None
    assert other.get_ledger_to_rereplicate(timeout=0.2, skip=lambda ledger: ledger == plain) is None
    worker.set_state(scoped, ReplicationState(COPYING, "copying"))
    assert other.get_state(scoped).state == COPYING and other.get_state(plain) is None
    worker.mark_ledger_replicated(scoped)
    assert other.get_underreplicated(scoped) is None and not other.is_ledger_being_replicated(scoped)
    assert metadata_store.node_children("underreplication/scopedledgers") == []
    assert [u.ledger for u in other.list_underreplicated()] == [plain]


def test_a_waiting_worker_wakes_for_a_scoped_mark(metadata_store, second_session):
    worker = LedgerUnderreplicationManager(metadata_store, "w")
    auditor = LedgerUnderreplicationManager(second_session, "auditor")
    got = []
    waiter = threading.Thread(target=lambda: got.append(worker.get_ledger_to_rereplicate(timeout=DEADLINE)))
    waiter.start()
    wait_for(lambda: metadata_store.zk._child_watchers.get(f"{metadata_store.root}/underreplication/scopedledgers"),
             "the worker watching the scoped tree")
    auditor.mark_ledger_underreplicated(LedgerId(3, 1), ["lost"])
    waiter.join()
    assert got == [LedgerId(3, 1)]


def test_acquire_locks_a_ledger_marked_or_not_excludes_workers_and_waits_for_a_release(metadata_store, second_session):
    gc = LedgerUnderreplicationManager(metadata_store, "bookie-1")
    worker = LedgerUnderreplicationManager(second_session, "worker")
    assert gc.acquire_underreplicated_ledger(31)  # not marked: locked all the same (BookKeeper's acquire)
    assert worker.lock_holder(31) == "bookie-1"
    assert not worker.acquire_underreplicated_ledger(31, timeout=0.0)
    gc.mark_ledger_underreplicated(31, ["lost"])
    assert worker.get_ledger_to_rereplicate(timeout=0.5) is None  # held: no worker takes it
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(worker.acquire_underreplicated_ledger(31, timeout=DEADLINE)))
    waiter.start()
    gc.release_underreplicated_ledger(31)
    waiter.join()
    assert waited == [True] and worker.lock_holder(31) == "worker"
    worker.release_underreplicated_ledger(31)
    assert worker.get_ledger_to_rereplicate(timeout=DEADLINE) == LedgerId(0, 31)
