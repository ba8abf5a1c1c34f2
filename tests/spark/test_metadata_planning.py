"""Planning reads each ledger's metadata once, pipelined (issue 31, item 2), and the metadata tables are split
by ledger ids across executors: the same rows as one partition gives, and no error when ledgers are deleted
while they are read. Real ZooKeeper, bookie processes and Spark; each test in a scope of its own, so the
ledgers other tests leave on the shared cluster are not counted."""
from __future__ import annotations

import itertools
import pickle

import pytest

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from bookie.meta import multi_read
from spark_bookkeeper import bookie_tables, connections, reader, tables
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions
from tests.helpers.spark_io import source

PW = b"pw"
_scopes = itertools.count(0x3E7A0)


@pytest.fixture
def scope() -> int:
    return next(_scopes)


def make_ledgers(uri: str, scope: int, count: int, open_ones: int = 0) -> list[LedgerId]:
    """``count`` closed ledgers of ``2 + i % 4`` entries each in ``scope`` and then ``open_ones`` left open (their
    writer gone quietly: no close), one entry more, so that the first ``2 + i % 4`` are confirmed (the LAC the
    last one carries)."""
    made = []
    with BookKeeper(uri) as bk:
        for i in range(count + open_ones):
            handle = bk.create_ledger(3, 2, 2, password=PW, scope_id=scope,
                                      custom_metadata={"application": b"app-%d" % (i % 3)})
            handle.append_batch([b"e%d" % i] * (2 + i % 4)).result(60)
            if i < count:
                handle.close()
            else:
                handle.append(b"unconfirmed")
            made.append(handle.ledger)
    return made


class ZooKeeperReads:
    """The read requests a kazoo client sends, by kind and path (its ``*_async`` methods, wrapped on the
    instance: the blocking ``get`` and ``get_children`` send through them; and each path of a multiRead)."""

    def __init__(self, zk, monkeypatch):
        self.paths: list[tuple[str, str]] = []
        for name in ("get_async", "get_children_async", "exists_async"):
            monkeypatch.setattr(zk, name, self._counting(name, getattr(zk, name)))
        original = multi_read.multi_read_async

        def multi_read_async(client, paths):
            if client is zk:
                self.paths += [("multi_read", p) for p in paths]
            return original(client, paths)
        monkeypatch.setattr(multi_read, "multi_read_async", multi_read_async)

    def _counting(self, name, method):
        def call(path, *args, **kwargs):
            self.paths.append((name, path))
            return method(path, *args, **kwargs)
        return call

    def of(self, store, ledger: LedgerId) -> int:
        path = store.ledger_path(ledger)
        return sum(1 for _, p in self.paths if p == path)


def test_a_plan_reads_each_ledgers_metadata_once_and_asks_no_bookie_of_a_closed_ledger(shared_cluster, scope,
                                                                                       monkeypatch):
    uri = shared_cluster.metadata_service_uri
    closed = make_ledgers(uri, scope, 12)
    opts = ReadOptions.parse({"metadataServiceUri": uri, "scope": str(scope), "password": PW.decode()})
    bk = connections.driver_client(uri)
    bk.list_ledgers(scope)  # the bookie registrations and the tree are cached alike either way: warm the client
    zk = ZooKeeperReads(bk.store.zk, monkeypatch)
    asked = []
    monkeypatch.setattr(bk, "bookie_client", lambda bookie, *a, **k: asked.append(bookie))
    parts = reader.plan(opts)
    assert sorted({s.ledger for p in parts for s in p.slices}) == sorted(closed)
    assert [zk.of(bk.store, ledger) for ledger in closed] == [1] * len(closed)
    # Besides: the listing of the scope's tree (a few levels) and each bookie's registration.
    listings = sum(1 for name, _ in zk.paths if name == "get_children_async")
    assert listings <= 5 and len(zk.paths) == len(closed) + listings + len(shared_cluster.bookies), \
        "\n".join(map(str, zk.paths))
    assert asked == []  # a closed ledger's last entry is in its metadata


def test_an_open_ledger_is_planned_to_its_lac_from_one_read_of_its_metadata(shared_cluster, scope, monkeypatch):
    uri = shared_cluster.metadata_service_uri
    made = make_ledgers(uri, scope, 2, open_ones=1)
    opts = ReadOptions.parse({"metadataServiceUri": uri, "scope": str(scope), "password": PW.decode()})
    bk = connections.driver_client(uri)
    zk = ZooKeeperReads(bk.store.zk, monkeypatch)
    slices = {sl.ledger: sl for sl in reader.resolve_slices(opts)}
    assert [zk.of(bk.store, ledger) for ledger in made] == [1, 1, 1]
    written = {ledger: 2 + i % 4 for i, ledger in enumerate(made)}
    # The open ledger too: up to its LAC, asked of its bookies (its last entry is not confirmed to them yet).
    assert [(slices[lid].first, slices[lid].last) for lid in made] == [(0, written[lid] - 1) for lid in made]


def test_the_read_errors_still_name_the_ledger(shared_cluster, scope):
    uri = shared_cluster.metadata_service_uri
    ledger = make_ledgers(uri, scope, 1)[0]
    named = {"metadataServiceUri": uri, "ledgers": ledger.qualified_name}
    with pytest.raises(BookKeeperOptionException, match=f"wrong password for ledger {ledger}"):
        reader.check_selection(ReadOptions.parse({**named, "password": "nope"}))
    with pytest.raises(BookKeeperOptionException, match=f"option digest=crc32 but ledger {ledger} uses crc32c"):
        reader.plan(ReadOptions.parse({**named, "password": PW.decode(), "digest": "crc32"}))
    with BookKeeper(uri) as bk:
        bk.delete_ledger(ledger)
    with pytest.raises(BookKeeperOptionException, match=f"ledger {ledger} does not exist"):
        reader.plan(ReadOptions.parse({**named, "password": PW.decode()}))


def test_a_scope_read_leaves_out_a_ledger_deleted_between_its_listing_and_its_read(shared_cluster, scope,
                                                                                   monkeypatch):
    uri = shared_cluster.metadata_service_uri
    made = make_ledgers(uri, scope, 5)
    gone = made[1:3]
    bk = connections.driver_client(uri)
    listing = bk.list_ledgers

    def list_then_delete(scope_id=0):
        listed = listing(scope_id)
        for ledger in gone:
            bk.delete_ledger(ledger)
        return listed

    monkeypatch.setattr(bk, "list_ledgers", list_then_delete)
    opts = ReadOptions.parse({"metadataServiceUri": uri, "scope": str(scope), "password": PW.decode()})
    assert [sl.ledger for sl in reader.resolve_slices(opts)] == [lid for lid in made if lid not in gone]


def _table(spark, uri: str, scope: int, name: str, **options) -> list[tuple]:
    df = source(spark, uri, table=name, scope=str(scope), **options)
    return df, sorted(tuple(row) for row in df.collect())


@pytest.mark.parametrize("name", sorted(tables.LEDGER_ROWS))
def test_split_tables_give_the_rows_of_one_partition(spark, shared_cluster, scope, name):
    uri = shared_cluster.metadata_service_uri
    made = make_ledgers(uri, scope, 9, open_ones=2)
    split, split_rows = _table(spark, uri, scope, name, ledgersPerPartition="3")
    whole, whole_rows = _table(spark, uri, scope, name)
    assert split.rdd.getNumPartitions() == 4 and whole.rdd.getNumPartitions() == 1
    assert split_rows == whole_rows
    assert sorted({(r[0], r[1]) for r in split_rows}) == sorted(tuple(lid) for lid in made)


def test_an_empty_scope_is_an_empty_table(spark, shared_cluster, scope):
    uri = shared_cluster.metadata_service_uri
    assert _table(spark, uri, scope, "ledgers")[1] == []


def test_tables_leave_out_ledgers_deleted_after_the_plan(shared_cluster, scope):
    """The driver lists the ids, then ledgers go, then the executors read: those rows are gone, no error."""
    uri = shared_cluster.metadata_service_uri
    made = make_ledgers(uri, scope, 8)
    gone = {made[0], made[4], made[5]}
    planned, before = {}, {}
    for name in tables.LEDGER_ROWS:
        table = tables.TableReader(ReadOptions.parse({"metadataServiceUri": uri, "table": name, "scope": str(scope),
                                                      "ledgersPerPartition": "3"}))
        parts = [pickle.loads(pickle.dumps(p)) for p in table.partitions()]  # as an executor gets them
        assert [p.count() for p in parts] == [3, 3, 2]
        planned[name] = table, parts
        before[name] = [row for p in parts for row in table.read(p)]
        # The rows the driver built before the split, all of them in one place, from every ledger's metadata.
        assert before[name] == [row for ledger, md in connections.driver_client(uri).store.ledgers_with_metadata(scope)
                                for row in tables.LEDGER_ROWS[name](ledger, md)]
    with BookKeeper(uri) as bk:
        for ledger in gone:
            bk.delete_ledger(ledger)
    for name, (table, parts) in planned.items():
        after = [row for p in parts for row in table.read(p)]
        assert after == [row for row in before[name] if LedgerId(row[0], row[1]) not in gone]
        assert {LedgerId(r[0], r[1]) for r in after} == set(made) - gone


def test_the_bookie_plan_keeps_compact_facts_and_skips_deleted_ledgers(shared_cluster, scope, monkeypatch):
    uri = shared_cluster.metadata_service_uri
    made = make_ledgers(uri, scope, 6, open_ones=1)
    bk = connections.driver_client(uri)
    with BookKeeper(uri) as other:
        before = bookie_tables.BookiePlan(bk, other.store.ledgers_with_metadata(scope), scope)
        listing = other.store.iterate_ledgers

        def list_then_delete(scope_id=0):
            listed = list(listing(scope_id))
            other.delete_ledger(made[2])
            return iter(listed)

        monkeypatch.setattr(other.store, "iterate_ledgers", list_then_delete)
        after = bookie_tables.BookiePlan(bk, other.store.ledgers_with_metadata(scope), scope)
    expected = {}
    with BookKeeper(uri) as fresh:
        for ledger, md in fresh.store.ledgers_with_metadata(scope):
            for bookie, summary in bookie_tables.on_bookies(ledger, md).items():
                expected.setdefault(bookie, []).append(summary)
    partitions = {p.bookie: pickle.loads(pickle.dumps(p)) for p in after.partitions("bookie_ledgers")}
    for bookie, summaries in expected.items():
        assert list(partitions[bookie].ledgers) == summaries
    assert sum(p.ledgers.count() for p in partitions.values()) == \
        sum(p.ledgers.count() for p in before.partitions("bookie_ledgers")) - 3  # E=3: its three bookies
    known = next(iter(partitions.values())).known
    assert tuple(made[2]) not in known and known.get(tuple(made[0])) is True and known.get(tuple(made[-1])) is False
    assert all(p.ledgers == [] and p.known == {} for p in after.partitions("entrylogs"))
