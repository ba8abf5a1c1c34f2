"""Log retention (issue 12): truncation by count and by age in one CAS, the dropped ledgers deleted (a
failed deletion retried by the next truncation), a commit racing a truncation, retention at commit,
Kafka's startingOffsets and failOnDataLoss on the log stream, and ``bk shell truncatelog``. Real
ZooKeeper, bookie processes and Spark local[2]; time is controlled by explicit commit times."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from pyspark.errors import StreamingQueryException

import spark_bookkeeper
from bookie.client import BookKeeper
from bookie.client.log_truncation import truncate_log
from bookie.exceptions import BKException, BKNoSuchLedgerExistsException
from bookie.ledger_id import LedgerId
from bookie.meta.log_metadata import LogNotFoundException, LogRetention
from spark_bookkeeper import connections
from spark_bookkeeper.log import LogSegment, commit_batch, read_log
from tests.helpers.spark_io import payloads, source, write
from tests.helpers.stream_sink import Batches
from tests.helpers.waiting import wait_for

ROWS = 100  # entries per segment


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _segments(spark, uri: str, log: str, count: int, **options) -> None:
    """``count`` writes of one task each: one segment per write."""
    for _ in range(count):
        write(payloads(spark, 0, ROWS, partitions=1), uri, log, **options)


def _gone(bk, ledger: LedgerId) -> bool:
    try:
        bk.ledger_metadata(ledger)
    except BKNoSuchLedgerExistsException:
        return True
    return False


def _ledger(bk, entries: int = 3) -> LogSegment:
    lh = bk.create_ledger(3, 2, 2, password=b"")
    lh.append_batch([b"x%d" % i for i in range(entries)]).result(30)
    lh.close()
    return LogSegment(lh.ledger, entries, 2 * entries, "test", 0)


def _commit(bk, log: str, batch: int, now_ms: int | None = None, **kwargs) -> LogSegment:
    segment = _ledger(bk)
    assert commit_batch(bk.store, log, "test", batch, [segment], now_ms=now_ms, **kwargs)[0]
    return segment


def test_truncate_by_count_keeps_segment_numbers_and_deletes_the_ledgers(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("trunc")
    _segments(spark, uri, log, 4)
    with BookKeeper(uri) as bk:
        before = read_log(bk.store, log)
        result = spark_bookkeeper.truncate_log(uri, log, before_segment=2)
        assert result.dropped == [(0, before.segments[0].ledger), (1, before.segments[1].ledger)]
        assert sorted(result.deleted) == sorted(s.ledger for s in before.segments[:2]) and not result.failed
        assert all(_gone(bk, s.ledger) for s in before.segments[:2])
        after = read_log(bk.store, log)
        assert after.first_segment == 2 and after.segments == before.segments[2:] and after.pending_deletion() == []
        again = spark_bookkeeper.truncate_log(uri, log, before_segment=2)
        assert again.dropped == [] and again.deleted == [] and read_log(bk.store, log).version == after.version
    rows = source(spark, uri, log=log).groupBy("segment", "ledger_id").count().orderBy("segment").collect()
    assert [(r["segment"], r["ledger_id"], r["count"]) for r in rows] == [
        (n, s.ledger.ledger_id, ROWS) for n, s in after.numbered()]
    with pytest.raises(LogNotFoundException, match="does not exist"):
        spark_bookkeeper.truncate_log(uri, _name("missing"), before_segment=1)


def test_truncate_by_age_with_explicit_commit_times(shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("age")
    with BookKeeper(uri) as bk:
        segments = [_commit(bk, log, batch, now_ms=1_000 * (batch + 1)) for batch in range(4)]  # 1000..4000
        assert [s.committed_ms for s in read_log(bk.store, log).segments] == [1000, 2000, 3000, 4000]
        result = spark_bookkeeper.truncate_log(uri, log, older_than_ms=1500, now_ms=4000)  # before 2500
        assert [n for n, _ in result.dropped] == [0, 1] and all(_gone(bk, s.ledger) for s in segments[:2])
        assert spark_bookkeeper.truncate_log(uri, log, older_than_ms=1000, now_ms=4000).dropped == []  # 3000: kept
        assert read_log(bk.store, log).first_segment == 2
        with pytest.raises(spark_bookkeeper.BookKeeperOptionException, match="needs before_segment or older_than_ms"):
            spark_bookkeeper.truncate_log(uri, log)


def test_age_of_a_segment_written_before_commit_times_is_its_ledgers_ctime(shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("legacy")
    with BookKeeper(uri) as bk:
        old = _ledger(bk)
        old_ctime = bk.ledger_metadata(old.ledger).ctime
        wait_for(lambda: time.time() * 1000 > old_ctime + 1, "the clock to pass the first ledger's ctime")
        new = _ledger(bk)
        legacy = json.dumps({"ledgers": [{"ledger": s.ledger.ledger_id, "scope": 0, "entries": s.entries,
                                          "bytes": s.bytes, "writer": "w", "batch": 0} for s in (old, new)],
                             "commits": {}, "recent": [], "swept": []}).encode()  # as written before retention
        bk.store.write_node(f"logs/{log}", legacy, None)
        new_ctime = bk.ledger_metadata(new.ledger).ctime
        result = spark_bookkeeper.truncate_log(uri, log, older_than_ms=10, now_ms=new_ctime + 10)  # before new's
        assert result.dropped == [(0, old.ledger)] and _gone(bk, old.ledger)
        assert read_log(bk.store, log).segment(1).ledger == new.ledger


def test_a_failed_deletion_is_reported_and_retried_by_the_next_truncation(shared_cluster, monkeypatch):
    uri, log = shared_cluster.metadata_service_uri, _name("retry")
    bk = connections.driver_client(uri)  # the client truncate_log uses
    segments = [_commit(bk, log, batch) for batch in range(3)]
    stuck = segments[1].ledger
    real_delete = bk.delete_ledger

    def failing_delete(ledger, *args):
        if ledger == stuck:
            raise BKException("injected: ZooKeeper refused the delete")
        return real_delete(ledger, *args)

    monkeypatch.setattr(bk, "delete_ledger", failing_delete)
    result = spark_bookkeeper.truncate_log(uri, log, before_segment=2)
    assert result.deleted == [segments[0].ledger] and list(result.failed) == [stuck]
    assert "injected" in result.failed[stuck] and "NOT deleted" in result.describe()
    stored = read_log(bk.store, log)
    assert stored.first_segment == 2 and stored.pending_deletion() == [stuck] and not _gone(bk, stuck)
    monkeypatch.setattr(bk, "delete_ledger", real_delete)
    retried = spark_bookkeeper.truncate_log(uri, log, before_segment=2)  # nothing more to drop; retries the rest
    assert retried.dropped == [] and retried.deleted == [stuck] and _gone(bk, stuck)
    assert read_log(bk.store, log).pending_deletion() == []


@pytest.mark.parametrize("first", ["truncate", "commit"])
def test_a_commit_and_a_truncation_racing_both_land(shared_cluster, monkeypatch, first):
    """The second operation lands between the first's read and its compare-and-set: the first re-reads
    and applies its change on top, so neither the batch nor the truncation is lost."""
    uri, log = shared_cluster.metadata_service_uri, _name("race")
    with BookKeeper(uri) as bk:
        old = [_commit(bk, log, batch) for batch in range(3)]
        late = _ledger(bk)

        def commit():
            assert commit_batch(bk.store, log, "test", 3, [late])[0]

        def truncate():
            truncate_log(bk, log, LogRetention(before_segment=2))

        operations = {"truncate": truncate, "commit": commit}
        second = operations["commit" if first == "truncate" else "truncate"]
        real_write = bk.store.write_node
        writes: list[str] = []

        def write_node(path, data, version):
            if path == f"logs/{log}":
                writes.append(path)
                if len(writes) == 1:
                    second()  # lands first; the CAS below is then at a stale version
            return real_write(path, data, version)

        monkeypatch.setattr(bk.store, "write_node", write_node)
        operations[first]()
        monkeypatch.undo()
        stored = read_log(bk.store, log)
        assert stored.first_segment == 2 and [s.ledger for s in stored.segments] == [old[2].ledger, late.ledger]
        assert stored.commits["test"] == 3 and all(_gone(bk, s.ledger) for s in old[:2]) and not _gone(bk, late.ledger)
        assert len(writes) >= 3, "the first operation's CAS did not meet the second's change"


def test_retention_at_commit(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("keep")
    with BookKeeper(uri) as bk:
        _segments(spark, uri, log, 3, retentionSegments="2")
        stored = read_log(bk.store, log)
        assert stored.first_segment == 1 and len(stored.segments) == 2 and stored.pending_deletion() == []
        dropped = stored.truncated[0].ledger
        assert _gone(bk, dropped)
        # A batch of three segments with retentionSegments=1 keeps the whole batch: never its own segments.
        write(payloads(spark, 0, 3 * ROWS, partitions=3), uri, log, retentionSegments="1")
        stored = read_log(bk.store, log)
        assert stored.first_segment == 3 and [n for n, _ in stored.numbered()] == [3, 4, 5]
        assert source(spark, uri, log=log).count() == 3 * ROWS
        # retentionMs: once the clock is past the last commit, a commit with retentionMs=1 drops all before it.
        last = max(s.committed_ms for s in stored.segments)
        wait_for(lambda: time.time() * 1000 > last + 1, "the clock to pass the last commit")
        write(payloads(spark, 0, ROWS, partitions=1), uri, log, retentionMs="1")
        stored = read_log(bk.store, log)
        assert stored.first_segment == 6 and len(stored.segments) == 1
        assert all(_gone(bk, t.ledger) for t in stored.truncated)


def test_retention_by_age_at_commit_with_explicit_times(shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("agecommit")
    with BookKeeper(uri) as bk:
        for batch in range(3):
            _commit(bk, log, batch, now_ms=1000 * (batch + 1))
        _commit(bk, log, 3, now_ms=4000, retention=LogRetention(max_age_ms=2500))  # drops 1000 only
        stored = read_log(bk.store, log)
        assert stored.first_segment == 1 and [s.committed_ms for s in stored.segments] == [2000, 3000, 4000]
        assert stored.pending_deletion() == [stored.truncated[0].ledger]  # deleted by the writer's commit step


def _tail(spark, uri: str, log: str, **options):
    reader = spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", log)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _ledgers_read(seen: Batches) -> list[int]:
    return sorted({lid for lid, _, _ in seen.rows()})


def test_starting_offsets_earliest_is_the_first_segment_still_there(spark, shared_cluster, tmp_path):
    uri, log = shared_cluster.metadata_service_uri, _name("earliest")
    _segments(spark, uri, log, 3)
    spark_bookkeeper.truncate_log(uri, log, before_segment=1)
    with BookKeeper(uri) as bk:
        kept = [s.ledger.ledger_id for s in read_log(bk.store, log).segments]
    seen = Batches()
    seen.collect(_tail(spark, uri, log), str(tmp_path / "ck"), available_now=True).awaitTermination()
    assert _ledgers_read(seen) == sorted(kept) and len(seen.rows()) == 2 * ROWS


def test_starting_offsets_json_and_latest(spark, shared_cluster, tmp_path):
    uri, log = shared_cluster.metadata_service_uri, _name("offsets")
    _segments(spark, uri, log, 3)
    with BookKeeper(uri) as bk:
        segments = read_log(bk.store, log).segments
    seen = Batches()
    json_start = _tail(spark, uri, log, startingOffsets='{"segment": 1, "entry": 40}')
    seen.collect(json_start, str(tmp_path / "json"), available_now=True).awaitTermination()
    assert sorted((lid, e) for lid, e, _ in seen.rows()) == sorted(
        [(segments[1].ledger.ledger_id, e) for e in range(40, ROWS)] + [(segments[2].ledger.ledger_id, e) for e in range(ROWS)])

    latest = Batches()
    query = latest.collect(_tail(spark, uri, log, startingOffsets="latest"), str(tmp_path / "latest"))
    try:
        query.processAllAvailable()
        assert latest.rows() == []
        _segments(spark, uri, log, 1)
        query.processAllAvailable()
        with BookKeeper(uri) as bk:
            newest = read_log(bk.store, log).segments[-1].ledger.ledger_id
        assert _ledgers_read(latest) == [newest] and len(latest.rows()) == ROWS
    finally:
        query.stop()


def test_fail_on_data_loss_both_ways(spark, shared_cluster, tmp_path):
    """A query stopped after segment 1 comes back once segment 2 was truncated away: by default it fails
    naming segment 2 and its ledger; with failOnDataLoss=false it reads segment 3 and goes on."""
    uri, log = shared_cluster.metadata_service_uri, _name("loss")
    _segments(spark, uri, log, 2)
    checkpoint = str(tmp_path / "ck")
    Batches().collect(_tail(spark, uri, log), checkpoint, available_now=True).awaitTermination()
    _segments(spark, uri, log, 2)
    spark_bookkeeper.truncate_log(uri, log, before_segment=3)
    with BookKeeper(uri) as bk:
        stored = read_log(bk.store, log)
    lost, kept = stored.truncated[-1].ledger, stored.segments[0].ledger
    assert stored.truncated[-1].segment == 2
    shutil.copytree(checkpoint, str(tmp_path / "ck2"))

    failing = Batches().collect(_tail(spark, uri, log), checkpoint, available_now=True)
    with pytest.raises(StreamingQueryException,
                       match=rf"segments 2..2 \(ledgers {lost}\) were truncated away before they were read.*"
                             r"failOnDataLoss=false"):
        failing.awaitTermination()

    seen = Batches()
    seen.collect(_tail(spark, uri, log, failOnDataLoss="false"), str(tmp_path / "ck2"),
                 available_now=True).awaitTermination()
    assert _ledgers_read(seen) == [kept.ledger_id] and len(seen.rows()) == ROWS


def bk_cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", "shell", *args], capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    if ok:
        assert out.returncode == 0, out.stderr
    return out


def test_bk_shell_truncatelog(shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, _name("cli")
    args = ["-u", uri, "--log", log]
    with BookKeeper(uri) as bk:
        segments = [_commit(bk, log, batch, now_ms=1000) for batch in range(4)]  # committed long ago
        assert log in bk_cli("listlogs", "-u", uri).stdout
        out = bk_cli("truncatelog", *args, "--segments", "1").stdout
        assert f"dropped segments 0..0 (ledgers {segments[0].ledger})" in out and "first segment now 1" in out
        out = bk_cli("truncatelog", *args, "--before-segment", "3").stdout
        assert "dropped segments 1..2" in out and all(_gone(bk, s.ledger) for s in segments[:3])
        info = bk_cli("loginfo", *args).stdout
        assert "segments 3..3 (1)" in info and f"segment 3: ledger {segments[3].ledger}" in info
        out = bk_cli("truncatelog", *args, "--older-than", "1d").stdout
        assert "dropped segments 3..3" in out and _gone(bk, segments[3].ledger)
    refused = bk_cli("truncatelog", *args, "--older-than", "soon", ok=False)
    assert refused.returncode == 2 and "duration 'soon'" in refused.stderr
    missing = bk_cli("truncatelog", "-u", uri, "--log", _name("none"), "--segments", "1", ok=False)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
