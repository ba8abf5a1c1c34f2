"""Issue 11 tests 1 and 2: this project's client and real Apache BookKeeper bookies (Java), over
BookKeeper's native protocol, with BookKeeper's own Java client as the other side.

One Java cluster (four bookies: an E=3 ensemble has a spare to change to) on the session's real
ZooKeeper for the module; skipped with how to get one where no BookKeeper install is found.
"""
from __future__ import annotations

import pytest

from bookie.client import BookKeeper
from bookie.exceptions import BKNotEnoughBookiesException
from bookie.meta.ledger_metadata import LedgerState
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk, payload
from bookie.util.processes import stop_process
from tests.helpers.java_tools import ledger_being_written, summary_of

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)

ENTRY_SIZE = 100


@pytest.fixture(scope="module")
def java_cluster(zookeeper, tmp_path_factory):
    cluster = RealBookKeeper(zookeeper.connect_string, str(tmp_path_factory.mktemp("realbk")), num_bookies=4)
    with cluster:
        yield cluster


@pytest.fixture
def bk(java_cluster):
    client = BookKeeper(java_cluster.metadata_service_uri, {"readTimeout": 5.0, "addEntryTimeout": 5.0})
    yield client
    client.close()


def java_summary(cluster: RealBookKeeper, ledger: int) -> dict[str, str]:
    out = cluster.client("read", str(ledger), "--format", "summary").stdout.split()
    return dict(field.split("=", 1) for field in out)


def read_all(bk: BookKeeper, ledger: int, recovery: bool = False, password: bytes = b"") -> tuple[list[bytes], object]:
    rh = bk.open_ledger(ledger, password=password, recovery=recovery)
    return [e.payload for e in rh.read(0, rh.last_add_confirmed)] if rh.last_add_confirmed >= 0 else [], rh


def test_java_client_ledgers_read_byte_identical_fenced_and_across_fragments(java_cluster, bk):
    # A closed ledger the Java client wrote: every entry byte-identical.
    closed = int(java_cluster.client("write", "500", "--entry-size", str(ENTRY_SIZE)).stdout)
    entries, _ = read_all(bk, closed)
    assert entries == [payload(i, ENTRY_SIZE) for i in range(500)]

    # Several fragments: a bookie of the ensemble SIGKILLed mid-write; the Java client changes the ensemble.
    known = set(bk.list_ledgers())
    n = 60000
    writer = java_cluster.spawn("client", "write", java_cluster.metadata_service_uri, str(n),
                                "--entry-size", str(ENTRY_SIZE))
    victim = None
    try:
        ledger = ledger_being_written(bk, known, 1000)
        first_ensemble = bk.ledger_metadata(ledger).fragments()[0][2]
        victim = next(b for b in java_cluster.bookies if b.bookie_id == first_ensemble[0])
        victim.kill()
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err.decode()[-3000:]
        assert int(out) == ledger
        metadata = bk.ledger_metadata(ledger)
        assert len(metadata.fragments()) >= 2, metadata
        assert victim.bookie_id not in metadata.last_ensemble
        # Read while the killed bookie is still down: its entries come from the other replica.
        entries, rh = read_all(bk, ledger)
        assert rh.last_add_confirmed == n - 1
        assert entries == [payload(i, ENTRY_SIZE) for i in range(n)]
        assert java_summary(java_cluster, ledger)["sha256"] == summary_of(entries)
    finally:
        stop_process(writer, sig=9)
        if victim is not None and not victim.running:
            victim.start()

    # An open ledger: recovery (fencing) closes it where the Java client says it ends.
    open_ledger = int(java_cluster.client("write", "300", "--entry-size", str(ENTRY_SIZE), "--no-close").stdout)
    assert bk.ledger_metadata(open_ledger).state == LedgerState.OPEN
    entries, rh = read_all(bk, open_ledger, recovery=True)
    metadata = bk.ledger_metadata(open_ledger)
    assert metadata.state == LedgerState.CLOSED and metadata.last_entry_id == 299
    assert entries == [payload(i, ENTRY_SIZE) for i in range(300)]
    java = java_summary(java_cluster, open_ledger)
    assert (java["entries"], java["lac"], java["length"], java["closed"]) == ("300", "299", str(metadata.length), "true")
    assert java["sha256"] == summary_of(entries)


def test_java_client_verifies_what_this_client_writes(java_cluster, bk):
    lh = bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2)
    lh.append(payload(0))
    lh.append_batch([payload(i) for i in range(1, 1500)]).result()
    for i in range(1500, 2000):
        lh.append_async(payload(i))
    lh.close()
    java_cluster.client("verify", str(lh.ledger_id), "2000")
    assert java_summary(java_cluster, lh.ledger_id)["sha256"] == summary_of([payload(i) for i in range(2000)])

    mac = bk.create_ledger(ensemble_size=3, write_quorum=3, ack_quorum=2, digest="mac", password=b"secret")
    mac.append_batch([payload(i, 1000) for i in range(300)]).result()
    mac.close()
    java_cluster.client("verify", str(mac.ledger_id), "300", "--entry-size", "1000", "--password", "secret")


def test_java_bookies_take_this_clients_v2_adds_and_fence_them(java_cluster):
    """useV2WireProtocol: the adds go as v2 ADDENTRY, which a Java bookie stores as the Java client's; after a
    recovery open the next v2 add is refused as fenced."""
    from bookie.exceptions import BKLedgerFencedException
    v2 = BookKeeper(java_cluster.metadata_service_uri, {"useV2WireProtocol": True, "addEntryTimeout": 5.0})
    try:
        lh = v2.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2, password=b"pw")
        lh.append_batch([payload(i) for i in range(1000)]).result()
        assert {c._v2_connection is not None for c in v2._clients.values()} == {True}
        java_cluster.client("verify", str(lh.ledger_id), "1000", "--password", "pw")
        entries, _ = read_all(v2, lh.ledger_id, recovery=True, password=b"pw")
        assert entries == [payload(i) for i in range(1000)]
        with pytest.raises(BKLedgerFencedException):
            lh.append(payload(1000))
    finally:
        v2.close()


def test_a_scoped_ledger_is_refused_on_native_only_bookies(bk):
    with pytest.raises(BKNotEnoughBookiesException, match="only on the gRPC path"):
        bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2, scope_id=7)


def test_recovery_fences_a_writer_on_java_bookies(java_cluster, bk):
    from bookie.exceptions import BKLedgerFencedException
    lh = bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2, password=b"pw")
    lh.append_batch([payload(i) for i in range(100)]).result()
    other = BookKeeper(java_cluster.metadata_service_uri)
    try:
        entries, rh = read_all(other, lh.ledger_id, recovery=True, password=b"pw")
    finally:
        other.close()
    assert rh.last_add_confirmed == 99 and entries == [payload(i) for i in range(100)]
    with pytest.raises(BKLedgerFencedException):
        lh.append(payload(100))
