"""Issue 13, last test: this project's AutoRecovery re-replicates a mixed cluster. Two Java bookies (Apache
BookKeeper 4.17) and three of ours on one ZooKeeper root (LocalBookKeeper lays it out, the Java bookies join
it); ledgers written by the Java client tool and by this project's client on ensembles naming the first Java
bookie, which is SIGKILLed; one real ``bk autorecovery`` process (auditor and replication worker) copies its
fragments over BookKeeper's native protocol (Java bookies) and gRPC (ours). Then no metadata names the dead
bookie, nothing is marked, the Java client reads every ledger back and each bookie of every ensemble holds
exactly its stripe (GetListOfEntriesOfLedger, both kinds). Every process is stopped by PID by the fixture."""
from __future__ import annotations

import uuid

import pytest

from bookie.client import BookKeeper
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk, payload
from tests.helpers.java_tools import summary_of
from tests.helpers.waiting import wait_for
from tests.helpers.replication import assert_fully_replicated

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)

ENTRY_SIZE = 100
ENTRIES = 300
JAVA_LEDGERS_ON_VICTIM = 2  # the Java client places its ensembles itself: write until this many name the victim
MAX_JAVA_WRITES = 12
AUTORECOVERY = {"zkTimeout": 2000, "lostBookieRecoveryDelay": 0, "rwRereplicateBackoffMs": 200}


@pytest.fixture
def mixed(zookeeper, tmp_path):
    """Three bookies of ours and two Java bookies on one root, and this project's client on it."""
    ours = LocalBookKeeper(3, base_dir=str(tmp_path / "ours"), zookeeper=zookeeper,
                           root=f"/armixed-{uuid.uuid4().hex[:8]}", bookie_settings={"zkTimeout": 2000})
    java = RealBookKeeper(zookeeper.connect_string, str(tmp_path / "java"), num_bookies=2, root=ours.root,
                          taken_ports=ours.ports)
    bk = None
    try:
        ours.start()
        java.start(init_cluster=False)
        bk = BookKeeper(ours.metadata_service_uri, {"readTimeout": 5.0, "addEntryTimeout": 5.0})
        everyone = {b.bookie_id for b in ours.bookies} | {b.bookie_id for b in java.bookies}
        wait_for(lambda: set(bk.writable_bookies()) == everyone, what="all five bookies writable")
        yield ours, java, bk
    finally:
        if bk is not None:
            bk.close()
        java.stop()
        ours.stop()  # also the autorecovery process, by PID


def names(bk: BookKeeper, ledger: int, bookie: str) -> bool:
    return any(bookie in ensemble for _, ensemble in bk.ledger_metadata(ledger).ensembles)


def replacements(bk: BookKeeper, ledger: int, before: list[str]) -> set[str]:
    """The bookies of the ledger's ensembles now that were not in its ensemble ``before``."""
    return {b for _, ensemble in bk.ledger_metadata(ledger).ensembles for b in ensemble} - set(before)


def test_our_autorecovery_rereplicates_a_lost_java_bookie_for_both_clients(mixed):
    ours, java, bk = mixed
    j0, j1 = (b.bookie_id for b in java.bookies)
    o0, o1, o2 = (b.bookie_id for b in ours.bookies)
    expected = [payload(i, ENTRY_SIZE) for i in range(ENTRIES)]

    # This client's ledgers, striped and not, on ensembles naming j0. [j0, o0, j1, o1] leaves one
    # live bookie outside it, o2: its replacement is one of ours whoever the worker picks.
    ensembles = {}
    for e, wq, ensemble in [(3, 2, [j0, o0, o1]), (3, 3, [o0, j0, o2]), (4, 2, [j0, o0, j1, o1])]:
        lh = bk.create_ledger(e, wq, 2, bookies=ensemble)
        lh.append_batch(expected).result()
        lh.close()
        ensembles[lh.ledger_id] = ensemble
    our_ledgers = list(ensembles)

    java_ledgers = []
    while sum(j0 in ensembles[lid] for lid in java_ledgers) < JAVA_LEDGERS_ON_VICTIM:
        assert len(java_ledgers) < MAX_JAVA_WRITES, f"the Java client never placed {JAVA_LEDGERS_ON_VICTIM} ensembles on {j0}"
        lid = int(java.client("write", str(ENTRIES), "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2",
                              "--entry-size", str(ENTRY_SIZE)).stdout)
        ensembles[lid] = bk.ledger_metadata(lid).last_ensemble
        java_ledgers.append(lid)

    java.bookies[0].kill()
    ours.start_autorecovery("ar-mixed", **AUTORECOVERY)
    manager = LedgerUnderreplicationManager(bk.store)
    wait_for(lambda: not any(names(bk, lid, j0) for lid in ensembles) and not list(manager.list_underreplicated()),
             what=f"every ledger re-replicated off the killed Java bookie {j0}, nothing marked", timeout=240)

    assert replacements(bk, our_ledgers[2], ensembles[our_ledgers[2]]) == {o2}
    for lid in java_ledgers:
        verified = java.client("verify", str(lid), str(ENTRIES), "--entry-size", str(ENTRY_SIZE), "--no-recovery")
        assert f"OK ledger {lid}: {ENTRIES} entries verified" in verified.stdout
    for lid in our_ledgers:
        summary = dict(field.split("=", 1) for field in java.client("read", str(lid), "--format", "summary").stdout.split())
        assert (summary["entries"], summary["closed"]) == (str(ENTRIES), "true"), summary
        assert summary["sha256"] == summary_of(expected)
    for lid in ensembles:
        assert_fully_replicated(bk, lid)  # our replacements and the Java bookies alike hold exactly their stripes
