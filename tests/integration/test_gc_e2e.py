"""Garbage collection end to end in a bookie process, against the real ZooKeeper: a corrupt entry log is
skipped and reported while the pass goes on with the others, and over-replicated ledgers are deleted
only when CLOSED, absent from every ensemble and not marked under-replicated. Passes are forced over
the GarbageCollection request and waited for (``passes >= forcedPass``); no pass runs on its own."""
from __future__ import annotations

import dataclasses
import glob
import os
import signal
import subprocess
import sys

from bookie.client import BookKeeper
from bookie.meta import layout
from bookie.proto import status
from bookie.server.entry_log_metadata import extract_entry_log_metadata
from bookie.server.entry_log_format import LOG_HEADER_SIZE, encode_log_header
from tests.helpers.gc import NO_TIMED_PASS, forced_pass
from tests.helpers.waiting import DEADLINE, wait_for

ENTRY = 4000


def write(bk: BookKeeper, count: int, payload: bytes):
    handle = bk.create_ledger(1, 1, 1, password=b"pw")
    handle.append_batch([payload] * count).result(DEADLINE)
    return handle


def logs_by_content(ledger_dir: str) -> dict[str, frozenset[int]]:
    """Each entry log file of a stopped bookie: the ids of the ledgers it holds."""
    return {path: frozenset(ledger.ledger_id for ledger in extract_entry_log_metadata(
        int(os.path.basename(path)[:-4], 16), path, 1 << 30).ledgers)
        for path in sorted(glob.glob(os.path.join(ledger_dir, "current", "*.log")))}


def overwrite(path: str, offset: int, data: bytes) -> bytes:
    """Write ``data`` at ``offset`` of the file; returns the file's whole content afterwards."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
        f.seek(0)
        return f.read()


def read_all(bk: BookKeeper, handle) -> list[bytes]:
    reader = bk.open_ledger(handle.ledger.ledger_id, password=b"pw")
    return [e.payload for e in reader.read(0, reader.last_add_confirmed)]


def test_a_corrupt_entry_log_is_skipped_and_reported_and_gc_goes_on(bk_cluster):
    c, bk = bk_cluster(1, entryLogSizeLimit=64 << 10, **NO_TIMED_PASS)
    bookie = c.bookies[0]
    # Written one after the other, each over a few 64 KiB logs, so some logs hold one ledger alone.
    dead_a, dead_b, live_d = (write(bk, 50, bytes([n]) * ENTRY) for n in (1, 2, 3))
    live_c = write(bk, 10, b"c" * 100)
    for handle in (dead_a, dead_b, live_d, live_c):
        handle.close()
    a, b, d = (h.ledger.ledger_id for h in (dead_a, dead_b, live_d))
    c.kill_bookie(0, signal.SIGTERM)
    logs = logs_by_content(bookie.ledger_dir)
    only_a = next(path for path, held in logs.items() if held == {a})
    only_d = next(path for path, held in logs.items() if held == {d})
    dead_logs = [path for path, held in logs.items() if held <= {a, b} and path != only_a]
    assert any(logs[path] == {b} for path in dead_logs)
    # A bad header on a log of ledger A (deleted below), an impossible ledgers-map offset on one of D (live).
    bad_magic = overwrite(only_a, 0, b"\0\0\0\0")
    size = os.path.getsize(only_d)
    bad_map = overwrite(only_d, 0, encode_log_header(map_offset=size + LOG_HEADER_SIZE, ledgers_count=1))
    c.start_bookie(0)
    bk.delete_ledger(a)
    bk.delete_ledger(b)

    state = forced_pass(bk, bookie.bookie_id)

    assert state.ledgersDeleted == 2
    assert [path for path in dead_logs if os.path.exists(path)] == []  # the other logs of A and B: removed
    reasons = {k.path: k.reason for k in state.skipped}
    assert set(reasons) == {only_a, only_d}
    assert "bad header" in reasons[only_a] and "impossible header" in reasons[only_d]
    assert {k.entryLogId for k in state.skipped} == {int(os.path.basename(p)[:-4], 16) for p in (only_a, only_d)}
    with open(only_a, "rb") as f:
        assert f.read() == bad_magic  # a log GC cannot read is left as it is, even a deleted ledger's
    with open(only_d, "rb") as f:
        assert f.read() == bad_map
    assert read_all(bk, live_d) == [bytes([3]) * ENTRY] * 50
    assert read_all(bk, live_c) == [b"c" * 100] * 10

    again = forced_pass(bk, bookie.bookie_id)  # still unreadable, still reported, still there
    assert {k.path for k in again.skipped} == {only_a, only_d} and os.path.exists(only_a)
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", "shell", "gc", "-u", c.metadata_service_uri,
                          "--status"], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    for path, reason in reasons.items():
        assert f"SKIPPED log {os.path.basename(path)[:-4]} ({path}): {reason}" in out.stdout


def moved_elsewhere(bk: BookKeeper, handle, fragments: tuple[tuple[int, tuple[str, ...]], ...]) -> None:
    """Rewrite the ledger's ensembles as AutoRecovery does once it has copied the ledger elsewhere."""
    current = bk.store.read_ledger(handle.ledger)
    bk.store.write_ledger(handle.ledger, dataclasses.replace(current.value, ensembles=fragments), current.version)


def test_only_closed_ledgers_absent_from_every_ensemble_are_deleted_as_over_replicated(bk_cluster):
    c, bk = bk_cluster(1, gcOverreplicatedLedgerWaitTime=1, **NO_TIMED_PASS)
    here, elsewhere = c.bookies[0].bookie_id, "127.0.0.1:9"
    handles = {name: write(bk, 20, name.encode()) for name in ("closed_moved", "open_moved", "closed_partly",
                                                               "closed_marked", "closed_here")}
    for name, handle in handles.items():
        if name != "open_moved":
            handle.close()
    for name in ("closed_moved", "open_moved", "closed_marked"):
        moved_elsewhere(bk, handles[name], ((0, (elsewhere,)),))
    moved_elsewhere(bk, handles["closed_partly"], ((0, (elsewhere,)), (10, (here,))))
    marker = layout.under_replicated_ledger_path(handles["closed_marked"].ledger.ledger_id)
    bk.store.write_node(marker, b"", None)
    client = bk.bookie_client(here)

    def stored() -> list[str]:
        return [name for name, handle in handles.items() if client.read_entry(handle.ledger, 19).status == status.EOK]

    assert stored() == list(handles)
    state = forced_pass(bk, here)
    assert state.ledgersDeleted == 1
    assert stored() == ["open_moved", "closed_partly", "closed_marked", "closed_here"]
    assert client.read_entry(handles["closed_moved"].ledger, 0).status == status.ENOLEDGER

    bk.store.delete_node(marker)  # replication done: the marker goes, and so does this copy
    assert forced_pass(bk, here).ledgersDeleted == 2
    assert stored() == ["open_moved", "closed_partly", "closed_here"]


def test_a_log_left_without_ledgers_map_and_corrupt_mid_records_is_skipped(bk_cluster):
    # The log being written when the bookie is SIGKILLed has no ledgers map: GC scans its records, and
    # a record size no record can have, in the middle of it, is corruption (not a torn tail).
    c, bk = bk_cluster(1, entryLogSizeLimit=1 << 20, flushInterval=100, **NO_TIMED_PASS)
    bookie = c.bookies[0]
    handle = write(bk, 50, b"e" * ENTRY)
    handle.close()
    current = os.path.join(bookie.ledger_dir, "current", "0.log")
    wait_for(lambda: os.path.getsize(current) >= LOG_HEADER_SIZE + 3 * ENTRY, "the entry log to reach the disk")
    c.kill_bookie(0, signal.SIGKILL)
    with open(current, "rb") as f:
        first = int.from_bytes(f.read(LOG_HEADER_SIZE + 4)[-4:], "big")
    damaged = overwrite(current, LOG_HEADER_SIZE + 4 + first, (0x7FFFFFFF).to_bytes(4, "big"))
    c.start_bookie(0)

    state = forced_pass(bk, bookie.bookie_id)

    assert [(k.path, k.entryLogId) for k in state.skipped] == [(current, 0)]
    assert "impossible record size 2147483647" in state.skipped[0].reason
    with open(current, "rb") as f:
        assert f.read() == damaged
    client = bk.bookie_client(bookie.bookie_id)  # the ledger is still here (entry 1's record is the damaged one)
    assert [client.read_entry(handle.ledger, e).status for e in (0, 49)] == [status.EOK, status.EOK]


def test_ledger_details_show_live_and_deleted_bytes_per_log_and_the_log_being_written(bk_cluster):
    """What the audit tables read from a bookie: each finished log's ledgers (live, and deleted ones whose bytes
    wait for compaction, with the pass that noticed them), the log being written, and the GC settings."""
    c, bk = bk_cluster(1, minorCompactionThreshold=0.0, majorCompactionThreshold=0.0, **NO_TIMED_PASS)
    bookie = c.bookies[0].bookie_id
    dead, live = write(bk, 20, b"d" * ENTRY), write(bk, 10, b"l" * ENTRY)
    for handle in (dead, live):
        handle.close()
    client = bk.bookie_client(bookie)
    current = client.garbage_collection(ledger_details=True).currentEntryLog
    held = {(lb.scopeId, lb.ledgerId): lb.bytes for lb in current.ledgers}
    assert held.keys() == {tuple(dead.ledger), tuple(live.ledger)} and all(n > 10 * ENTRY for n in held.values())
    assert current.totalSize > sum(held.values())  # the log's header too
    forced_pass(bk, bookie)  # no log is finished yet: nothing for GC to look at
    c.kill_bookie(0, signal.SIGTERM)  # a restart rolls the log: the ledgers' bytes are in a finished log now
    c.start_bookie(0)
    # Finished since the collector's last pass (it has not described that log yet): still listed, from its map.
    listed = {lb.ledgerId: lb.bytes for u in bk.bookie_client(bookie).garbage_collection(ledger_details=True).entryLogs
              for lb in u.ledgers}
    assert listed == {dead.ledger.ledger_id: held[tuple(dead.ledger)], live.ledger.ledger_id: held[tuple(live.ledger)]}
    bk.delete_ledger(dead.ledger)
    state = forced_pass(bk, c.bookies[0].bookie_id)
    details = bk.bookie_client(bookie).garbage_collection(ledger_details=True)
    assert (details.minorCompactionThreshold, details.majorCompactionThreshold, details.gcWaitTimeMs) == \
        (0.0, 0.0, NO_TIMED_PASS["gcWaitTime"])
    (log,) = [u for u in details.entryLogs if any(lb.ledgerId == live.ledger.ledger_id for lb in u.ledgers)]
    by_ledger = {lb.ledgerId: lb for lb in log.ledgers}
    assert by_ledger[live.ledger.ledger_id].deletedAtPass == 0
    assert by_ledger[dead.ledger.ledger_id].deletedAtPass == state.passes  # noticed by the pass just run
    assert by_ledger[live.ledger.ledger_id].bytes == held[tuple(live.ledger)]
    assert by_ledger[dead.ledger.ledger_id].bytes == held[tuple(dead.ledger)]
    assert log.remainingSize == by_ledger[live.ledger.ledger_id].bytes  # thresholds 0: nothing compacted
    assert all(not u.ledgers for u in bk.bookie_client(bookie).garbage_collection().entryLogs)  # only on request
