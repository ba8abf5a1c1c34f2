"""What AutoRecovery costs ZooKeeper, counted (real ZooKeeper, real bookie processes).

- The auditor's check of every ledger (BookKeeper's AuditorCheckAllLedgersTask) reads each ledger's metadata
  once, pipelined, and asks ZooKeeper nothing more per ledger: N ledgers, about N requests.
- A replication worker's round on one ledger stays within what BookKeeper's ReplicationWorker and
  ZkLedgerUnderreplicationManager need, plus this implementation's state node (see WORKER_BUDGET).
- With a lost bookie, the check marks exactly the ledgers that opening and checking each ledger one at a time
  (what it did before it was pipelined) finds, with the same missing replicas.

Requests are counted at kazoo's ``KazooClient._call``, through which every request of a client goes (reads,
writes, listings, the re-arming of watches; pings aside): the server's ``srvr`` counter would also count the
bookies' sessions on the shared ZooKeeper.
"""
from __future__ import annotations

import collections
import threading

from bookie.client import BookKeeper
from bookie.client.ledger_checker import LedgerChecker
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.replication.auditor import Auditor
from bookie.replication.replication_worker import ReplicationWorker
from bookie.server.conf import ServerConfiguration
from tests.helpers.replication import CLIENT, assert_fully_replicated, marked, names, payloads, write
from tests.helpers.waiting import wait_for

# One worker round on a closed ledger of one fragment, in BookKeeper 4.17.4: getLedgerToRereplicate (exists on
# the disable node; SubTreeCache re-lists the level its last round changed, the new leaf and the locks; exists
# on the urL node; create the lock: 6), openLedgerNoRecovery (1), the fragment's metadata update (1), the second
# check on the same handle (0), markLedgerReplicated (delete the urL node, exists + delete of its leaf and of the
# level above, which stops there as not empty; delete the lock: 6): 14. Here: no locks listing and no exists
# before each delete (-3); the state node (read under the lock for another worker's verdict, "copying" written,
# deleted with the urL node: +3); LedgerFragmentReplicator reads the metadata before the copy and again before
# its update (+2, bookie/client/ledger_fragment_replicator.py): 16.
WORKER_BUDGET = 16
# Once per worker, not per ledger: its first walk lists every level of the tree, its first "copying" creates the
# state tree's parents, its client reads the registration of each bookie it first talks to, the last ledger's
# cleanup deletes the emptied levels above.
WORKER_WARMUP = 20
# Once per check: listing the ledger tree, the ctime written (set, then create if it is the first), the client's
# registration watch re-armed if a bookie moved meanwhile.
CHECK_CONSTANT = 12


class ZooKeeperRequests:
    """Counts, by request type, what the given kazoo clients send while in the ``with`` block."""

    def __init__(self, *stores):
        self.clients = [store.zk for store in stores]
        self.counts: collections.Counter = collections.Counter()
        self.paths: list[str] = []
        self._lock = threading.Lock()

    def __enter__(self) -> "ZooKeeperRequests":
        for zk in self.clients:
            call = zk._call

            def counted(request, async_object, call=call):
                with self._lock:
                    self.counts[type(request).__name__] += 1
                    self.paths.append(f"{type(request).__name__} {getattr(request, 'path', '')}")
                return call(request, async_object)
            zk._call = counted
        return self

    def __exit__(self, *exc) -> None:
        for zk in self.clients:
            del zk._call  # the class's method again

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def __str__(self) -> str:
        return f"{self.total} requests {dict(self.counts)}"


def closed_ledger(bk: BookKeeper, bookies: list[str], tag: str, entries: int = 10, wq: int = 2) -> int:
    handle = bk.create_ledger(len(bookies), wq, 2, bookies=bookies, password=b"pw")
    write(handle, payloads(tag, entries))
    handle.close()
    return handle.ledger_id


def empty_closed(bk: BookKeeper, ledger_id: int, bookies: list[str]) -> int:
    """A closed ledger without entries written as metadata alone (what bench/scale.py creates by the thousand)."""
    md = LedgerMetadata(len(bookies), 2, 2, ((0, tuple(bookies)),), b"pw", state=LedgerState.CLOSED, last_entry_id=-1)
    bk.store.create_ledger(LedgerId(0, ledger_id), md)
    return ledger_id


def auditor_of(bk: BookKeeper) -> Auditor:
    """An auditor whose check of every ledger the test calls itself (no thread, no periodic checks)."""
    conf = ServerConfiguration({"auditorPeriodicCheckInterval": 0, "auditorPeriodicBookieCheckInterval": 0})
    return Auditor("auditor", bk.store, LedgerUnderreplicationManager(bk.store, "auditor"), conf, client=lambda: bk)


def test_checking_every_ledger_costs_one_zookeeper_read_per_ledger(bk_cluster):
    c, bk = bk_cluster(3, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    real = [closed_ledger(bk, b, f"r{i}") for i in range(3)]
    ghost = "127.0.0.1:9"  # named by some ledgers, never registered: a lost bookie
    empty = [empty_closed(bk, 1_000_000 + i, b) for i in range(300)]
    lost = [empty_closed(bk, 2_000_000 + i, [b[0], ghost, b[2]]) for i in range(2)]
    ledgers = len(real) + len(empty) + len(lost)
    auditor = auditor_of(bk)
    with ZooKeeperRequests(bk.store) as requests:
        found = auditor.check_all_ledgers()
    assert found == {LedgerId(0, lid): {ghost} for lid in lost}
    assert marked(bk.store) == {lid: (ghost,) for lid in lost}
    # Marking a ledger: a read, then the create of its urL node and of the missing levels above it (kazoo's
    # makepath: an exists and a create each).
    marking = 12 * len(lost)
    assert requests.total <= ledgers + marking + CHECK_CONSTANT, requests
    assert requests.counts["GetData"] <= ledgers + len(lost) + 2, requests  # one read per ledger, none more


def test_a_worker_round_stays_within_bookkeepers_round_trips(bk_cluster):
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    ledgers = [closed_ledger(bk, b[:3], f"w{i}") for i in range(6)]
    c.kill_bookie(0)
    manager = LedgerUnderreplicationManager(bk.store, "auditor")
    for lid in ledgers:
        manager.mark_ledger_underreplicated(lid, [b[0]])
    worker_bk = BookKeeper(c.metadata_service_uri, CLIENT)
    worker = ReplicationWorker(worker_bk, LedgerUnderreplicationManager(worker_bk.store, "worker"))
    try:
        wait_for(lambda: b[0] not in worker.checker.available(), f"the worker's client seeing {b[0]} gone")
        with ZooKeeperRequests(worker_bk.store) as requests:
            done = [worker.rereplicate_one(timeout=30) for _ in ledgers]
    finally:
        worker.shutdown()
        worker_bk.close()
    assert done == [LedgerId(0, lid) for lid in ledgers]
    assert marked(bk.store) == {}
    for lid in ledgers:
        assert not names(bk, lid, b[0])
        assert_fully_replicated(bk, lid)
    assert requests.total <= WORKER_BUDGET * len(ledgers) + WORKER_WARMUP, \
        f"{requests} for {len(ledgers)} ledgers:\n" + "\n".join(requests.paths)


def test_the_check_marks_what_checking_each_ledger_one_at_a_time_finds(bk_cluster):
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    striped = closed_ledger(bk, b[:3], "s", 30)
    plain = closed_ledger(bk, [b[0], b[1], b[2]], "p", 20, wq=3)
    closed_ledger(bk, b[1:4], "e")  # not on the lost bookie: not marked
    single = closed_ledger(bk, [b[0], b[1]], "one", 1)  # b1 stores entry 0 too; b0 is lost
    writer = bk.create_ledger(3, 2, 2, bookies=b[:3], password=b"pw")  # open, its writer alive
    write(writer, payloads("o", 10))
    empty_on_lost = empty_closed(bk, 3_000_000, b[:3])
    empty_closed(bk, 3_000_001, b[1:4])
    c.kill_bookie(0)
    checker = LedgerChecker(bk)
    wait_for(lambda: b[0] not in checker.available(), f"the client seeing {b[0]} gone")

    # What the check did before it was pipelined: each ledger opened on its own and checked, one at a time.
    before = {}
    for ledger in bk.store.iterate_ledgers(None):
        handle = bk.open_ledger(ledger, b"pw", recovery=False)
        bad = {bookie for fragment in checker.check_ledger(handle) for bookie in fragment.bad_bookies}
        if bad:
            before[ledger] = bad
    assert set(before) == {LedgerId(0, lid) for lid in (striped, plain, single, writer.ledger_id, empty_on_lost)}

    found = auditor_of(bk).check_all_ledgers()
    assert found == before
    assert marked(bk.store) == {ledger.ledger_id: tuple(sorted(bad)) for ledger, bad in before.items()}
    writer.append(b"still writing")  # the check opened it without recovery: its writer goes on
