"""The per-bookie tables of format("bookkeeper"): ``entrylogs`` (each bookie's entry logs as its garbage collector
describes them) and ``bookie_ledgers`` (each bookie's entries and bytes per ledger against the metadata), read
by executors from real bookie processes; passes are forced and waited for, no pass runs on its own."""
from __future__ import annotations

import dataclasses
import signal

from bookie.client import BookKeeper
from bookie.meta.bookie_service_info import GRPC, Endpoint
from bookie.proto import bookkeeper_pb2 as pb
from bookie.util.processes import free_ports
from tests.helpers.gc import NO_TIMED_PASS, forced_pass
from tests.helpers.spark_io import source
from tests.helpers.waiting import DEADLINE, wait_for

SETTINGS = {"entryLogSizeLimit": 64 << 10, **NO_TIMED_PASS}
ENTRY = 4000
FRAMING = 100  # bytes an entry takes in an entry log beyond its payload: size prefix, digest header, digest


def suspend_compaction(bk: BookKeeper, bookie: str) -> None:
    """No compaction in forced passes: deleted ledgers' bytes stay in their logs for the tables to show."""
    bk.bookie_client(bookie).garbage_collection(pb.GarbageCollectionRequest.SUSPEND, major=True, minor=True)


def interleaved(bk: BookKeeper, ensemble: int, count: int, size: int):
    """Two closed ledgers on ``ensemble`` bookies (WQ = E) written entry by entry in turns, so each entry log
    holds bytes of both: deleting one leaves the logs half used."""
    a, b = (bk.create_ledger(ensemble, ensemble, ensemble, password=b"pw") for _ in range(2))
    for i in range(count):
        a.append(b"a" * size)
        b.append(b"b" * size)
    a.close()
    b.close()
    return a.ledger_id, b.ledger_id


def unregistered(c, bk: BookKeeper, index: int) -> None:
    """SIGKILL bookie ``index`` and wait until its registration is gone (a lost bookie)."""
    bookie = c.bookies[index].bookie_id
    c.kill_bookie(index, signal.SIGKILL)
    wait_for(lambda: bookie not in bk.writable_bookies() + bk.readonly_bookies(), f"{bookie} unregistered")


def test_entrylogs_show_usage_deleted_ledgers_candidates_and_the_log_being_written(spark, bk_cluster):
    c, bk = bk_cluster(2, **SETTINGS)
    uri, bookies = c.metadata_service_uri, [b.bookie_id for b in c.bookies]
    doomed, kept = interleaved(bk, 2, 40, ENTRY)  # 320 KB a bookie: several finished 64 KB logs
    tail, _ = interleaved(bk, 2, 10, ENTRY)  # pushes the last log of doomed and kept out of the one being written
    for bookie in bookies:
        suspend_compaction(bk, bookie)
    bk.delete_ledger(doomed)
    states = {bookie: forced_pass(bk, bookie) for bookie in bookies}

    rows = source(spark, uri, table="entrylogs").collect()
    assert {r.bookie_id for r in rows} == set(bookies) and {r.status for r in rows} == {"ok"}
    for bookie in bookies:
        mine = [r for r in rows if r.bookie_id == bookie]
        current = [r for r in mine if r.being_written]
        assert len(current) == 1 and current[0].entry_log_id == max(r.entry_log_id for r in mine)
        finished = [r for r in mine if not r.being_written]
        assert len(finished) >= 3
        assert {r.entry_log_id for r in finished} == {log.entryLogId for log in states[bookie].entryLogs}
        half = [r for r in finished if r.deleted_ledgers == 1]
        assert half and all(r.remaining_bytes < r.total_bytes for r in half)
        assert all(r.usage == r.remaining_bytes / r.total_bytes for r in finished)
        assert all(0.3 < r.usage < 0.7 for r in half if r.ledgers == 1)  # doomed and kept in turns: about half
        # Compaction is suspended: no log is a candidate, whatever its usage.
        assert not any(r.minor_compaction_candidate or r.major_compaction_candidate for r in mine)

    for bookie in bookies:
        bk.bookie_client(bookie).garbage_collection(pb.GarbageCollectionRequest.RESUME, major=True, minor=True)
    rows = source(spark, uri, table="entrylogs").collect()
    thresholds = bk.bookie_client(bookies[0]).garbage_collection()
    minor, major = thresholds.minorCompactionThreshold, thresholds.majorCompactionThreshold
    assert 0 < minor < 0.3 < 0.7 < major  # the defaults: a half-used log is a major candidate only
    for r in rows:
        assert r.minor_compaction_candidate == (not r.being_written and r.usage < minor)
        assert r.major_compaction_candidate == (not r.being_written and r.usage < major)
    assert any(r.major_compaction_candidate and not r.minor_compaction_candidate for r in rows)

    unregistered(c, bk, 1)
    # Registered (read-only) at a gRPC port where nothing listens: a bookie that does not answer.
    silent_port, silent_grpc = free_ports(2, taken=c.ports)
    silent = f"127.0.0.1:{silent_port}"
    bk.store.register_bookie(silent, True, (Endpoint(GRPC, "127.0.0.1", silent_grpc, GRPC),))
    rows = source(spark, uri, table="entrylogs").collect()
    lost = [r for r in rows if r.bookie_id == bookies[1]]
    assert len(lost) == 1 and lost[0].status == "unavailable" and lost[0].entry_log_id is None
    assert "not registered" in lost[0].error
    mute = [r for r in rows if r.bookie_id == silent]
    assert len(mute) == 1 and mute[0].status == "unavailable" and mute[0].entry_log_id is None
    assert "BKBookieHandleNotAvailableException" in mute[0].error and silent in mute[0].error
    assert {r.status for r in rows if r.bookie_id == bookies[0]} == {"ok"}


def test_bookie_ledgers_compare_each_bookies_entries_with_the_striping_and_show_bytes(spark, bk_cluster):
    c, bk = bk_cluster(4, **SETTINGS)
    uri, bookies = c.metadata_service_uri, [b.bookie_id for b in c.bookies]
    doomed, kept = interleaved(bk, 4, 30, ENTRY)
    striped, victim = (bk.create_ledger(3, 2, 2, password=b"pw") for _ in range(2))
    for handle in (striped, victim):
        handle.append_batch([b"s" * 1000] * 30).result(DEADLINE)
        handle.close()
    still_open = bk.create_ledger(3, 2, 2, password=b"pw")
    still_open.append_batch([b"o" * 10] * 5).result(DEADLINE)
    interleaved(bk, 4, 10, ENTRY)  # doomed's last log finished, not the one being written
    passes = {}
    for bookie in bookies:
        suspend_compaction(bk, bookie)
        passes[bookie] = forced_pass(bk, bookie).passes  # its finished logs described
    # The victim's metadata names, instead of one of its bookies, a bookie that never got its entries.
    versioned = bk.store.read_ledger(victim.ledger)
    (first, ensemble), = versioned.value.ensembles
    stranger = next(b for b in bookies if b not in ensemble)
    replaced = ensemble[1]
    bk.store.write_ledger(victim.ledger, dataclasses.replace(
        versioned.value, ensembles=((first, (ensemble[0], stranger, ensemble[2])),)), versioned.version)
    bk.delete_ledger(doomed)

    rows = {(r.bookie_id, r.ledger_id): r for r in source(spark, uri, table="bookie_ledgers").collect()}
    assert {r.status for r in rows.values()} == {"ok"}
    assert all(r.gc_passes == passes[r.bookie_id] for r in rows.values())
    striped_md = bk.ledger_metadata(striped.ledger_id)
    for bookie in striped_md.ensembles[0][1]:
        r = rows[(bookie, striped.ledger_id)]
        assert (r.in_metadata, r.expected_entries, r.entries, r.missing_entries, r.short_fragments) == \
            (True, 20, 20, 0, [])  # E3 WQ2: 2 of every 3 entries
        assert 20 * 1000 < r.bytes <= 20 * (1000 + FRAMING) and r.deleted_bytes == 0
    open_ensemble = bk.ledger_metadata(still_open.ledger_id).ensembles[0][1]
    assert sum(rows[(b, still_open.ledger_id)].entries for b in open_ensemble) == 5 * 2
    assert {rows[(b, still_open.ledger_id)].expected_entries for b in open_ensemble} == {None}

    lacking = rows[(stranger, victim.ledger_id)]
    assert (lacking.in_metadata, lacking.expected_entries, lacking.entries, lacking.missing_entries,
            lacking.short_fragments, lacking.bytes) == (True, 20, 0, 20, [0], 0)
    left_behind = rows[(replaced, victim.ledger_id)]  # the metadata no longer names it: nothing expected
    assert (left_behind.in_metadata, left_behind.expected_entries, left_behind.entries,
            left_behind.missing_entries, left_behind.short_fragments) == (True, 0, 20, 0, [])
    assert left_behind.bytes > 20 * 1000

    for bookie in bookies:  # doomed: gone from the metadata, its bytes still live on every bookie
        r = rows[(bookie, doomed)]
        assert (r.in_metadata, r.expected_entries, r.entries, r.deleted_bytes, r.deleted_at_pass) == \
            (False, None, 30, 0, None)
        assert 30 * ENTRY < r.bytes <= 30 * (ENTRY + FRAMING)
        assert rows[(bookie, kept)].bytes == r.bytes  # same sizes, written in turns

    passes = {bookie: forced_pass(bk, bookie).passes for bookie in bookies}
    after = {(r.bookie_id, r.ledger_id): r for r in source(spark, uri, table="bookie_ledgers").collect()}
    for bookie in bookies:
        r = after[(bookie, doomed)]
        assert (r.in_metadata, r.entries, r.bytes, r.deleted_bytes, r.deleted_at_pass, r.gc_passes) == \
            (False, 0, 0, rows[(bookie, doomed)].bytes, passes[bookie], passes[bookie])

    lost_index = next(i for i, b in enumerate(bookies) if b == stranger)
    unregistered(c, bk, lost_index)
    lost = [r for r in source(spark, uri, table="bookie_ledgers").collect() if r.bookie_id == stranger]
    on_it = {ledger for ledger in bk.list_ledgers()
             if any(stranger in ens for _, ens in bk.ledger_metadata(ledger).ensembles)}
    assert {r.ledger_id for r in lost} == {ledger.ledger_id for ledger in on_it}
    assert {r.status for r in lost} == {"unavailable"} and all("not registered" in r.error for r in lost)
    assert [(r.entries, r.bytes) for r in lost if r.ledger_id == victim.ledger_id] == [(None, None)]
    assert [r.expected_entries for r in lost if r.ledger_id == victim.ledger_id] == [20]
