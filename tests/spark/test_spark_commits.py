"""The connector's commits against what can go wrong around them: a commit whose ZooKeeper reply is lost,
an abort after a commit that landed, two foreachBatch queries on one log, a sweep racing a slow write,
a ledger in a non-zero scope, and the size of the log's commit record.

The writer is driven as Spark drives it (``write`` per task on an iterator of Arrow batches, then
``commit(messages)`` on the driver and ``abort(messages)`` if the commit raised), in-process, against a
real ZooKeeper and real bookie processes; the data is read back with Spark.
"""
from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest
from kazoo.exceptions import ConnectionLoss

from bookie.exceptions import BKNoSuchLedgerExistsException
from bookie.ledger_id import LedgerId
from bookie.meta import log_metadata
import spark_bookkeeper
from spark_bookkeeper import connections
from spark_bookkeeper import log as log_module
from spark_bookkeeper.log import read_log
from spark_bookkeeper.options import WriteOptions
from spark_bookkeeper.writer import TAG_BATCH, TAG_LOG, TAG_WRITER, BookKeeperWriter, sweep_uncommitted
from tests.helpers.spark_io import source, write
from tests.helpers.waiting import wait_for


def rows(start: int, count: int) -> list[bytes]:
    return [b"row-%d" % i for i in range(start, start + count)]


def arrow_batches(payloads: list[bytes], per_batch: int = 40):
    for i in range(0, len(payloads), per_batch):
        yield pa.RecordBatch.from_arrays([pa.array(payloads[i: i + per_batch], pa.binary())], names=["payload"])


def new_writer(uri: str, log: str, **kwargs) -> BookKeeperWriter:
    return BookKeeperWriter(WriteOptions(uri=uri, log=log, **kwargs), overwrite=False)


def spark_commit(writer: BookKeeperWriter, messages) -> Exception | None:
    """What Spark does on the driver: commit, and abort with the same messages if commit raised."""
    try:
        writer.commit(messages)
        return None
    except Exception as exc:
        writer.abort(messages)
        return exc


def exists(bk, ledger: LedgerId) -> bool:
    try:
        bk.ledger_metadata(ledger)
        return True
    except BKNoSuchLedgerExistsException:
        return False


def read_payloads(spark, uri: str, log: str) -> list[bytes]:
    return sorted(bytes(r.payload) for r in source(spark, uri, log=log).select("payload").collect())


def lose_reply(monkeypatch, store, log: str, op: str, applied: bool, times: int = 1) -> list[str]:
    """Make the driver's kazoo ``op`` (create/set) on the log znode raise ConnectionLoss, after doing the real
    operation (``applied``: the reply was lost) or without it (the request was lost); ``times`` times."""
    real = getattr(store.zk, op)
    path = log_module.log_path(store, log)
    calls: list[str] = []

    def flaky(node, *args, **kwargs):
        if node != path or len(calls) >= times:
            return real(node, *args, **kwargs)
        calls.append(node)
        if applied:
            real(node, *args, **kwargs)
        raise ConnectionLoss()

    monkeypatch.setattr(store.zk, op, flaky)
    return calls


# -- issue 9 item 1: an ambiguous commit -------------------------------------------------------------
@pytest.mark.parametrize("op", ["create", "set"])
@pytest.mark.parametrize("applied", [True, False], ids=["reply-lost", "request-lost"])
def test_a_commit_in_doubt_is_resolved_by_reading_the_log_back(spark, shared_cluster, monkeypatch, op, applied):
    uri, name = shared_cluster.metadata_service_uri, f"doubt-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    expected = []
    if op == "set":  # the log exists, so the commit is a setData
        write(spark.createDataFrame([(b"first",)], "payload binary"), uri, name)
        expected.append(b"first")
    writer = new_writer(uri, name, writer_id="pipeline-a", batch_id=7)
    messages = [writer.write(arrow_batches(rows(0, 100))), writer.write(arrow_batches(rows(100, 50)))]
    calls = lose_reply(monkeypatch, bk.store, name, op, applied)

    failure = spark_commit(writer, messages)
    assert calls, "the commit never reached the log znode"
    assert failure is None, f"the commit failed: {failure!r}"
    log = read_log(bk.store, name)
    ours = [LedgerId(m.scope, m.ledger) for m in messages]
    assert [s.ledger for s in log.segments][-2:] == ours
    assert all(exists(bk, s.ledger) for s in log.segments), "the log names deleted ledgers"
    expected += rows(0, 150)
    assert read_payloads(spark, uri, name) == sorted(expected)

    # Spark replays the batch (same writer, same batch id): judged committed, because the log shows it.
    replay = new_writer(uri, name, writer_id="pipeline-a", batch_id=7)
    again = [replay.write(arrow_batches(rows(0, 150)))]
    assert spark_commit(replay, again) is None
    assert not exists(bk, LedgerId(again[0].scope, again[0].ledger)), "the replay's duplicate ledger was kept"
    assert read_log(bk.store, name).segments == log.segments
    assert read_payloads(spark, uri, name) == sorted(expected)


def test_abort_never_deletes_a_ledger_the_log_names(shared_cluster):
    """Spark may abort a batch whose commit landed (its reply lost, the driver gone before it learnt)."""
    uri, name = shared_cluster.metadata_service_uri, f"abort-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    writer = new_writer(uri, name, writer_id="pipeline-b", batch_id=0)
    messages = [writer.write(arrow_batches(rows(0, 30)))]
    writer.commit(messages)
    writer.abort(messages)
    log = read_log(bk.store, name)
    assert [s.ledger for s in log.segments] == [LedgerId(messages[0].scope, messages[0].ledger)]
    assert all(exists(bk, s.ledger) for s in log.segments), "abort deleted a ledger the log names"


def test_a_commit_left_in_doubt_makes_abort_delete_nothing(shared_cluster, monkeypatch):
    """ZooKeeper stays unreachable after the reply was lost: commit says it does not know; abort, which
    cannot read the log either, leaves every ledger in place (a later sweep decides)."""
    uri, name = shared_cluster.metadata_service_uri, f"limbo-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    writer = new_writer(uri, name, writer_id="pipeline-c", batch_id=0)
    messages = [writer.write(arrow_batches(rows(0, 30)))]
    # The in-doubt window is read where the update loop runs (bookie.meta.log_metadata), not the re-export.
    monkeypatch.setattr(log_metadata, "COMMIT_RESOLVE_SECONDS", 1.0)
    monkeypatch.setattr(log_module, "COMMIT_RESOLVE_SECONDS", 1.0)
    real_create, real_get, path = bk.store.zk.create, bk.store.zk.get, log_module.log_path(bk.store, name)
    cut_off = []

    def create_then_lose_zookeeper(node, *args, **kwargs):
        if node != path:
            return real_create(node, *args, **kwargs)
        real_create(node, *args, **kwargs)
        cut_off.append(node)
        raise ConnectionLoss()

    def get_unless_cut_off(node, *args, **kwargs):
        if cut_off and node == path:
            raise ConnectionLoss()
        return real_get(node, *args, **kwargs)

    monkeypatch.setattr(bk.store.zk, "create", create_then_lose_zookeeper)
    monkeypatch.setattr(bk.store.zk, "get", get_unless_cut_off)
    failure = spark_commit(writer, messages)
    assert cut_off and failure is not None and "in doubt" in str(failure), repr(failure)
    cut_off.clear()
    log = read_log(bk.store, name)
    assert [s.ledger for s in log.segments] == [LedgerId(messages[0].scope, messages[0].ledger)]
    assert all(exists(bk, s.ledger) for s in log.segments), "abort deleted a ledger of a commit in doubt"


# -- hazard: foreachBatch writers of two queries ----------------------------------------------------
def test_two_foreach_batch_queries_on_one_log_both_land(spark, shared_cluster, tmp_path):
    uri = shared_cluster.metadata_service_uri
    dst = f"fb-{uuid.uuid4().hex[:6]}"
    expected = []
    for i in range(2):
        src = f"fbsrc{i}-{uuid.uuid4().hex[:6]}"
        data = [(b"q%d-%d" % (i, n),) for n in range(50)]
        write(spark.createDataFrame(data, "payload binary").repartition(2), uri, src)
        expected += [d[0] for d in data]
        query = (spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", src).load()
                 .select("payload").writeStream.foreachBatch(spark_bookkeeper.foreach_batch_writer(uri, dst))
                 .option("checkpointLocation", str(tmp_path / f"checkpoint{i}")).trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None
    assert read_payloads(spark, uri, dst) == sorted(expected), "a query's batches were taken for replays"


def test_foreach_batch_writer_outside_a_query_asks_for_a_writer_id(spark, shared_cluster):
    uri = shared_cluster.metadata_service_uri
    write_batch = spark_bookkeeper.foreach_batch_writer(uri, f"fb-{uuid.uuid4().hex[:6]}")
    with pytest.raises(spark_bookkeeper.BookKeeperOptionException, match="writer_id"):
        write_batch(spark.createDataFrame([(b"x",)], "payload binary"), 0)


# -- hazard: sweep_uncommitted against a slow write -------------------------------------------------
def test_sweep_leaves_the_ledgers_of_a_running_write(spark, shared_cluster):
    """Task 1's ledger waits, older than ``older_than``, for task 2 that is still writing: not swept."""
    uri, name = shared_cluster.metadata_service_uri, f"slow-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    older_than = 2.0
    writer = new_writer(uri, name)
    first = writer.write(arrow_batches(rows(0, 40)))
    first_ledger = LedgerId(first.scope, first.ledger)
    born = bk.ledger_metadata(first_ledger).ctime / 1000
    wait_for(lambda: time.time() > born + older_than + 0.5, "task 1's ledger to be older than older_than")
    swept = []

    def second_task():
        yield from arrow_batches(rows(40, 40))
        swept.extend(sweep_uncommitted(uri, name, older_than=older_than))  # while task 2 runs
        yield from arrow_batches(rows(80, 40))

    second = writer.write(second_task())
    assert swept == [], "the sweep took ledgers of a write that was still running"
    assert spark_commit(writer, [first, second]) is None
    assert read_payloads(spark, uri, name) == sorted(rows(0, 120))


def test_a_commit_whose_ledger_was_swept_fails_the_batch_cleanly(spark, shared_cluster):
    uri, name = shared_cluster.metadata_service_uri, f"swept-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    write(spark.createDataFrame([(b"kept",)], "payload binary"), uri, name)
    writer = new_writer(uri, name)
    messages = [writer.write(arrow_batches(rows(0, 40)))]
    gone = LedgerId(messages[0].scope, messages[0].ledger)
    assert sweep_uncommitted(uri, name, older_than=0) == [gone]  # a write whose heartbeat is older than older_than

    failure = spark_commit(writer, messages)
    assert failure is not None and str(gone) in str(failure) and "not committed" in str(failure), repr(failure)
    assert all(exists(bk, s.ledger) for s in read_log(bk.store, name).segments), "the log names a swept ledger"
    assert read_payloads(spark, uri, name) == [b"kept"]


def test_a_sweep_between_the_commits_check_and_its_cas_fails_the_commit(spark, shared_cluster, monkeypatch):
    """The sweep runs after the commit checked its ledgers and before its compare-and-set lands."""
    uri, name = shared_cluster.metadata_service_uri, f"race-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    write(spark.createDataFrame([(b"kept",)], "payload binary"), uri, name)
    writer = new_writer(uri, name)
    messages = [writer.write(arrow_batches(rows(0, 40)))]
    real_set, path, swept = bk.store.zk.set, log_module.log_path(bk.store, name), []

    def set_after_a_sweep(node, *args, **kwargs):
        if node == path and not swept:
            swept.append(None)  # the sweep's own writes to the log go straight through
            swept[0] = sweep_uncommitted(uri, name, older_than=0)
        return real_set(node, *args, **kwargs)

    monkeypatch.setattr(bk.store.zk, "set", set_after_a_sweep)
    failure = spark_commit(writer, messages)
    assert swept and swept[0] == [LedgerId(messages[0].scope, messages[0].ledger)]
    assert failure is not None and "not committed" in str(failure), repr(failure)
    assert all(exists(bk, s.ledger) for s in read_log(bk.store, name).segments), "the log names a swept ledger"
    assert read_payloads(spark, uri, name) == [b"kept"]


# -- hazard: abort and the ledger's scope -----------------------------------------------------------
def test_abort_deletes_the_ledger_in_the_scope_the_task_wrote(shared_cluster):
    uri, name = shared_cluster.metadata_service_uri, f"scope-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    writer = new_writer(uri, name, writer_id="pipeline-s", batch_id=0)
    ledger_id = bk.store.generate_ledger_id()
    tags = {TAG_LOG: name.encode(), TAG_WRITER: b"pipeline-s", TAG_BATCH: b"0"}
    scoped = bk.create_ledger(3, 2, 2, custom_metadata=tags, ledger_id=ledger_id, scope_id=7)
    scoped.append(b"from a task")
    scoped.close()
    bystander = bk.create_ledger(3, 2, 2, ledger_id=ledger_id)  # same id, scope 0: another application's
    bystander.append(b"not the abort's")
    bystander.close()
    from spark_bookkeeper.writer import LedgerWritten
    writer.abort([LedgerWritten(7, ledger_id, 1, 11)])
    assert exists(bk, LedgerId(0, ledger_id)), "abort deleted a ledger of scope 0 that the task never wrote"
    assert not exists(bk, LedgerId(7, ledger_id))
    bk.delete_ledger(LedgerId(0, ledger_id))


# -- hazard: the log's commit record ----------------------------------------------------------------
def test_plain_commits_leave_a_bounded_record(shared_cluster):
    uri, name = shared_cluster.metadata_service_uri, f"bound-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    streaming = new_writer(uri, name, writer_id="pipeline-d", batch_id=3)
    streaming.commit([])
    for _ in range(1000):
        new_writer(uri, name).commit([])  # a plain df.write with no rows: a writer of its own, batch 0
    data, _ = bk.store.zk.get(log_module.log_path(bk.store, name))
    log = read_log(bk.store, name)
    assert log.commits == {"pipeline-d": 3}, f"{len(log.commits)} writers recorded"
    assert len(data) < 8192, f"the log's record is {len(data)} bytes after 1000 plain commits"


def test_a_sweep_finishes_one_that_died_between_marking_and_deleting(shared_cluster):
    """Marks left in the log by a dead sweep are completed by the next; a log only a sweep created goes away."""
    uri, name = shared_cluster.metadata_service_uri, f"dead-sweep-{uuid.uuid4().hex[:6]}"
    bk = connections.driver_client(uri)
    stray = bk.create_ledger(3, 2, 2, custom_metadata={TAG_LOG: name.encode(), TAG_WRITER: b"dead-driver",
                                                       TAG_BATCH: b"0"})
    stray.close()
    assert log_module.claim_for_sweep(bk.store, name, [stray.ledger]) == [stray.ledger]  # then the sweep died
    assert read_log(bk.store, name).swept == [stray.ledger]
    assert sweep_uncommitted(uri, name, older_than=3600) == [stray.ledger]  # marked: no longer a candidate's age
    assert not exists(bk, stray.ledger)
    with pytest.raises(log_module.LogNotFoundException):
        read_log(bk.store, name)
