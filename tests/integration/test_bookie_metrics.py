"""BookKeeper's metrics recorded by the bookie, its servers, its garbage collector, the client and AutoRecovery,
each read from a PrometheusMetricsProvider's scrape in this process (the HTTP /metrics route serves the same
text): an engine served by the native server over real TCP, an engine whose garbage collector reads a real
ZooKeeper, a client and an AutoRecovery participant on bookie processes."""
from __future__ import annotations

import socket
import uuid

import pytest

from bookie.client import BookKeeper
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from bookie.proto.native_frames import FrameDecoder, encode_frames
from bookie.replication.auditor_elector import current_auditor
from bookie.replication.autorecovery_main import AutoRecoveryMain
from bookie.server import Bookie, ServerConfiguration
from bookie.stats.prometheus_metrics_provider import PrometheusMetricsProvider
from tests.helpers.engine_ops import PASSWORD, engine_settings
from tests.helpers.journal_files import KEY
from tests.helpers.metrics import scrape
from tests.helpers.native_bookie import served_natively
from tests.helpers.replication import CLIENT, first_ledger_check_done, marked, names, payloads, write
from tests.helpers.waiting import DEADLINE, wait_for

J0 = {"journalIndex": "0"}
BOOKIE_ID = "127.0.0.1:3181"


@pytest.fixture
def provider() -> PrometheusMetricsProvider:
    return PrometheusMetricsProvider()


@pytest.fixture
def engine(tmp_path, provider):
    """An engine recording into ``provider`` (its make(**settings, metadata_store=None)); shut down at the end."""
    started: list[Bookie] = []

    def make(metadata_store=None, **settings) -> Bookie:
        conf = ServerConfiguration(engine_settings(tmp_path, **settings))
        bookie = Bookie(conf, stats_logger=provider.get_stats_logger()).start(metadata_store=metadata_store)
        started.append(bookie)
        return bookie

    yield make
    for bookie in started:
        bookie.shutdown()


def framed(ledger: LedgerId, first: int, count: int, size: int) -> bytes:
    return DigestManager(ledger, PASSWORD).build_framed(first, first - 1, 0, [b"p" * size] * count)[0]


def entry_bytes(blob: bytes, count: int) -> int:
    return len(blob) - 4 * count  # the entries, without their 4-byte frames


# -- the native server -----------------------------------------------------------------------------------
def test_native_adds_and_reads_are_counted_once_each_and_the_journal_moves_with_the_work(engine, provider):
    bookie = engine()
    ledger = LedgerId(0, 11)
    batches = [framed(ledger, 0, 40, 100), framed(ledger, 40, 1, 3000), framed(ledger, 41, 59, 10)]
    with served_natively(bookie) as server:
        client = NativeBookieClient("metrics-test", DEADLINE, address=f"127.0.0.1:{server.port}")
        try:
            first = batches[0]
            assert client.add(ledger, KEY, first).result(DEADLINE).status == status.EOK
            before = scrape(provider)
            for blob in batches[1:]:
                assert client.add(ledger, KEY, blob).result(DEADLINE).status == status.EOK
            reads = [client.read_entry(ledger, e) for e in range(0, 100, 10)]
            assert all(r.status == status.EOK for r in reads)
            assert client.read_entry(ledger, 500).status == status.ENOENTRY
        finally:
            client.close()
    m = scrape(provider)
    n = 100
    assert m.count("bookkeeper_server_ADD_ENTRY_REQUEST") == n
    assert m.count("bookkeeper_server_ADD_ENTRY") == n
    assert m.count("bookie_BOOKIE_ADD_ENTRY") == n
    assert m.count("bookkeeper_server_ADD_ENTRY_REQUEST", success=False) == 0
    assert m.value("bookie_WRITE_BYTES") == sum(entry_bytes(b, c) for b, c in zip(batches, (40, 1, 59)))
    assert m.sum("bookie_BOOKIE_ADD_ENTRY_BYTES") == pytest.approx(m.value("bookie_WRITE_BYTES"))
    # The journal: each entry once (and the ledger's master key record), every group fsynced.
    assert m.count("bookie_journal_JOURNAL_ADD_ENTRY", **J0) == n + 1
    assert m.count("bookie_journal_JOURNAL_SYNC", **J0) > before.count("bookie_journal_JOURNAL_SYNC", **J0) > 0
    assert m.value("bookie_journal_JOURNAL_WRITE_BYTES", **J0) > m.value("bookie_WRITE_BYTES")
    for gauge in ("JOURNAL_QUEUE_SIZE", "JOURNAL_FORCE_WRITE_QUEUE_SIZE", "JOURNAL_CB_QUEUE_SIZE"):
        assert m.value(f"bookie_journal_{gauge}", **J0) == 0
        assert m.types[f"bookie_journal_{gauge}"] == "gauge"
    # Reads: ten found, one not.
    assert m.count("bookkeeper_server_READ_ENTRY_REQUEST") == 10
    assert m.count("bookkeeper_server_READ_ENTRY_REQUEST", success=False) == 1
    assert m.count("bookie_BOOKIE_READ_ENTRY") == 10
    sizes = [100] * 40 + [3000] + [10] * 59
    read = [entry_bytes(framed(ledger, e, 1, sizes[e]), 1) for e in range(0, 100, 10)]
    assert m.value("bookie_READ_BYTES") == sum(read)
    assert m.count("bookkeeper_server_GET_BOOKIE_INFO_REQUEST") >= 1  # the client's check of the bookie it reached
    for gauge in ("ADD_ENTRY_IN_PROGRESS", "READ_ENTRY_IN_PROGRESS", "ADD_ENTRY_BLOCKED", "READ_ENTRY_BLOCKED"):
        assert m.value(f"bookkeeper_server_{gauge}") == 0, gauge
    assert m.types["bookie_WRITE_BYTES"] == "counter" and m.types["bookkeeper_server_ADD_ENTRY"] == "summary"


def read_request(txn_id: int, ledger_id: int, entry_id: int) -> bytes:
    return pb.Request(header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.READ_ENTRY, txnId=txn_id),
                      readRequest=pb.ReadRequest(ledgerId=ledger_id, entryId=entry_id)).SerializeToString()


def test_a_client_that_does_not_read_its_answers_shows_as_blocked_reads(engine, provider):
    bookie = engine()
    ledger = LedgerId(0, 12)
    bookie.add_entries(ledger, KEY, framed(ledger, 0, 1, 256 * 1024)).result(DEADLINE)
    reads = 120  # 30 MB of answers: far more than the sockets buffer
    with served_natively(bookie) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE)
        try:
            sock.sendall(encode_frames([read_request(t, ledger.ledger_id, 0) for t in range(1, reads + 1)]))
            wait_for(lambda: scrape(provider).value("bookkeeper_server_READ_ENTRY_BLOCKED") == 1,
                     "the bookie to stop reading the connection")
            decoder, answers = FrameDecoder(1 << 21), []
            while len(answers) < reads:
                data = sock.recv(1 << 20)
                assert data, "the bookie closed the connection"
                answers += decoder.feed(data)
            assert all(pb.Response.FromString(a).status == status.EOK for a in answers)
            wait_for(lambda: scrape(provider).value("bookkeeper_server_READ_ENTRY_BLOCKED") == 0,
                     "the connection to be read again once its answers were taken")
        finally:
            sock.close()
    m = scrape(provider)
    assert m.count("bookkeeper_server_READ_ENTRY_BLOCKED_WAIT") >= 1
    assert m.count("bookkeeper_server_READ_ENTRY_REQUEST") == reads
    assert m.value("bookkeeper_server_ADD_ENTRY_BLOCKED") == 0


# -- garbage collection ----------------------------------------------------------------------------------
def test_gc_counters_move_when_a_deleted_ledger_is_collected(engine, provider, zookeeper):
    store = ZKMetadataStore(f"zk://{zookeeper.connect_string}/metrics-{uuid.uuid4().hex[:8]}", 2000)
    store.init_new_cluster()
    try:
        bookie = engine(store, bookieId=BOOKIE_ID, entryLogSizeLimit=65536, gcWaitTime=3600000)
        gc = bookie.garbage_collector
        dead, live = LedgerId(0, 21), LedgerId(0, 22)
        for ledger in (dead, live):
            store.create_ledger(ledger, LedgerMetadata(ensemble_size=1, write_quorum_size=1, ack_quorum_size=1,
                                                       ensembles=((0, (BOOKIE_ID,)),), password=PASSWORD))
        for first in range(0, 300, 30):  # ~300 KB: the dead ledger fills entry logs of its own
            bookie.add_entries(dead, KEY, framed(dead, first, 30, 1000)).result(DEADLINE)
        bookie.add_entries(live, KEY, framed(live, 0, 5, 100)).result(DEADLINE)
        assert gc.wait_for_pass(gc.force_gc(), DEADLINE)
        before = scrape(provider)
        assert before.value("bookie_ACTIVE_LEDGER_TOTAL") == 2
        assert before.value("bookie_DELETED_LEDGER_TOTAL") == 0
        store.delete_ledger(dead)
        assert gc.wait_for_pass(gc.force_gc(major=True), DEADLINE)
        m = scrape(provider)
        assert m.value("bookie_DELETED_LEDGER_TOTAL") == 1
        assert m.value("bookie_ACTIVE_LEDGER_TOTAL") == 1
        # The logs only the dead ledger filled are deleted whole (the one it shares with the live ledger is not).
        assert m.value("bookie_RECLAIMED_DELETION_SPACE_BYTES") >= 200_000, "most of the dead ledger's 300 KB"
        assert m.value("bookie_MAJOR_COMPACTION_TOTAL") == before.value("bookie_MAJOR_COMPACTION_TOTAL") + 1
        assert m.count("bookie_THREAD_RUNTIME") > before.count("bookie_THREAD_RUNTIME")
        assert m.value("bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES") < before.value("bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES")
        assert m.types["bookie_DELETED_LEDGER_TOTAL"] == "counter"
        assert m.types["bookie_ACTIVE_ENTRY_LOG_TOTAL"] == "gauge"
    finally:
        store.close()


# -- the client ------------------------------------------------------------------------------------------
def test_client_adds_and_reads_are_counted_as_operations_done(cluster, provider):
    c = cluster(3)
    with BookKeeper(c.metadata_service_uri, CLIENT, stats_logger=provider.get_stats_logger()) as bk:
        handle = bk.create_ledger(3, 2, 2, password=b"pw")
        write(handle, payloads("single", 10))
        handle.append_batch(payloads("batch", 40)).result(DEADLINE)
        for future in [handle.append_async(p) for p in payloads("async", 25)]:
            future.result(DEADLINE)
        handle.read(0, 9)
        handle.close()
        reader = bk.open_ledger(handle.ledger_id, b"pw")
        assert len(reader.read(0, 74)) == 75
        bk.delete_ledger(handle.ledger_id)
    m = scrape(provider)
    assert m.count("bookkeeper_client_ADD_ENTRY") == 75
    assert m.count("bookkeeper_client_ADD_ENTRY", success=False) == 0
    assert m.count("bookkeeper_client_READ_ENTRY") == 2  # one per read call, as BookKeeper's PendingReadOp
    assert m.count("bookkeeper_client_LEDGER_CREATE") == 1
    assert m.count("bookkeeper_client_LEDGER_OPEN") == 1
    assert m.count("bookkeeper_client_LEDGER_DELETE") == 1
    assert 0 < m.sum("bookkeeper_client_ADD_ENTRY") / 75 < DEADLINE * 1000  # ms per entry


# -- AutoRecovery ----------------------------------------------------------------------------------------
def test_autorecovery_records_what_the_auditor_marked_and_the_worker_copied(cluster, provider):
    c = cluster(4)
    b = [x.bookie_id for x in c.bookies]
    conf = ServerConfiguration({"metadataServiceUri": c.metadata_service_uri, "zkTimeout": 2000,
                                "lostBookieRecoveryDelay": 0, "rwRereplicateBackoffMs": 200})
    with BookKeeper(c.metadata_service_uri, CLIENT) as bk:
        written = {}
        for i in range(3):  # every entry on b0: WQ = E
            handle = bk.create_ledger(3, 3, 2, bookies=[b[0], b[1], b[2]], password=b"pw")
            written[handle.ledger_id] = payloads(f"l{i}", 30)
            write(handle, written[handle.ledger_id])
            handle.close()
        participant = AutoRecoveryMain(conf, "ar-metrics", stats_logger=provider.get_stats_logger()).start()
        try:
            wait_for(lambda: current_auditor(bk.store) == "ar-metrics", "the participant elected auditor")
            wait_for(lambda: first_ledger_check_done(bk.store), "the auditor's first check of every ledger")
            c.kill_bookie(0)
            wait_for(lambda: not marked(bk.store) and not any(names(bk, lid, b[0]) for lid in written),
                     "every ledger re-replicated off the killed bookie", timeout=180)
        finally:
            participant.shutdown()
    m = scrape(provider)
    assert m.count("auditor_NUM_UNDER_REPLICATED_LEDGERS") >= 1
    assert m.sum("auditor_NUM_UNDER_REPLICATED_LEDGERS") >= len(written)  # the values: ledgers marked per marking
    assert m.sum("auditor_UNDER_REPLICATED_LEDGERS_TOTAL_SIZE") > 0
    assert m.count("auditor_URL_PUBLISH_TIME_FOR_LOST_BOOKIE") >= 1
    assert m.count("auditor_AUDIT_BOOKIES_TIME") >= 1
    assert m.count("auditor_CHECK_ALL_LEDGERS_TIME") >= 1
    assert m.value("auditor_NUM_LEDGERS_CHECKED") >= len(written)
    on_b0 = sum(len(data) for data in written.values())
    assert m.value("replication_worker_NUM_ENTRIES_WRITTEN") >= on_b0
    assert m.value("replication_worker_NUM_ENTRIES_READ") >= on_b0
    assert m.sum("replication_worker_NUM_BYTES_WRITTEN") > 0
    assert m.count("replication_worker_rereplicate") >= len(written)
    assert m.value("replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED") >= len(written)
    assert m.count("bookkeeper_client_LEDGER_OPEN") >= len(written)  # the participant's client
    assert m.types["replication_worker_NUM_ENTRIES_WRITTEN"] == "counter"
