"""Many small ledgers read through Spark in few partitions: slices packed by bytes per bookie (issue 31)."""
from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor

from bookie.client import BookKeeper
from tests.helpers.held_bookie import restart_held
from tests.helpers.spark_io import source
from tests.helpers.waiting import DEADLINE, wait_for

PW = b"pw"


def _small_ledgers(uri: str, count: int, entries: int = 3) -> dict[int, list[bytes]]:
    """``count`` closed ledgers (E=3, WQ=2) of ``entries`` 1 KiB entries each."""
    written = {}
    with BookKeeper(uri) as bk:
        for n in range(count):
            lh = bk.create_ledger(3, 2, 2, password=PW)
            payloads = [b"%04d-%d-" % (n, i) + b"x" * 1014 for i in range(entries)]
            lh.append_batch(payloads).result(30)
            lh.close()
            written[lh.ledger_id] = payloads
    return written


def _read_back(df) -> dict[int, list[bytes]]:
    got: dict[int, dict[int, bytes]] = {}
    for r in df.collect():
        entries = got.setdefault(r.ledger_id, {})
        assert r.entry_id not in entries, f"entry {r.ledger_id}:{r.entry_id} read twice"
        entries[r.entry_id] = bytes(r.payload)
    return {lid: [entries.get(e) for e in range(max(entries) + 1)] for lid, entries in got.items()}


def test_200_small_ledgers_are_read_exactly_once_in_few_partitions(spark, shared_cluster):
    uri = shared_cluster.metadata_service_uri
    written = _small_ledgers(uri, 200)
    ledgers = ",".join(str(lid) for lid in written)
    df = source(spark, uri, ledgers=ledgers, password="pw")
    # 600 slices (200 ledgers x 3 members, one entry each) on 4 bookies: one partition per bookie.
    assert df.rdd.getNumPartitions() <= 4
    assert _read_back(df) == written
    # Without packing (every slice costs more than a partition holds): a partition per slice, as before.
    assert source(spark, uri, ledgers=ledgers, password="pw", maxBytesPerPartition="1").rdd.getNumPartitions() == 600


def test_packed_slices_of_a_dead_bookie_are_read_from_replicas(spark, cluster):
    c = cluster(3)
    written = _small_ledgers(c.metadata_service_uri, 60)
    c.kill_bookie(1, signal.SIGKILL)
    df = source(spark, c.metadata_service_uri, ledgers=",".join(str(lid) for lid in written), password="pw")
    assert df.rdd.getNumPartitions() == 3  # 180 slices, one partition per bookie
    assert _read_back(df) == written


def _many_small_ledgers(uri: str, count: int, entries: int = 3, writers: int = 8) -> set[tuple[int, int, bytes]]:
    """(ledger id, entry id, payload) of ``count`` closed ledgers (E=3, WQ=2: every entry on two bookies) of
    ``entries`` small entries each, written by ``writers`` threads on one client."""
    with BookKeeper(uri, {"addEntryTimeout": 30.0}) as bk:
        def one(n: int) -> list[tuple[int, int, bytes]]:
            lh = bk.create_ledger(3, 2, 2, password=PW)
            payloads = [b"%05d-%d-" % (n, i) + b"y" * 90 for i in range(entries)]
            lh.append_batch(payloads).result(DEADLINE)
            lh.close()
            return [(lh.ledger_id, i, p) for i, p in enumerate(payloads)]

        with ThreadPoolExecutor(writers) as pool:
            return {row for rows in pool.map(one, range(count)) for row in rows}


def test_2000_small_ledgers_read_with_a_bookie_killed_mid_read_come_from_replicas(spark, cluster, tmp_path):
    """Issue 31: a packed read of 2,000 small ledgers, one of whose bookies is SIGKILLed while a task is
    reading from it, still returns every entry exactly once: the slices that bookie was to serve (the one
    in flight, the rest of its partition, its partitions not started yet) are read from the next bookie of
    their write sets. Deterministic: the bookie holds a range read (tests/helpers/held_bookie.py,
    ``range-read``) after serving some, and is killed only once a task waits on that read."""
    c = cluster(3)
    victim = 1
    hold = restart_held(c, victim, tmp_path / "control", "range-read")  # the cluster still stops it by PID
    pid = c.bookies[victim].proc.pid
    uri = c.metadata_service_uri
    written = _many_small_ledgers(uri, 2000)
    assert len(written) == 6000

    df = source(spark, uri, scope="0", password="pw")
    # 6,000 slices (2,000 ledgers x 3 members, one entry each), packed per bookie by openCostInBytes.
    partitions = df.rdd.getNumPartitions()
    assert 3 <= partitions <= 6000 // 100, partitions

    # Each task asks its bookie for its whole share in one call (a message or so): the victim holds the first
    # message of one, its task waiting on it.
    hold.arm(after_reads=0)
    outcome: dict = {}

    def collect() -> None:
        try:
            outcome["rows"] = df.collect()
        except BaseException as exc:  # handed to the test's thread
            outcome["error"] = exc

    reader = threading.Thread(target=collect, name="spark-collect", daemon=True)
    reader.start()
    try:
        wait_for(lambda: hold.holding() or not reader.is_alive(), "a Spark task to be held mid-read by the victim")
        assert hold.holding(), f"the read ended before the victim held a range read: {outcome.get('error')!r}"
        assert reader.is_alive()
        assert c.bookies[victim].proc.pid == pid
        c.kill_bookie(victim, signal.SIGKILL)  # by PID; its sockets close, failing the held read at once
        wait_for(lambda: not reader.is_alive(), "the read to finish from the replicas", 3 * DEADLINE)
    finally:
        if c.bookies[victim].proc is not None:  # failed before the kill: let the held task go on, and stop it
            c.kill_bookie(victim, signal.SIGKILL)
        reader.join(3 * DEADLINE)
    assert "error" not in outcome, f"the read failed: {outcome['error']!r}"
    rows = [(r.ledger_id, r.entry_id, bytes(r.payload)) for r in outcome["rows"]]
    assert len(rows) == len(set(rows)), "entries read more than once"
    assert set(rows) == written
