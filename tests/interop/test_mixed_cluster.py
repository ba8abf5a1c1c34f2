"""Issue 11 test 4: a mixed cluster, two Java bookies (Apache BookKeeper 4.17) and two of this
project's bookies on one ZooKeeper root (LocalBookKeeper lays it out, the Java bookies join it).

Ensembles span both kinds; this project's client speaks gRPC to its own bookies and BookKeeper's
native protocol to the Java ones (BookKeeper.bookie_client), the Java client tool speaks the native
protocol to all four. Each client writes and the other reads; a bookie of each kind is SIGKILLed
during writes and nothing acknowledged is lost. Module-scoped; the kill test runs last (it leaves
two bookies dead). Every process is stopped by PID by the fixtures.
"""
from __future__ import annotations

import uuid
from concurrent.futures import Future

import pytest

from bookie.client import BookKeeper
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk, payload
from tests.helpers.java_tools import summary_of
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)

ENTRY_SIZE = 100


class MixedCluster:
    """Both kinds of bookie on one root, and this project's client on it."""

    def __init__(self, ours: LocalBookKeeper, java: RealBookKeeper, bk: BookKeeper):
        self.ours, self.java, self.bk = ours, java, bk

    @property
    def our_ids(self) -> set[str]:
        return {b.bookie_id for b in self.ours.bookies}

    @property
    def java_ids(self) -> set[str]:
        return {b.bookie_id for b in self.java.bookies}

    def java_summary(self, ledger: int) -> dict[str, str]:
        out = self.java.client("read", str(ledger), "--format", "summary").stdout.split()
        return dict(field.split("=", 1) for field in out)


@pytest.fixture(scope="module")
def mixed(zookeeper, tmp_path_factory):
    base = tmp_path_factory.mktemp("mixed")
    # Our bookies' short session lets a SIGKILLed one drop out of the writable set quickly.
    ours = LocalBookKeeper(2, base_dir=str(base / "ours"), zookeeper=zookeeper, root=f"/mixed-{uuid.uuid4().hex[:8]}",
                           bookie_settings={"zkTimeout": 2000})
    java = RealBookKeeper(zookeeper.connect_string, str(base / "java"), num_bookies=2, root=ours.root,
                          taken_ports=ours.ports)
    bk = None
    try:
        ours.start()
        java.start(init_cluster=False)  # the root is LocalBookKeeper's: the Java bookies join it
        bk = BookKeeper(ours.metadata_service_uri, {"readTimeout": 5.0, "addEntryTimeout": 5.0})
        cluster = MixedCluster(ours, java, bk)
        wait_for(lambda: set(bk.writable_bookies()) == cluster.our_ids | cluster.java_ids, what="all four bookies writable")
        yield cluster
    finally:
        if bk is not None:
            bk.close()
        java.stop()
        ours.stop()


def test_every_bookie_is_reached_over_its_own_transport(mixed):
    for b in mixed.our_ids:
        assert mixed.bk.speaks_grpc(b), b
    for b in mixed.java_ids:
        assert not mixed.bk.speaks_grpc(b), b


def test_java_client_reads_what_this_client_writes_over_a_mixed_ensemble(mixed):
    j0, j1 = (b.bookie_id for b in mixed.java.bookies)
    o0, o1 = (b.bookie_id for b in mixed.ours.bookies)
    lh = mixed.bk.create_ledger(ensemble_size=4, write_quorum=3, ack_quorum=2, bookies=[j0, o0, j1, o1])
    lh.append(payload(0, ENTRY_SIZE))
    lh.append_batch([payload(i, ENTRY_SIZE) for i in range(1, 1500)]).result()
    for i in range(1500, 2000):
        lh.append_async(payload(i, ENTRY_SIZE))
    lh.close()
    assert set(mixed.bk.ledger_metadata(lh.ledger_id).last_ensemble) == {j0, o0, j1, o1}

    verified = mixed.java.client("verify", str(lh.ledger_id), "2000", "--entry-size", str(ENTRY_SIZE))
    assert f"OK ledger {lh.ledger_id}: 2000 entries verified" in verified.stdout
    summary = mixed.java_summary(lh.ledger_id)
    assert (summary["entries"], summary["lac"], summary["closed"]) == ("2000", "1999", "true")
    assert summary["sha256"] == summary_of([payload(i, ENTRY_SIZE) for i in range(2000)])


def test_this_client_reads_what_the_java_client_writes_over_a_mixed_ensemble(mixed):
    # E=4 over exactly four bookies: the Java client's ensemble is all of them, both kinds.
    ledger = int(mixed.java.client("write", "2000", "--ensemble", "4", "--write-quorum", "3", "--ack-quorum", "2",
                                   "--entry-size", str(ENTRY_SIZE)).stdout)
    metadata = mixed.bk.ledger_metadata(ledger)
    ensemble = set(metadata.last_ensemble)
    assert ensemble & mixed.our_ids and ensemble & mixed.java_ids, metadata
    assert metadata.last_entry_id == 1999
    rh = mixed.bk.open_ledger(ledger, password=b"")
    assert [e.payload for e in rh.read(0, 1999)] == [payload(i, ENTRY_SIZE) for i in range(2000)]


def _append_and_kill(lh, first: int, count: int, kill_after: int, kill) -> list[Future]:
    """Append ``count`` entries from ``first``; once the first ``kill_after`` are acknowledged, ``kill()``."""
    futures = [lh.append_async(payload(i, ENTRY_SIZE)) for i in range(first, first + kill_after)]
    for f in futures:
        f.result(timeout=60)
    kill()
    futures += [lh.append_async(payload(i, ENTRY_SIZE)) for i in range(first + kill_after, first + count)]
    return futures


def test_a_bookie_of_each_kind_killed_during_writes_loses_nothing_acknowledged(mixed):
    """E=3 WQ=3 AQ=2 over [Java, ours, Java] with our second bookie spare: SIGKILL the first Java
    bookie (the spare takes its place), add a third bookie of ours as the next spare, SIGKILL our
    first bookie. Every entry stays on at least one live bookie, so all are read back with both
    victims still down."""
    bk = mixed.bk
    j0, j1 = mixed.java.bookies
    o0, o1 = mixed.ours.bookies
    lh = bk.create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2, bookies=[j0.bookie_id, o0.bookie_id, j1.bookie_id])

    futures = _append_and_kill(lh, 0, 600, 200, j0.kill)
    for f in futures:
        f.result(timeout=60)
    assert j0.bookie_id not in bk.ledger_metadata(lh.ledger_id).last_ensemble
    assert o1.bookie_id in bk.ledger_metadata(lh.ledger_id).last_ensemble

    # The next change needs a spare; the dead Java bookie must be out of the writable set first
    # (its ZooKeeper session expires after zkTimeout), so it cannot be picked as the replacement.
    spare = mixed.ours.add_bookie()
    wait_for(lambda: j0.bookie_id not in bk.writable_bookies() and spare.bookie_id in bk.writable_bookies(),
             what="the killed Java bookie gone and the spare writable")
    futures += _append_and_kill(lh, 600, 600, 200, lambda: mixed.ours.kill_bookie(o0.index))
    acknowledged = [f.result(timeout=60) for f in futures]
    assert acknowledged == list(range(1200))
    lh.close()

    metadata = bk.ledger_metadata(lh.ledger_id)
    assert len(metadata.fragments()) >= 3, metadata
    assert set(metadata.last_ensemble) == {o1.bookie_id, spare.bookie_id, j1.bookie_id}, metadata
    assert metadata.last_entry_id == 1199
    rh = bk.open_ledger(lh.ledger_id, password=b"")
    expected = [payload(i, ENTRY_SIZE) for i in range(1200)]
    assert [e.payload for e in rh.read(0, 1199)] == expected
    # The Java client agrees, over the native protocol to every live bookie of the ensembles.
    assert mixed.java_summary(lh.ledger_id)["sha256"] == summary_of(expected)
