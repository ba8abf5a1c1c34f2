"""ZooKeeper as operators run it (issue 30, item 4): a three-server ensemble (each server a process of its own,
in quorum mode) and a chrooted ledgers root, in BookKeeper's URI form ``zk://h1:p1;h2:p2;h3:p3/chroot/ledgers``.

- bookies, a client and ``bk shell initnewcluster`` work under the deeper root, and nothing lands beside it;
- a client whose ZooKeeper server hangs with a request of its in flight, and is then SIGKILLed, goes on
  through the other two servers (the request is sent again there);
- session expiry, forced by SIGSTOPping a process for longer than its session timeout while the ensemble
  runs (until its ephemeral node is gone, then SIGCONT): a bookie registers again, with its endpoints, and
  serves; the test's own client (its session closed by ZooKeeper's testing approach: a second connection on
  the same session, closed) goes on writing, also in a ledger it had open; a ``bk autorecovery`` participant
  stops being the auditor before it votes again, is elected again, and its auditor and worker re-replicate
  a lost bookie's ledgers.

The tests share one ensemble and cluster, in this order; each leaves them whole (three servers, the bookies
it found), except the last, which loses a bookie. Every process is stopped by PID, also on failure (a
SIGSTOPped one gets SIGCONT first)."""
from __future__ import annotations

import os
import signal
import types

import pytest
from kazoo.client import KazooClient

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.replication.auditor_elector import ELECTION_PATH, current_auditor
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.zookeeper_server import ZooKeeperEnsemble
from bookie.util.processes import stop_process
from tests.helpers.held_process import hold
from tests.helpers.replication import assert_restored, names, payloads, write
from tests.helpers.shell import bk_shell_run
from tests.helpers.waiting import wait_for

ROOT = "/chroot/ledgers"
BOOKIE_SETTINGS = {"zkTimeout": 3000}
CLIENT = {"zkTimeout": 3000, "addEntryTimeout": 3.0, "readTimeout": 3.0}


class EnsembleBookKeeper(LocalBookKeeper):
    """LocalBookKeeper on the ensemble, its servers separated by ';' in the URI as BookKeeper documents
    ``metadataServiceUri`` (LocalBookKeeper joins them with ',', the connect string's separator)."""

    @property
    def metadata_service_uri(self) -> str:
        return f"zk://{self.zookeeper.connect_string.replace(',', ';')}{self.root}"


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    zk = ZooKeeperEnsemble(str(tmp_path_factory.mktemp("ensemble")), tick_time=500).start()
    yield zk
    zk.stop()


@pytest.fixture(scope="module")
def cluster(ensemble, tmp_path_factory):
    c = EnsembleBookKeeper(3, base_dir=str(tmp_path_factory.mktemp("cluster")), zookeeper=ensemble, root=ROOT,
                           bookie_settings=BOOKIE_SETTINGS).start()
    yield c
    c.stop()


@pytest.fixture
def bk(cluster):
    client = BookKeeper(cluster.metadata_service_uri, CLIENT)
    yield client
    client.close()


@pytest.fixture
def store(cluster):
    with ZKMetadataStore(cluster.metadata_service_uri) as s:
        yield s


def write_and_read(bk: BookKeeper, tag: str, ensemble_size: int = 3) -> tuple[int, list[bytes]]:
    """A new ledger (E=ensemble_size, WQ=AQ=2) written, closed and read back whole: its id and entries."""
    data = payloads(tag, 20)
    lh = bk.create_ledger(ensemble_size, 2, 2, password=b"pw")
    write(lh, data)
    lh.close()
    with bk.open_ledger(lh.ledger_id, b"pw") as reader:
        assert [e.payload for e in reader.read(0, len(data) - 1)] == data
    return lh.ledger_id, data


def test_three_servers_and_a_chroot_in_bookkeepers_uri_form(cluster, ensemble, bk, store):
    uri = cluster.metadata_service_uri
    assert uri.count(";") == 2 and uri.endswith(ROOT)
    assert store.uri.hosts == ensemble.connect_string and store.root == ROOT
    assert sorted(p.mode() for p in ensemble.peers) == ["follower", "follower", "leader"]
    assert store.bookies() == sorted(b.bookie_id for b in cluster.bookies)
    ledger, _ = write_and_read(bk, "chroot")
    path = store.ledger_path(LedgerId(0, ledger))
    assert path.startswith(ROOT + "/") and store.zk.exists(path) is not None
    assert sorted(store.zk.get_children("/")) == ["chroot", "zookeeper"]  # nothing beside the root
    assert {"INSTANCEID", "LAYOUT", "available", "idgen"} <= set(store.zk.get_children(ROOT))
    # `bk shell initnewcluster` on a new root three levels deep creates the parents, and names the cluster
    # by its URI in BookKeeper's form
    deeper = uri.replace(ROOT, "/tenant/prod/ledgers")
    created = bk_shell_run(types.SimpleNamespace(metadata_service_uri=deeper), "initnewcluster")
    assert created.returncode == 0, created.stderr
    assert f"created cluster {deeper} " in created.stdout
    with ZKMetadataStore(deeper) as other:
        assert other.instance_id() != store.instance_id() and other.bookies() == []


def test_a_client_goes_on_when_its_zookeeper_server_hangs_and_is_killed(cluster, ensemble, bk, store):
    write_and_read(bk, "before")
    session = bk.store.zk.client_id[0]
    wait_for(lambda: ensemble.serving(session) is not None, "the server holding the client's session")
    index = ensemble.serving(session)
    resume = hold(ensemble.peers[index].proc.pid)
    try:
        # The ledger id request goes to the hung server and gets no answer; the client gives that server up
        # when its heartbeats go unanswered, and the request is sent again through another server.
        write_and_read(bk, "through-another-server")
        assert ensemble.kill(index) == -signal.SIGKILL
        write_and_read(bk, "two-servers-left")
        wait_for(lambda: store.bookies() == sorted(b.bookie_id for b in cluster.bookies), "every bookie registered")
    finally:
        resume()
        ensemble.kill(index)
        ensemble.start_server(index)  # three servers again for the next tests
    write_and_read(bk, "three-servers-again")


def test_a_bookie_registers_again_after_its_session_expired(cluster, bk, store):
    bookie = cluster.bookies[0]
    session = store.registration_session(bookie.bookie_id)
    info = store.bookie_service_info(bookie.bookie_id)
    resume = hold(bookie.proc.pid)
    try:
        wait_for(lambda: store.registration_session(bookie.bookie_id) is None,
                 "the held bookie's session to expire (its registration gone)")
        wait_for(lambda: bookie.bookie_id not in bk.writable_bookies(), "the client to see it gone")
    finally:
        resume()
    wait_for(lambda: store.registration_session(bookie.bookie_id) not in (None, session),
             "the bookie registered again, with a new session")
    assert store.bookie_service_info(bookie.bookie_id) == info  # the same endpoints
    wait_for(lambda: bookie.bookie_id in bk.writable_bookies(), "the client to see it writable again")
    ledger, _ = write_and_read(bk, "bookie-back")  # E=3 on three bookies: it stores a copy
    assert bookie.bookie_id in bk.ledger_metadata(ledger).last_ensemble


def expire_session(connect_string: str, client_id: tuple[int, bytes]) -> None:
    """Make ZooKeeper expire a client's session: a second connection joins it, then closes it (ZooKeeper's own
    testing approach); the client learns of the expiry when it reconnects."""
    thief = KazooClient(connect_string, client_id=client_id)
    thief.start(timeout=30)
    thief.stop()
    thief.close()


def test_the_client_goes_on_after_its_session_expired(ensemble, bk):
    data = payloads("open-across-expiry", 20)
    lh = bk.create_ledger(3, 2, 2, password=b"pw")
    write(lh, data[:10])
    old = bk.store.zk.client_id
    expire_session(ensemble.connect_string, old)
    wait_for(lambda: bk.store.zk.connected and bk.store.zk.client_id not in (None, old), "a new session")
    write(lh, data[10:])
    lh.close()
    with bk.open_ledger(lh.ledger_id, b"pw") as reader:
        assert [e.payload for e in reader.read(0, len(data) - 1)] == data
    write_and_read(bk, "after-client-expiry")


def test_autorecovery_survives_its_session_expiry(cluster, bk, store):
    written = dict(write_and_read(bk, f"ar-{i}", ensemble_size=2) for i in range(4))
    LedgerUnderreplicationManager(store).set_lost_bookie_recovery_delay(0)

    def votes() -> list[str]:
        return store.node_children(ELECTION_PATH)

    a = cluster.start_autorecovery("ar-a", zkTimeout=2000)
    a_log = os.path.join(cluster.base_dir, "autorecovery-ar-a.log")
    wait_for(lambda: current_auditor(store) == "ar-a", "ar-a elected")
    b = cluster.start_autorecovery("ar-b", zkTimeout=2000)
    wait_for(lambda: len(votes()) == 2, "ar-b's vote")
    first_vote = min(votes())
    resume = hold(a.pid)
    try:
        wait_for(lambda: first_vote not in votes(), "ar-a's session to expire (its vote gone)")
        wait_for(lambda: current_auditor(store) == "ar-b", "ar-b elected")
    finally:
        resume()
    wait_for(lambda: len(votes()) == 2, "ar-a's new vote")
    # Its vote's znode comes before its log line saying so: wait for the line, then read the log.
    wait_for(lambda: open(a_log).read().count("voted for the auditor") >= 2, "ar-a's log of its new vote")
    text = open(a_log).read()
    stepped_down = text.find("ar-a is no longer the auditor")
    second_vote = text.find("voted for the auditor", text.find("voted for the auditor") + 1)
    assert 0 <= stepped_down < second_vote, f"ar-a voted again before it stopped being the auditor:\n{text}"

    assert stop_process(b) == 0  # SIGTERM: its vote is withdrawn at once
    wait_for(lambda: current_auditor(store) == "ar-a", "ar-a elected again")
    wait_for(lambda: open(a_log).read().count("ar-a is the auditor") == 2, "a new auditor in ar-a")
    # ar-a's auditor marks a lost bookie's ledgers and its worker (the only one left) copies them
    victim = next(iter(bk.ledger_metadata(min(written)).last_ensemble))
    cluster.kill_bookie(next(b.index for b in cluster.bookies if b.bookie_id == victim))
    wait_for(lambda: not any(names(bk, ledger, victim) for ledger in written), "ar-a to re-replicate the ledgers")
    assert_restored(bk, written, victim)
