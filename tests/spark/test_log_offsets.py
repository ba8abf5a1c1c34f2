"""Offsets by time, batch offset ranges, admission control and lag, on real Spark and real bookies.

A log written in three commits (each of two write tasks: two segments with the commit's time) is read by
commit time (startingTimestamp / endingTimestamp, batch and stream, both strategies), by offsets a streaming
query recorded (a batch read of [startOffset, endOffset) gives exactly that micro-batch's rows), and past
truncation (failOnDataLoss). Streams wait for minEntriesPerTrigger new entries (a long maxTriggerDelay: no
batch until enough arrive; a short one: a small batch once it passes), Trigger.AvailableNow honours
maxBytesPerTrigger and ignores the minimum, and progress reports the latest offset, from which ``stream_lag``
counts the entries behind, for a log and for ledgers.
"""
from __future__ import annotations

import json
import re
import uuid

import pyspark
import pytest

import spark_bookkeeper
from bookie.client import BookKeeper
from spark_bookkeeper import spark_versions
from spark_bookkeeper.log import read_log
from spark_bookkeeper.log_offsets import progress_offset
from tests.helpers.spark_io import payloads, source, write
from tests.helpers.stream_sink import Batches
from tests.helpers.waiting import wait_for

needs_admission_control = pytest.mark.skipif(not spark_versions.has(spark_versions.ADMISSION_CONTROL),
                                             reason="read limits and reported offsets need PySpark 4.2")


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _log(uri: str, log: str):
    with BookKeeper(uri) as bk:
        return read_log(bk.store, log)


def _timed_batches(spark, uri: str, log: str) -> list[int]:
    """Three commits of 100 entries (event-0.., event-100.., event-200..), two segments each; their commit times."""
    for start in (0, 100, 200):
        write(payloads(spark, start, 100, partitions=2), uri, log)
    times = [s.committed_ms for s in _log(uri, log).segments]
    assert times[0] == times[1] < times[2] == times[3] < times[4] == times[5], times  # a commit's segments share it
    return times[::2]


def _events(first: int, count: int) -> set[bytes]:
    return {b"event-%d" % i for i in range(first, first + count)}


def _payloads(df) -> set[bytes]:
    rows = [bytes(r.payload) for r in df.select("payload").collect()]
    assert len(rows) == len(set(rows)), "an entry was read twice"
    return set(rows)


def _stream(spark, uri: str, **options):
    reader = spark.readStream.format("bookkeeper").option("metadataServiceUri", uri)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _drain(spark, uri: str, checkpoint: str, **options) -> tuple[Batches, list]:
    """Run a Trigger.AvailableNow query of the source to its end: what its sink saw, and the progress of its
    batches that had rows."""
    seen = Batches()
    query = seen.collect(_stream(spark, uri, **options), checkpoint, available_now=True)
    query.awaitTermination()
    return seen, [p for p in query.recentProgress if p["numInputRows"] > 0]


def _seen(batches: Batches) -> set[bytes]:
    return {payload for _, _, payload in batches.rows()}


def test_batch_reads_by_commit_time(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("times")
    t1, t2, t3 = _timed_batches(spark, uri, log)
    assert _payloads(source(spark, uri, log=log, startingTimestamp=t2)) == _events(100, 200)
    assert _payloads(source(spark, uri, log=log, startingTimestamp=t1 + 1)) == _events(100, 200)  # the next commit
    assert _payloads(source(spark, uri, log=log, endingTimestamp=t3)) == _events(0, 200)
    assert _payloads(source(spark, uri, log=log, startingTimestamp=t2, endingTimestamp=t3)) == _events(100, 100)
    assert _payloads(source(spark, uri, log=log, endingTimestamp=t3 + 1)) == _events(0, 300)  # none at/after: the end
    with pytest.raises(Exception, match=f"log '{log}': no segment was committed at or after startingTimestamp={t3 + 1} "
                                        fr".*; its newest commit was at {t3} "):
        source(spark, uri, log=log, startingTimestamp=t3 + 1).collect()
    assert source(spark, uri, log=log, startingTimestamp=t3 + 1,
                  startingOffsetsByTimestampStrategy="latest").count() == 0
    with pytest.raises(Exception, match="options startingTimestamp and startingOffsets both say where the read starts"):
        source(spark, uri, log=log, startingTimestamp=t2, startingOffsets="earliest")


def test_a_stream_starts_at_a_commit_time(spark, shared_cluster, tmp_path):
    uri, log = shared_cluster.metadata_service_uri, _name("stimes")
    _, t2, t3 = _timed_batches(spark, uri, log)
    seen, _ = _drain(spark, uri, str(tmp_path / "a"), log=log, startingTimestamp=t2)
    assert _seen(seen) == _events(100, 200)

    later = Batches()  # strategy latest: nothing committed since t3 + 1, so it reads what comes next
    query = later.collect(_stream(spark, uri, log=log, startingTimestamp=t3 + 1,
                                  startingOffsetsByTimestampStrategy="latest"), str(tmp_path / "b"))
    try:
        query.processAllAvailable()
        write(payloads(spark, 300, 50, partitions=1), uri, log)
        query.processAllAvailable()
    finally:
        query.stop()
    assert _seen(later) == _events(300, 50)

    failing = _stream(spark, uri, log=log, startingTimestamp=10 ** 13).writeStream.format("noop")
    with pytest.raises(Exception, match=f"log '{log}': no segment was committed at or after "
                                        "startingTimestamp=10000000000000"):
        failing.option("checkpointLocation", str(tmp_path / "c")).start().awaitTermination(120)


def test_batch_offsets_read_exactly_what_a_micro_batch_read(spark, shared_cluster, tmp_path):
    uri, log = shared_cluster.metadata_service_uri, _name("ranges")
    if spark_versions.has(spark_versions.ADMISSION_CONTROL):
        _timed_batches(spark, uri, log)
        seen, batches = _drain(spark, uri, str(tmp_path / "ck"), log=log, maxEntriesPerTrigger=70)
        assert len(batches) == 5  # 300 entries, 70 at a time: batches end inside segments
    else:  # a batch takes all there is before 4.2: one after each commit of 100
        seen, batches = Batches(), []
        for start in (0, 100, 200):
            write(payloads(spark, start, 100, partitions=2), uri, log)
            more, progress = _drain(spark, uri, str(tmp_path / "ck"), log=log)
            seen.runs.update(more.runs)
            batches += progress
        assert len(batches) == 3
    for progress in batches:
        src = progress["sources"][0]
        begun, end = progress_offset(src["startOffset"]), progress_offset(src["endOffset"])
        start = json.dumps(begun) if begun else "earliest"  # batch 0's start: the query's
        read = source(spark, uri, log=log, startingOffsets=start, endingOffsets=json.dumps(end))
        rows = sorted((r.ledger_id, r.entry_id, bytes(r.payload)) for r in read.collect())
        assert rows == seen.runs[progress["batchId"]][0]
    last = progress_offset(batches[-1]["sources"][0]["endOffset"])
    assert last == {"segment": 6, "entry": 0}
    assert source(spark, uri, log=log, startingOffsets=json.dumps(last)).count() == 0  # at the end: nothing


def test_batch_offsets_past_truncation_and_what_a_batch_refuses(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("lossy")
    _timed_batches(spark, uri, log)
    spark_bookkeeper.truncate_log(uri, log, before_segment=2)  # the first commit's two segments
    start = '{"segment": 1, "entry": 10}'
    with pytest.raises(Exception, match=f"log '{log}': segments 1..1 .* were truncated away before they were read from "
                                        "entry 10; the log now starts at segment 2. Set option failOnDataLoss=false"):
        source(spark, uri, log=log, startingOffsets=start).collect()
    assert _payloads(source(spark, uri, log=log, startingOffsets=start, failOnDataLoss="false")) == _events(100, 200)
    assert _payloads(source(spark, uri, log=log, startingOffsets='{"segment": 2, "entry": 0}',
                            endingOffsets='{"segment": 4, "entry": 0}')) == _events(100, 100)
    for options, message in (({"startingOffsets": "latest"}, "option startingOffsets applies to streaming reads when"),
                             ({"endingOffsets": "earliest"}, "option endingOffsets=earliest is not allowed"),
                             ({"startEntry": "1", "endingOffsets": "latest"},
                              "options startEntry and endingOffsets cannot be combined"),
                             ({"endingOffsets": '{"segment": 9, "entry": 0}'}, f"is past the end of log '{log}'"),
                             ({"minEntriesPerTrigger": "5"}, "option minEntriesPerTrigger applies to streaming reads"
                              if spark_versions.has(spark_versions.ADMISSION_CONTROL) else
                              r"option minEntriesPerTrigger needs PySpark 4\.2 or newer")):
        with pytest.raises(Exception, match=message):
            source(spark, uri, log=log, **options).collect()
    ledger = _log(uri, log).segments[0].ledger.ledger_id
    with pytest.raises(Exception, match="option endingOffsets applies to a stream of a log or a batch read of one"):
        source(spark, uri, ledgers=str(ledger), endingOffsets="latest")
    with pytest.raises(Exception, match="option endingTimestamp applies to batch reads"):
        (_stream(spark, uri, log=log, endingTimestamp=1).writeStream.format("noop").start().awaitTermination(120))


def _tail_after_ten(spark, uri: str, log: str, checkpoint: str, **options) -> tuple[Batches, object]:
    """A log of 10 entries tailed with ``options`` (a trigger every 100 ms), once its first trigger has read
    them: that one always runs (Kafka's lastTriggerMillis starts at 0). The caller stops the query."""
    write(payloads(spark, 0, 10, partitions=1), uri, log)
    seen = Batches()
    query = (_stream(spark, uri, log=log, **options).writeStream.foreachBatch(seen)
             .option("checkpointLocation", checkpoint).trigger(processingTime="100 milliseconds").start())
    try:
        wait_for(lambda: len(seen.rows()) == 10, "the first trigger")
    except BaseException:
        query.stop()
        raise
    return seen, query


@pytest.fixture
def empty_triggers_reported(spark):
    """Every trigger reports progress, also those that run no batch (Spark's default: one every 10 s)."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "0")
    yield
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)


@pytest.mark.skipif(spark_versions.has(spark_versions.ADMISSION_CONTROL), reason="this PySpark has admission control")
def test_read_limits_are_refused_at_load_naming_the_pyspark_they_need(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("old")
    write(payloads(spark, 0, 10, partitions=1), uri, log)
    ledger = _log(uri, log).segments[0].ledger.ledger_id
    for name, value in (("maxEntriesPerTrigger", 10), ("minEntriesPerTrigger", 10), ("maxBytesPerTrigger", 1000)):
        for selection in ({"log": log}, {"ledgers": str(ledger)}):
            with pytest.raises(Exception, match=rf"option {name} needs PySpark 4\.2 or newer; this is PySpark "
                                                rf"{re.escape(pyspark.__version__)}\. Upgrade PySpark, or leave it unset"):
                _stream(spark, uri, **selection, **{name: value})


@needs_admission_control
def test_min_entries_hold_batches_back_until_enough_arrive(spark, shared_cluster, tmp_path, empty_triggers_reported):
    uri, log = shared_cluster.metadata_service_uri, _name("minimum")
    seen, query = _tail_after_ten(spark, uri, log, str(tmp_path / "ck"), minEntriesPerTrigger=100, maxTriggerDelay="1h")
    try:
        write(payloads(spark, 10, 30, partitions=1), uri, log)  # segment 1: 30 < 100 new entries

        def saw_segment_1() -> int:  # triggers that read the log with segment 1 in it and ran no batch
            return sum(1 for p in query.recentProgress
                       if progress_offset(p["sources"][0]["latestOffset"]) == {"segment": 2, "entry": 0}
                       and p["numInputRows"] == 0)
        wait_for(lambda: saw_segment_1() >= 3, "three triggers that saw the 30 entries", timeout=120)
        assert sorted(seen.runs) == [min(seen.runs)] and len(seen.rows()) == 10, "a batch ran below the minimum"
        write(payloads(spark, 40, 70, partitions=1), uri, log)  # 100 new entries now
        wait_for(lambda: len(seen.rows()) == 110, "the 100 entries", timeout=120)
    finally:
        query.stop()
    assert [len(seen.runs[b][0]) for b in sorted(seen.runs)] == [10, 100]
    assert _seen(seen) == _events(0, 110)


@needs_admission_control
def test_max_trigger_delay_lets_a_small_batch_through(spark, shared_cluster, tmp_path):
    uri, log = shared_cluster.metadata_service_uri, _name("delay")
    seen, query = _tail_after_ten(spark, uri, log, str(tmp_path / "ck"), minEntriesPerTrigger=1000,
                                  maxTriggerDelay="1s")
    try:
        write(payloads(spark, 10, 20, partitions=1), uri, log)
        wait_for(lambda: len(seen.rows()) == 30, "a batch below the minimum once maxTriggerDelay passed", timeout=120)
    finally:
        query.stop()
    assert [len(seen.runs[b][0]) for b in sorted(seen.runs)] == [10, 20]


@needs_admission_control
def test_available_now_bounds_batches_by_bytes_and_ignores_the_minimum(spark, shared_cluster, tmp_path):
    uri, log = shared_cluster.metadata_service_uri, _name("bytes")
    _timed_batches(spark, uri, log)
    record = _log(uri, log)
    per_entry = {s.ledger.ledger_id: s.bytes / s.entries for s in record.segments}  # what the estimate knows
    # It ends although the minimum is never reached.
    seen, _ = _drain(spark, uri, str(tmp_path / "ck"), log=log, maxBytesPerTrigger=600, minEntriesPerTrigger=10 ** 6)
    sizes = [sum(per_entry[lid] for lid, _, _ in seen.runs[b][0]) for b in sorted(seen.runs)]
    assert len(sizes) >= 4 and all(size <= 600 for size in sizes), sizes
    assert all(size > 600 - max(per_entry.values()) for size in sizes[:-1]), sizes  # filled up to the next entry
    assert _seen(seen) == _events(0, 300) and len(seen.rows()) == 300


@needs_admission_control
def test_progress_reports_the_latest_offset_and_the_lag(spark, shared_cluster, tmp_path):
    uri, log = shared_cluster.metadata_service_uri, _name("lag")
    _timed_batches(spark, uri, log)
    _, batches = _drain(spark, uri, str(tmp_path / "log"), log=log, maxEntriesPerTrigger=120)
    progress = [p["sources"][0] for p in batches]
    assert [progress_offset(p["latestOffset"]) for p in progress] == [{"segment": 6, "entry": 0}] * 3
    assert [spark_bookkeeper.stream_lag(p, uri, log) for p in progress] == [180, 60, 0]

    with BookKeeper(uri) as bk:
        a, b = _log(uri, log).segments[0].ledger.ledger_id, _log(uri, log).segments[2].ledger.ledger_id
        _, batches = _drain(spark, uri, str(tmp_path / "ledgers"), ledgers=f"{a},{b}", maxEntriesPerTrigger=40)
        total = sum(bk.ledger_metadata(lid).last_entry_id + 1 for lid in (a, b))
    progress = [p["sources"][0] for p in batches]
    lags = [spark_bookkeeper.stream_lag(p) for p in progress]
    assert lags == [total - 40 * (n + 1) for n in range(len(lags) - 1)] + [0] and total == 100
