"""spark.read / df.write .format("bookkeeper") on a real Spark local[2] and real bookie processes."""
from __future__ import annotations

import re
import signal
import uuid

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from bookie.client import BookKeeper
from bookie.meta.ledger_metadata import LedgerState
from bookie.server.entry_log_format import log_path
from bookie.util.human import human_bytes
from spark_bookkeeper.reader import HEAD_ENTRIES
from spark_bookkeeper.spark_versions import ADMISSION_CONTROL, FILTER_PUSHDOWN, has
from tests.helpers.disk_faults import flip_byte
from tests.helpers.spark_io import payloads, source, write

PW = b"pw"


def test_write_then_read_a_log(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"events-{uuid.uuid4().hex[:6]}"
    first, second = payloads(spark, 0, 3000), payloads(spark, 3000, 2000, partitions=2)
    write(first, uri, log)
    write(second, uri, log)
    back = source(spark, uri, log=log)
    assert back.columns == ["ledger_id", "entry_id", "payload", "log", "segment"]
    assert_df_equality(back.select("payload"), first.union(second), ignore_row_order=True, ignore_nullable=True)
    segments = back.groupBy("segment").count().orderBy("segment").collect()
    assert [r["segment"] for r in segments] == [0, 1, 2, 3, 4]  # 3 + 2 tasks, one ledger each, in commit order
    assert back.where(F.col("log") != log).count() == 0
    # Entry ids restart in every ledger and match payload order within it.
    ids = back.where("segment = 0").orderBy("entry_id").select("entry_id").collect()
    assert [r.entry_id for r in ids] == list(range(len(ids)))
    # Options of streaming reads are refused in a batch read, naming what a batch read takes instead (or, on a
    # PySpark without admission control, the PySpark the option needs).
    trigger_option = "applies to streaming reads" if has(ADMISSION_CONTROL) else r"needs PySpark 4\.2 or newer"
    for name, value, refusal in (("startingOffsets", "latest", "applies to streaming reads"),
                                 ("maxEntriesPerTrigger", "10", trigger_option)):
        with pytest.raises(Exception, match=f"option {name} {refusal}"):
            source(spark, uri, log=log, **{name: value}).collect()


def test_overwrite_swaps_the_log_and_deletes_old_ledgers(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"ow-{uuid.uuid4().hex[:6]}"
    write(payloads(spark, 0, 100), uri, log)
    old = {r.ledger_id for r in source(spark, uri, log=log).select("ledger_id").distinct().collect()}
    write(payloads(spark, 500, 50, partitions=1), uri, log, mode="overwrite")
    assert_df_equality(source(spark, uri, log=log).select("payload"), payloads(spark, 500, 50), ignore_row_order=True, ignore_nullable=True)
    with BookKeeper(uri) as bk:
        remaining = {lid.ledger_id for lid in bk.list_ledgers()}
    assert not old & remaining, "overwritten ledgers must be deleted"


def test_slices_are_fragments_times_ensemble_members_packed_per_bookie(spark, cluster):
    c = cluster(4)
    with BookKeeper(c.metadata_service_uri) as bk:
        lh = bk.create_ledger(3, 2, 2, password=PW)
        lh.append_batch([b"a%d" % i for i in range(300)]).result(30)
        victim = next(b.index for b in c.bookies if b.bookie_id == lh.ensemble[0])
        c.kill_bookie(victim, signal.SIGKILL)
        lh.append_batch([b"b%d" % i for i in range(300)]).result(60)  # a new fragment without the victim
        lh.close()
        ensembles = [ensemble for _, ensemble in bk.ledger_metadata(lh.ledger_id).ensembles]
    fragments = len(ensembles)
    assert fragments == 2
    c.start_bookie(victim)
    df = source(spark, c.metadata_service_uri, ledgers=str(lh.ledger_id), password="pw")
    # A slice per fragment and member; the two slices of each bookie the fragments share make one partition.
    assert df.rdd.getNumPartitions() == len({b for ensemble in ensembles for b in ensemble}) == 4
    unpacked = dict(ledgers=str(lh.ledger_id), password="pw", maxBytesPerPartition="1")  # a slice per partition
    assert source(spark, c.metadata_service_uri, **unpacked).rdd.getNumPartitions() == fragments * 3
    expected = spark.createDataFrame([(lh.ledger_id, i, (b"a%d" % i if i < 300 else b"b%d" % (i - 300)))
                                      for i in range(600)], "ledger_id long, entry_id long, payload binary")
    assert_df_equality(df, expected, ignore_row_order=True, ignore_nullable=True)
    assert source(spark, c.metadata_service_uri, **unpacked,
                  maxEntriesPerPartition=100).rdd.getNumPartitions() == 6 * 3  # 600 entries / 100, x 3 members


def test_open_ledger_is_read_up_to_its_lac_without_disturbing_the_writer(spark, shared_cluster):
    uri = shared_cluster.metadata_service_uri
    with BookKeeper(uri) as bk:
        writer = bk.create_ledger(3, 2, 2, password=PW)
        for i in range(50):
            writer.append(b"x%d" % i)  # entry 49 is acknowledged; its LAC travels on the next entry
        df = source(spark, uri, ledgers=str(writer.ledger_id), password="pw")
        assert df.count() == 49
        writer.append(b"after the read")
        assert bk.ledger_metadata(writer.ledger_id).state is LedgerState.OPEN
        recovered = source(spark, uri, ledgers=str(writer.ledger_id), password="pw", recover="true")
        assert recovered.count() == 51
        with pytest.raises(Exception):
            writer.append(b"fenced now")


def test_a_corrupted_replica_still_reads_correctly(spark, cluster):
    c = cluster(3)
    with BookKeeper(c.metadata_service_uri) as bk:
        lh = bk.create_ledger(3, 3, 2, password=PW)
        lh.append_batch([b"payload-%03d" % i for i in range(200)]).result(30)
        lh.close()
    owner = next(b for b in c.bookies if b.bookie_id == lh.ensemble[42 % 3])  # reads entry 42 in Spark
    c.kill_bookie(owner.index, signal.SIGTERM)
    log_file = log_path(owner.ledger_dir, 0)
    flip_byte(log_file, open(log_file, "rb").read().index(b"payload-042") + 9, 0x01)
    c.start_bookie(owner.index)
    df = source(spark, c.metadata_service_uri, ledgers=str(lh.ledger_id), password="pw")
    got = {r.entry_id: bytes(r.payload) for r in df.collect()}
    assert got == {i: b"payload-%03d" % i for i in range(200)}


def test_a_dead_bookie_is_read_around_with_range_reads(spark, cluster, monkeypatch):
    """E=3 WQ=2 with one bookie SIGKILLed: its partitions' entries come from the next bookie of their
    write set, as range reads (not one request per entry)."""
    c = cluster(3)
    with BookKeeper(c.metadata_service_uri) as bk:
        lh = bk.create_ledger(3, 2, 2, password=PW)
        lh.append_batch([b"entry-%04d" % i for i in range(3000)]).result(30)
        lh.close()
    dead = next(b for b in c.bookies if b.bookie_id == lh.ensemble[1])
    c.kill_bookie(dead.index, signal.SIGKILL)
    df = source(spark, c.metadata_service_uri, ledgers=str(lh.ledger_id), password="pw")
    assert df.rdd.getNumPartitions() == 3
    expected = spark.createDataFrame([(lh.ledger_id, i, b"entry-%04d" % i) for i in range(3000)],
                                     "ledger_id long, entry_id long, payload binary")
    assert_df_equality(df, expected, ignore_row_order=True)

    # The dead member's partition, read here with per-entry reads forbidden: range reads did it all.
    from spark_bookkeeper.spark_versions import arrow_schema
    from bookie.client.ledger_reader import LedgerReader
    from spark_bookkeeper.datasource import READ_SCHEMA
    from spark_bookkeeper.options import ReadOptions
    from spark_bookkeeper.reader import BookKeeperReader
    opts = ReadOptions.parse({"metadataserviceuri": c.metadata_service_uri, "ledgers": str(lh.ledger_id),
                              "password": "pw"})
    reader = BookKeeperReader(opts, READ_SCHEMA, arrow_schema(df.schema))
    partition = next(p for p in reader.partitions() if p.slices[0].member == 1)  # its one slice

    def no_single_reads(*args, **kwargs):
        raise AssertionError("an entry was read on its own")
    monkeypatch.setattr(LedgerReader, "read_entry", no_single_reads)
    ids = [i for batch in reader.read(partition) for i in batch.column("entry_id").to_pylist()]
    # (The read's first HEAD_ENTRIES are its head: the first partition reads them, reader.split_head.)
    assert sorted(ids) == [e for e in range(HEAD_ENTRIES, 3000) if e % 3 == 1]


def test_a_failing_task_leaves_no_ledger_behind(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"fail-{uuid.uuid4().hex[:6]}"
    boom = F.udf(lambda i: bytes(1 / 0) if i == 1500 else b"ok%d" % i, "binary")
    df = spark.range(0, 2000, numPartitions=4).select(boom("id").alias("payload"))
    with BookKeeper(uri) as bk:
        before = set(bk.list_ledgers())
        with pytest.raises(Exception, match="ZeroDivisionError"):
            write(df, uri, log)
        after = set(bk.list_ledgers())
    assert after == before, f"ledgers left behind: {after - before}"
    with pytest.raises(Exception, match="does not exist"):
        source(spark, uri, log=log)


def test_metadata_tables(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"meta-{uuid.uuid4().hex[:6]}"
    write(payloads(spark, 0, 60, partitions=2), uri, log, ensembleSize="3", writeQuorum="3", ackQuorum="2")
    ledgers = source(spark, uri, table="ledgers")
    mine = ledgers.where(F.col("custom_metadata")["spark.log"] == F.lit(log).cast("binary"))
    rows = mine.collect()
    assert len(rows) == 2 and all(r.state == "CLOSED" and r.write_quorum == 3 and r.fragments == 1 for r in rows)
    assert sum(r.last_entry_id + 1 for r in rows) == 60
    fragments = source(spark, uri, table="fragments").join(mine.select("ledger_id"), "ledger_id")
    assert fragments.count() == 2 and all(len(r.ensemble) == 3 for r in fragments.collect())
    bookies = source(spark, uri, table="bookies").collect()
    assert sorted(r.bookie_id for r in bookies) == sorted(b.bookie_id for b in shared_cluster.bookies)
    assert all(r.state == "rw" and 0 < r.free_disk < r.total_disk for r in bookies)
    spark.createDataFrame([], "x int")  # keeps the session busy-free between tests


def test_the_tables_show_sizes_and_custom_metadata_as_people_read_them(spark, shared_cluster):
    """bookies: the disk in bytes and in binary units; ledgers: custom metadata as text where it is UTF-8, hex
    where it is not, the bytes kept."""
    uri = shared_cluster.metadata_service_uri
    for r in source(spark, uri, table="bookies").collect():
        assert (r.total_disk_human, r.free_disk_human) == (human_bytes(r.total_disk), human_bytes(r.free_disk))
        assert re.fullmatch(r"\d+\.\d (KiB|MiB|GiB|TiB|PiB)", r.free_disk_human), r
    with BookKeeper(uri) as bk:
        lh = bk.create_ledger(3, 2, 2, password=PW,
                              custom_metadata={"application": "wörld".encode(), "raw": b"\x00\xff"})
        lh.close()
    row = source(spark, uri, table="ledgers").where(F.col("ledger_id") == lh.ledger_id).first()
    assert row.custom_metadata_text == {"application": "wörld", "raw": "0x00ff"}
    assert row.custom_metadata == {"application": bytearray("wörld".encode()), "raw": bytearray(b"\x00\xff")}


def test_a_striped_logs_first_entries_come_first_in_entry_order(spark, shared_cluster):
    """E=3 WQ=2: each bookie serves every third entry, yet show() and take(n) list the first segment's entries
    0, 1, 2, ..., then the next segment's (the read's head, reader.split_head)."""
    uri, log = shared_cluster.metadata_service_uri, f"order-{uuid.uuid4().hex[:6]}"
    for start in (0, 50):  # two segments of 50 entries
        write(payloads(spark, start, 50, partitions=1), uri, log, ensembleSize="3", writeQuorum="2", ackQuorum="2")
    df = source(spark, uri, log=log)
    rows = df.take(60)
    assert [(r.segment, r.entry_id) for r in rows] == [(0, e) for e in range(50)] + [(1, e) for e in range(10)]
    assert [bytes(r.payload) for r in rows[:3]] == [b"event-0", b"event-1", b"event-2"]
    shown = df.select("segment", "entry_id")._show_string(4).splitlines()[3:7]
    cells = [tuple(int(cell) for cell in line.strip("|").split("|")) for line in shown]
    assert cells == [(0, e) for e in range(4)], shown


def test_a_striped_ledgers_head_comes_first_and_the_rest_is_read_in_parallel(spark, shared_cluster):
    uri = shared_cluster.metadata_service_uri
    with BookKeeper(uri) as bk:
        lh = bk.create_ledger(3, 2, 2, password=PW)
        lh.append_batch([b"e%d" % i for i in range(3000)]).result(30)
        lh.close()
    df = source(spark, uri, ledgers=str(lh.ledger_id), password="pw")
    assert [r.entry_id for r in df.take(25)] == list(range(25))
    assert df.rdd.getNumPartitions() == 3  # one per bookie of the ensemble, as without a head: the first has it
    assert sorted(r.entry_id for r in df.select("entry_id").collect()) == list(range(3000))  # each entry once


@pytest.mark.parametrize("options,message", [
    ({"log": "x", "bogus": "1"}, "unknown read option 'bogus'"),
    ({"log": "x", "ledgers": "1"}, "exactly one of the options log, ledgers or scope"),
    ({"table": "tables"}, "allowed: ledgers, fragments, bookies"),
    ({"log": "no-such-log"}, "log 'no-such-log' does not exist"),
    ({"ledgers": "987654"}, "ledger 987654 does not exist"),
    ({"ledgers": "12x"}, "neither a ledger id nor a qualified name"),
    ({"log": "x", "startEntry": "5", "endEntry": "2"}, "endEntry=2 is before startEntry=5"),
    ({"table": "ledgers", "ledgersPerPartition": "0"}, "option ledgersPerPartition=0 must be at least 1"),
])
def test_bad_read_options(spark, shared_cluster, options, message):
    with pytest.raises(Exception, match=message):
        source(spark, shared_cluster.metadata_service_uri, **options).collect()


def test_bad_read_input_about_the_cluster(spark, shared_cluster):
    with pytest.raises(Exception, match="metadataServiceUri is missing"):
        spark.read.format("bookkeeper").option("log", "x").load()
    from bookie.util.processes import free_port
    with pytest.raises(Exception, match="cannot reach the cluster"):
        source(spark, f"zk://127.0.0.1:{free_port()}/ledgers", log="x", zkConnectTimeout="1")
    with BookKeeper(shared_cluster.metadata_service_uri) as bk:
        lh = bk.create_ledger(3, 2, 2, password=b"right")
        lh.append(b"x")
        lh.close()
    with pytest.raises(Exception, match="wrong password for ledger"):
        source(spark, shared_cluster.metadata_service_uri, ledgers=str(lh.ledger_id), password="wrong")


@pytest.mark.parametrize("columns,options,message", [
    ("cast(id as string) as value", {}, "has no payload column"),
    ("cast(cast(id as string) as binary) as payload, id", {}, "columns id cannot be written"),
    ("id as payload", {}, "payload is bigint; it must be binary or string"),
    ("cast(id as string) as payload", {"ensembleSize": "3", "writeQuorum": "4"}, "0 < ackQuorum <= writeQuorum"),
    ("cast(id as string) as payload", {"ensembleSize": "9", "writeQuorum": "2"}, "only 4 writable bookies"),
    ("cast(id as string) as payload", {"quorum": "2"}, "unknown write option 'quorum'"),
])
def test_bad_write_input(spark, shared_cluster, columns, options, message):
    df = spark.range(3).selectExpr(*columns.split(", "))
    with pytest.raises(Exception, match=message):
        write(df, shared_cluster.metadata_service_uri, "bad-input", **options)


def test_bad_write_input_about_the_cluster(spark, shared_cluster):
    from bookie.util.processes import free_port
    df = spark.range(3).selectExpr("cast(id as string) as payload")
    with pytest.raises(Exception, match="metadataServiceUri is missing"):
        df.write.format("bookkeeper").mode("append").option("log", "x").save()
    with pytest.raises(Exception, match="cannot reach the cluster"):
        write(df, f"zk://127.0.0.1:{free_port()}/ledgers", "x", zkConnectTimeout="1")


def test_string_payloads_and_explicit_registration(spark, shared_cluster):
    import spark_bookkeeper
    spark_bookkeeper.register(spark)
    uri, log = shared_cluster.metadata_service_uri, f"str-{uuid.uuid4().hex[:6]}"
    df = spark.createDataFrame([("héllo",), ("wörld",)], "payload string")
    write(df, uri, log)
    got = sorted(bytes(r.payload).decode() for r in source(spark, uri, log=log).collect())
    assert got == ["héllo", "wörld"]
    with pytest.raises(Exception, match="Append.*Overwrite|UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        write(df, uri, log, mode="errorifexists")


@pytest.mark.skipif(not has(FILTER_PUSHDOWN), reason="filter pushdown needs PySpark 4.1 (pushFilters)")
def test_filter_pushdown_narrows_partitions(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"push-{uuid.uuid4().hex[:6]}"
    write(payloads(spark, 0, 400, partitions=2), uri, log)  # two ledgers of 200 entries
    full = source(spark, uri, log=log)
    ledger = full.select(F.min("ledger_id")).first()[0]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed = source(spark, uri, log=log, filterPushdown="true").where(
            (F.col("ledger_id") == ledger) & (F.col("entry_id") >= 150) & (F.col("entry_id") < 160))
        assert pushed.rdd.getNumPartitions() == 1  # one ledger, 10 entries: the read's head alone (split_head)
        assert sorted(r.entry_id for r in pushed.collect()) == list(range(150, 160))
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert full.where(F.col("entry_id") < 5).count() == 10  # without the opt-in: filtered by Spark alone


@pytest.mark.skipif(has(FILTER_PUSHDOWN), reason="this PySpark has pushFilters")
def test_filter_pushdown_is_refused_naming_the_pyspark_it_needs(spark, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"push-{uuid.uuid4().hex[:6]}"
    write(payloads(spark, 0, 10, partitions=1), uri, log)
    with pytest.raises(Exception, match=r"option filterPushdown needs PySpark 4\.1 or newer; this is PySpark 4\.0"):
        source(spark, uri, log=log, filterPushdown="true").collect()


def test_sweep_deletes_ledgers_no_commit_took_in(spark, shared_cluster):
    """A task that outlived its write's abort (or a driver that died) leaves tagged ledgers: swept."""
    from spark_bookkeeper import sweep_uncommitted
    from spark_bookkeeper.writer import TAG_BATCH, TAG_LOG, TAG_WRITER
    uri, log = shared_cluster.metadata_service_uri, f"sweep-{uuid.uuid4().hex[:6]}"
    write(payloads(spark, 0, 10, partitions=1), uri, log)
    with BookKeeper(uri) as bk:
        stray = bk.create_ledger(3, 2, 2, custom_metadata={TAG_LOG: log.encode(), TAG_WRITER: b"dead-driver",
                                                           TAG_BATCH: b"0"})
        stray.append(b"never committed")
        stray.close()
        assert sweep_uncommitted(uri, log, older_than=3600) == []  # too young: could be a write in progress
        assert sweep_uncommitted(uri, log, older_than=0) == [stray.ledger]
        assert stray.ledger not in bk.list_ledgers()
    assert source(spark, uri, log=log).count() == 10  # committed ledgers stay
