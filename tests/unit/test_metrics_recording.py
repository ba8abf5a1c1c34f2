"""What the bookie records, in this process with no connection: BookKeeper's names and scopes, the journal's
per-group events and queue gauges, the gRPC service's request stats (its handlers driven directly, as
test_add_stream_errors does), and the pure pieces (a ledger directory's gauge name, an entry's replica
shortfall, the IN_PROGRESS gauges summed over servers)."""
from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from bookie.replication.auditor import replica_shortfall
from bookie.server import Bookie, ServerConfiguration, journal
from bookie.server.add_request import decode_add_request
from bookie.server.bookkeeper_server_stats import dir_usage_name
from bookie.server.request_processor import BookieServicer
from bookie.server.request_stats import RequestStats
from bookie.stats.prometheus_metrics_provider import PrometheusMetricsProvider
from tests.helpers.engine_ops import PASSWORD, engine_settings
from tests.helpers.journal_files import KEY, LEDGER
from tests.helpers.metrics import scrape
from tests.helpers.waiting import DEADLINE

J0 = {"journalIndex": "0"}


@pytest.fixture
def provider() -> PrometheusMetricsProvider:
    return PrometheusMetricsProvider()


@pytest.fixture
def engine(tmp_path, provider):
    bookie = Bookie(ServerConfiguration(engine_settings(tmp_path)), stats_logger=provider.get_stats_logger()).start()
    yield bookie
    bookie.shutdown()


def framed(ledger: LedgerId, first: int, count: int, size: int = 64) -> bytes:
    return DigestManager(ledger, PASSWORD).build_framed(first, first - 1, 0, [b"x" * size] * count)[0]


# -- pure pieces ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("directory, name", [
    ("/pulsar/data/bookkeeper/ledgers-0", "dir__pulsar_data_bookkeeper_ledgers_0_usage"),  # StreamNative's panel
    ("/data/ledgers/", "dir__data_ledgers_usage"),
    ("relative/dir.1", "dir_relative_dir_1_usage"),
])
def test_a_ledger_dirs_usage_gauge_is_named_as_ledger_dirs_manager_names_it(directory, name):
    assert dir_usage_name(directory) == name


def test_an_entrys_replica_shortfall_is_classed_against_the_quorums():
    assert replica_shortfall({}, 3, 2) is None
    assert replica_shortfall({7: 3}, 3, 2) == "no replica"
    assert replica_shortfall({7: 1, 8: 2}, 3, 2) == "less than AQ"  # entry 8 has one copy: fewer than AQ=2
    assert replica_shortfall({7: 1}, 3, 2) == "less than WQ"


def test_in_progress_gauges_sum_the_servers_and_forget_one_gone(provider):
    stats = RequestStats(provider.get_stats_logger().scope("bookkeeper_server"))
    native, grpc_service = stats.in_progress(), stats.in_progress()
    native.adds, grpc_service.adds, native.reads_blocked = 2, 3, 1
    metrics = scrape(provider)
    assert metrics.value("bookkeeper_server_ADD_ENTRY_IN_PROGRESS") == 5
    assert metrics.value("bookkeeper_server_READ_ENTRY_BLOCKED") == 1
    assert metrics.types["bookkeeper_server_ADD_ENTRY_IN_PROGRESS"] == "gauge"
    del grpc_service
    gc.collect()
    assert scrape(provider).value("bookkeeper_server_ADD_ENTRY_IN_PROGRESS") == 2


# -- the journal ------------------------------------------------------------------------------------------
def test_the_journal_records_a_group_per_fsync_and_its_queues_drain(tmp_path, provider):
    conf = ServerConfiguration(engine_settings(tmp_path))
    j = journal.Journal(conf.journal_dirs[0], conf, 0, provider.get_stats_logger().scope("bookie").scope("journal"))
    answered = threading.Semaphore(0)

    def done(error) -> None:
        assert error is None
        answered.release()

    blobs = [framed(LEDGER, 0, 5), framed(LEDGER, 5, 2)]
    j.log(blobs[0], done, 5)
    j.log(b"", done, 0)  # a force-ledger request
    j.log(blobs[1], done, 2)
    queued = scrape(provider)  # not started: the three wait in the queue
    assert queued.value("bookie_journal_JOURNAL_QUEUE_SIZE", **J0) == 3
    assert queued.value("bookie_journal_JOURNAL_CB_QUEUE_SIZE", **J0) == 3
    assert queued.value("bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE", **J0) == 0
    j.start()
    try:
        for _ in range(3):
            assert answered.acquire(timeout=DEADLINE)
    finally:
        j.shutdown()
    m = scrape(provider)
    # One group (the queue emptied after the third), so one pwritev, one fsync, entries counted once each.
    assert m.count("bookie_journal_JOURNAL_ADD_ENTRY", **J0) == 7
    assert m.count("bookie_journal_JOURNAL_FORCE_LEDGER", **J0) == 1
    assert m.count("bookie_journal_JOURNAL_SYNC", **J0) == 1
    assert m.count("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES", **J0) == 1
    assert m.sum("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES", **J0) == 7
    assert m.sum("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_BYTES", **J0) == sum(map(len, blobs))
    assert m.value("bookie_journal_JOURNAL_NUM_FLUSH_EMPTY_QUEUE", **J0) == 1
    assert m.count("bookie_journal_JOURNAL_CREATION_LATENCY", **J0) == 1
    assert m.value("bookie_journal_JOURNAL_WRITE_BYTES", **J0) > sum(map(len, blobs))  # and the group's padding
    assert m.types["bookie_journal_JOURNAL_WRITE_BYTES"] == "counter"
    assert m.types["bookie_journal_JOURNAL_SYNC"] == "summary"
    assert 0 < m.sum("bookie_journal_JOURNAL_ADD_ENTRY", **J0) / 7 < DEADLINE * 1000  # ms, each entry's wait
    for gauge in ("JOURNAL_QUEUE_SIZE", "JOURNAL_CB_QUEUE_SIZE", "JOURNAL_FORCE_WRITE_QUEUE_SIZE"):
        assert m.value(f"bookie_journal_{gauge}", **J0) == 0, gauge


# -- the engine and the gRPC service -------------------------------------------------------------------------
class Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def abort(self, code, details):
        raise AssertionError(f"aborted: {code} {details}")


async def add_stream(servicer: BookieServicer, requests: list) -> list:
    async def stream():
        for request in requests:
            yield request
    answered = []
    async for message in servicer.AddEntries(stream(), Context()):
        answered.extend(message.responses)
    return answered


def add_request(txn_id: int, ledger: LedgerId, first: int, count: int):
    return decode_add_request(pb.AddRequest(txnId=txn_id, ledgerId=ledger.ledger_id, masterKey=KEY,
                                            entries=framed(ledger, first, count)).SerializeToString())


def test_grpc_adds_and_reads_are_counted_per_entry_under_bookkeepers_names(engine, provider):
    servicer = BookieServicer(engine)
    answered = asyncio.run(add_stream(servicer, [add_request(1, LEDGER, 0, 4), add_request(2, LEDGER, 4, 6),
                                                 add_request(3, LEDGER, 0, 1)]))  # the last: ids taken already
    assert [r.status for r in answered] == [status.EOK, status.EOK, status.EOK]
    read = pb.ReadRequest(ledgerId=LEDGER.ledger_id, entryId=3)
    assert asyncio.run(servicer.ReadEntry(read, Context())).status == status.EOK
    missing = pb.ReadRequest(ledgerId=LEDGER.ledger_id, entryId=99)
    assert asyncio.run(servicer.ReadEntry(missing, Context())).status == status.ENOENTRY
    fence = pb.ReadRequest(ledgerId=LEDGER.ledger_id, entryId=9, flag=pb.ReadRequest.FENCE_LEDGER, masterKey=KEY)
    assert asyncio.run(servicer.ReadEntry(fence, Context())).status == status.EOK
    m = scrape(provider)
    for name in ("bookkeeper_server_ADD_ENTRY_REQUEST", "bookkeeper_server_ADD_ENTRY", "bookie_BOOKIE_ADD_ENTRY"):
        assert m.count(name) == 11, name
    assert m.value("bookie_WRITE_BYTES") == 11 * len(framed(LEDGER, 0, 1)) - 11 * 4  # entries, not their frames
    assert m.value("bookkeeper_server_ADD_ENTRY_IN_PROGRESS") == 0
    assert m.count("bookkeeper_server_READ_ENTRY_REQUEST") == 1
    assert m.count("bookkeeper_server_READ_ENTRY_REQUEST", success=False) == 1
    assert m.count("bookkeeper_server_READ_ENTRY_FENCE_REQUEST") == 1
    assert m.count("bookie_BOOKIE_READ_ENTRY") == 2 and m.count("bookie_BOOKIE_READ_ENTRY", success=False) == 1
    assert m.value("bookkeeper_server_READ_ENTRY_IN_PROGRESS") == 0
    assert m.value("bookie_READ_BYTES") == 2 * (len(framed(LEDGER, 0, 1)) - 4)


def test_server_status_follows_read_only_mode(engine, provider):
    assert scrape(provider).value("bookie_SERVER_STATUS") == 1
    engine.set_read_only(True)
    assert scrape(provider).value("bookie_SERVER_STATUS") == 0
    engine.set_read_only(False)
    assert scrape(provider).value("bookie_SERVER_STATUS") == 1
    engine.shutdown()
    assert scrape(provider).value("bookie_SERVER_STATUS") == -1  # BookieStateManager's "not registered"


def test_ledger_dir_gauges_are_there_before_the_first_scrape(engine, provider, tmp_path):
    m = scrape(provider)
    assert m.value("bookie_ledger_writable_dirs") == 1
    assert m.value("bookie_ledger_num_dirs") == 1
    usage = m.value("bookie_ledger_" + dir_usage_name(str(tmp_path / "ledgers")))
    assert 0 < usage <= 100  # percent, as LedgerDirsManager exports it
