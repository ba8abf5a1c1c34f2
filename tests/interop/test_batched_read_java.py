"""BookKeeper 4.17's batch read (v2 BATCH_READ_ENTRY) on real Java bookies: the facts
bookie/client/batched_read.py relies on, this client's range reads through it, and Spark reading a
WQ == E ledger (contiguous shares, batch reads) with every entry, also with one Java bookie SIGKILLed.
"""
from __future__ import annotations

import pytest

from bookie.client.batched_read import BatchedReadChannel
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format, status
from bookie.proto.native_frames import DEFAULT_MAX_FRAME_SIZE
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk, payload
from tests.helpers.spark_io import source

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)
SIZE = 1024
FRAMED = 4 + 32 + 4 + SIZE  # frame length, v1 header, CRC32C digest, payload
HEADERS = 36  # what maxSize counts besides the entries


def write(cluster, n: int, wq: int = 3) -> int:
    return int(cluster.client("write", str(n), "--ensemble", "3", "--write-quorum", str(wq), "--ack-quorum", "2",
                              "--entry-size", str(SIZE)).stdout.split()[-1])


def entry_ids(answer) -> list[int]:
    return [entry_format.peek_ids(f, 0)[2] for f in entry_format.iter_frames(answer.entries)]


def test_what_a_java_bookie_answers_to_batch_reads(java_cluster):
    ledger = write(java_cluster, 100)
    channel = BatchedReadChannel("java", f"127.0.0.1:{java_cluster.bookies[0].port}", 30.0, DEFAULT_MAX_FRAME_SIZE, 10.0)
    try:
        def ask(entry_id, count, size, lid=ledger):
            request_id = channel.ask(lid, entry_id, count, size)
            answer = channel.receive()
            assert answer.request_id == request_id
            return answer.status, entry_ids(answer)

        assert ask(0, 10, 1 << 20) == (status.EOK, list(range(10)))  # maxCount
        assert ask(0, 0, 1 << 20) == (status.EOK, list(range(100)))  # 0: no count limit
        assert ask(0, 1000, HEADERS + 2 * FRAMED) == (status.EOK, [0, 1])  # maxSize: the whole frame
        assert ask(0, 1000, HEADERS + 2 * FRAMED - 1) == (status.EOK, [0])
        assert ask(0, 1000, 1) == (status.EOK, [0])  # the first entry always
        assert ask(95, 100, 1 << 20) == (status.EOK, [95, 96, 97, 98, 99])  # stops before an absent entry
        assert ask(100, 10, 1 << 20) == (status.ENOENTRY, [])  # only the first asked is answered for
        assert ask(0, 10, 1 << 20, lid=ledger + 10_000) == (status.ENOLEDGER, [])
        # several in flight on one connection, matched by request id
        asked = [channel.ask(ledger, 10 * k, 10, 1 << 20) for k in range(5)]
        answers = {a.request_id: entry_ids(a) for a in (channel.receive() for _ in asked)}
        assert [answers[r] for r in asked] == [list(range(10 * k, 10 * k + 10)) for k in range(5)]
    finally:
        channel.close()


def test_range_reads_from_a_java_bookie_use_batch_reads(java_cluster):
    ledger = write(java_cluster, 3000)
    client = NativeBookieClient(java_cluster.bookies[1].bookie_id, timeout=30.0)
    try:
        messages = list(client.read_entries(LedgerId.of(ledger, 0), 0, 3100, 256 * 1024))
        frames = [bytes(f) for m in messages for f in entry_format.iter_frames(m.entries)]
        assert [entry_format.peek_ids(f, 0)[2] for f in frames] == list(range(3000))
        assert [f[-SIZE:] for f in frames[:3]] == [payload(i, SIZE) for i in range(3)]
        assert messages[-1].lastEntryIdCovered == 3100  # 3000.. absent: the single reads after the batches say so
        assert len(list(client.read_entries(LedgerId.of(ledger, 0), 0, 2999, 256 * 1024))) > 10
        assert len(client._idle_batch_channels) == 1  # a range the bookie holds: batches only, socket kept
    finally:
        client.close()


def test_spark_reads_every_entry_of_a_wq_e_ledger_also_with_a_java_bookie_killed(spark, zookeeper, tmp_path):
    with RealBookKeeper(zookeeper.connect_string, str(tmp_path / "realbk"), num_bookies=3) as cluster:
        n = 5000
        ledger = write(cluster, n)
        uri = cluster.metadata_service_uri
        df = source(spark, uri, ledgers=str(ledger), maxEntriesPerPartition="1000")
        assert df.rdd.getNumPartitions() == 6  # contiguous shares, two rounds of three bookies
        rows = sorted(df.collect(), key=lambda r: r.entry_id)
        assert [r.entry_id for r in rows] == list(range(n)) and bytes(rows[7].payload) == payload(7, SIZE)
        cluster.bookies[1].kill()
        rows = sorted(source(spark, uri, ledgers=str(ledger)).collect(), key=lambda r: r.entry_id)
        assert [r.entry_id for r in rows] == list(range(n))
        assert [bytes(r.payload) for r in rows] == [payload(i, SIZE) for i in range(n)]
