"""Compaction end to end with real bookie processes (TransactionalEntryLogCompactor in the GC pass):
reads and writes go on while a compaction is held at its steps, a SIGKILL at every step leaves every
live entry once and byte-identical, and a corrupt record makes compaction skip that log, not stop.

Passes run only when forced (gcWaitTime an hour), logs roll at 256 KiB, the major threshold takes
half-empty logs, and the throttle is out of the way. The bookie's test seams (bookie/server/compactor.py):
BK_COMPACTION_STOP_AT=<step> SIGSTOPs the process at that step; BK_COMPACTION_HOLD_FILE=<path> holds the
compactor thread at the step the file names, the process still serving requests.
"""
from __future__ import annotations

import os
import signal
import threading
from collections import Counter

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import entry_format, status
from bookie.server.compactor import COMPACTED_SUFFIX, COMPACTING_SUFFIX, HOLD_FILE_ENV, STEPS, STOP_AT_ENV
from bookie.server.entry_log_format import scan_entry_log
from tests.helpers.waiting import DEADLINE, wait_for

SETTINGS = {"entryLogSizeLimit": 256 << 10, "gcWaitTime": 3_600_000, "majorCompactionThreshold": 0.8,
            "compactionRateByEntries": 10 ** 9}
PASSWORD = b"pw"
ENTRY_SIZE = 1000


def payload(ledger_id: int, entry_id: int) -> bytes:
    """What entry ``entry_id`` of ledger ``ledger_id`` holds: checkable byte for byte from its ids."""
    seed = b"%d/%d|" % (ledger_id, entry_id)
    return (seed * (ENTRY_SIZE // len(seed) + 1))[:ENTRY_SIZE]


def write_interleaved(bk, count: int, entries: int, batch: int = 50) -> list[int]:
    """``count`` closed ledgers of ``entries`` entries each, written batch by batch in turn, so that every
    entry log holds some of each."""
    handles = [bk.create_ledger(1, 1, 1, password=PASSWORD) for _ in range(count)]
    for start in range(0, entries, batch):
        ids = range(start, min(start + batch, entries))
        pending = [lh.append_batch([payload(lh.ledger_id, e) for e in ids]) for lh in handles]
        for future in pending:
            future.result(DEADLINE)
    for lh in handles:
        lh.close()
    return [lh.ledger_id for lh in handles]


def check_ledger(bk, ledger_id: int, entries: int) -> None:
    """Every entry of the ledger read once, in order, byte-identical."""
    got = bk.open_ledger(ledger_id, PASSWORD).read(0, entries - 1)
    assert [e.entry_id for e in got] == list(range(entries)), f"ledger {ledger_id}"
    bad = [e.entry_id for e in got if e.payload != payload(ledger_id, e.entry_id)]
    assert not bad, f"ledger {ledger_id}: entries {bad[:10]} differ from what was written"


def current_dir(bookie) -> str:
    return os.path.join(bookie.ledger_dir, "current")


def compaction_files(bookie) -> list[str]:
    return sorted(n for n in os.listdir(current_dir(bookie)) if n.endswith((COMPACTING_SUFFIX, COMPACTED_SUFFIX)))


def allocated(directory: str) -> int:
    """Bytes the directory's files take on disk (``du``), not their lengths."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(directory) for f in files)


def process_state(pid: int) -> str:
    """The state letter of /proc/<pid>/stat ('T': stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0]


def force_major_pass(bk, bookie_id: str) -> int:
    answer = bk.bookie_client(bookie_id).garbage_collection(pb.GarbageCollectionRequest.FORCE, major=True)
    assert answer.status == status.EOK, answer.message
    return answer.forcedPass


def wait_for_pass(bk, bookie_id: str, target: int) -> pb.GarbageCollectionResponse:
    wait_for(lambda: bk.bookie_client(bookie_id).garbage_collection().passes >= target, f"GC pass {target}")
    return bk.bookie_client(bookie_id).garbage_collection()


def delete(bk, ledger_ids) -> None:
    for lid in ledger_ids:
        bk.delete_ledger(lid)


class Traffic:
    """A writer adding closed ledgers and a reader checking every live entry in a loop, in threads."""

    def __init__(self, bk, live: dict[int, int]):
        self.bk = bk
        self.live = dict(live)  # ledger id -> entries
        self.loops = 0  # full read loops finished
        self.written = 0  # ledgers the writer closed
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(f,), daemon=True) for f in (self._read, self._write)]

    def __enter__(self) -> "Traffic":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(DEADLINE)

    def _run(self, step) -> None:
        try:
            while not self._stop.is_set():
                step()
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def _read(self) -> None:
        with self._lock:
            ledgers = list(self.live.items())
        for lid, entries in ledgers:
            check_ledger(self.bk, lid, entries)
        with self._lock:
            self.loops += 1

    def _write(self) -> None:
        (lid,) = write_interleaved(self.bk, 1, 100)
        with self._lock:
            self.live[lid] = 100
            self.written += 1

    def wait_more(self, loops: int, written: int, what: str) -> None:
        """Wait until ``loops`` more read loops began and finished and ``written`` more ledgers were closed."""
        with self._lock:  # a loop already running may have read before now: one more to be sure
            want_loops, want_written = self.loops + loops + 1, self.written + written + 1

        def done() -> bool:
            if self.errors:
                raise AssertionError(f"traffic failed: {self.errors[0]!r}") from self.errors[0]
            with self._lock:
                return self.loops >= want_loops and self.written >= want_written
        wait_for(done, what)


def test_reads_and_writes_go_on_while_compaction_holds_at_its_steps(bk_cluster, tmp_path, monkeypatch):
    hold = tmp_path / "hold"
    monkeypatch.setenv(HOLD_FILE_ENV, str(hold))  # the bookie processes inherit it
    c, bk = bk_cluster(1, **SETTINGS)
    bookie = c.bookies[0]
    ids = write_interleaved(bk, 6, 400)  # 2.4 MB over ~10 logs
    delete(bk, ids[::2])  # every finished log about half empty
    at = tmp_path / "hold.at"
    with Traffic(bk, {lid: 400 for lid in ids[1::2]}) as traffic:
        traffic.wait_more(1, 1, "the traffic to start")
        hold.write_text("compacted")
        target = force_major_pass(bk, bookie.bookie_id)
        # Held at the commit point of the first log: its copy <N>.log.<O>.compacted is durable, the index
        # still points into O. Two whole read loops and a written ledger while it stands there.
        wait_for(lambda: at.exists() and at.read_text() == "compacted", "compaction to reach its commit point")
        (compacted,) = compaction_files(bookie)
        old_log = compacted.split(".")[2] + ".log"
        assert os.path.exists(os.path.join(current_dir(bookie), old_log))
        traffic.wait_more(2, 1, "reads and writes at the commit point")
        # Held after the old log's deletion: reads find the entries in the new log, not yet renamed.
        hold.write_text("old_log_deleted")
        wait_for(lambda: at.read_text() == "old_log_deleted", "compaction to delete the old log")
        # The next log's copy may be under way meanwhile: the old log's deletion and the final rename
        # run on the compactor's finisher thread, overlapping it.
        files = compaction_files(bookie)
        assert compacted in files and len(files) <= 2, files
        assert not os.path.exists(os.path.join(current_dir(bookie), old_log))
        traffic.wait_more(2, 1, "reads and writes after the deletion")
        hold.write_text("go")
        after = wait_for_pass(bk, bookie.bookie_id, target)
        traffic.wait_more(1, 0, "a read loop after the pass")
    assert not traffic.errors, traffic.errors
    assert after.majorCompactionCount >= 2 and after.bytesReclaimed > 0 and not after.skipped
    assert compaction_files(bookie) == []
    for lid, entries in traffic.live.items():
        check_ledger(bk, lid, entries)


def test_sigkill_at_every_compaction_step_over_rounds(bk_cluster):
    c, bk = bk_cluster(1, **SETTINGS)
    bookie = c.bookies[0]
    live: dict[int, int] = {}
    dead: list[int] = []
    for round_ in range(2):
        for step in STEPS:
            c.kill_bookie(0, signal.SIGTERM)
            c.start_bookie(0, env={STOP_AT_ENV: step})
            # The client learns of the restarted bookie through its watch on the registrations: creating a
            # ledger before that finds no writable bookie (a race this test lost once).
            wait_for(lambda: bookie.bookie_id in bk.writable_bookies(), "the client to see the bookie writable")
            ids = write_interleaved(bk, 4, 200)
            delete(bk, ids[::2])
            live.update((lid, 200) for lid in ids[1::2])
            dead += ids[::2]
            before = allocated(bookie.ledger_dir)
            force_major_pass(bk, bookie.bookie_id)
            pid = bookie.proc.pid
            wait_for(lambda: process_state(pid) == "T", f"the bookie to stop at step {step}")
            c.kill_bookie(0, signal.SIGKILL)

            c.start_bookie(0)  # no seam: recovery at start finishes or rolls back the compaction
            where = f"round {round_}, SIGKILL at {step}"
            assert compaction_files(bookie) == [], where
            for lid, entries in live.items():
                check_ledger(bk, lid, entries)
            assert_deleted(bookie, dead)
            after = wait_for_pass(bk, bookie.bookie_id, force_major_pass(bk, bookie.bookie_id))
            assert not after.skipped, where
            assert compaction_files(bookie) == [], where
            assert allocated(bookie.ledger_dir) < before, f"{where}: no space came back"
    c.kill_bookie(0, signal.SIGTERM)
    assert_each_live_record_once(bookie, live)


def assert_deleted(bookie, dead: list[int]) -> None:
    client = BookieClient(bookie.bookie_id, address=bookie.grpc_address)
    try:
        for lid in dead:
            assert client.read_entry(LedgerId(0, lid), 0).status == status.ENOLEDGER, f"ledger {lid} came back"
    finally:
        client.close()


def assert_each_live_record_once(bookie, live: dict[int, int]) -> None:
    """On disk, with the bookie stopped: every live entry has exactly one record over all entry logs."""
    seen: Counter = Counter()
    for name in os.listdir(current_dir(bookie)):
        if name.endswith(".log"):
            for _, record in scan_entry_log(os.path.join(current_dir(bookie), name)):
                _, lid, eid, _ = entry_format.peek_ids(record, 0)
                if lid in live:
                    seen[lid, eid] += 1
    assert {key for key, n in seen.items() if n > 1} == set()
    assert set(seen) == {(lid, e) for lid, entries in live.items() for e in range(entries)}


def test_a_corrupt_record_makes_compaction_skip_that_log_only(bk_cluster):
    c, bk = bk_cluster(1, **SETTINGS)
    bookie = c.bookies[0]
    ids = write_interleaved(bk, 6, 400)
    delete(bk, ids[::2])
    live = set(ids[1::2])
    logs = sorted((n for n in os.listdir(current_dir(bookie)) if n.endswith(".log")), key=lambda n: int(n[:-4], 16))
    corrupt = os.path.join(current_dir(bookie), logs[0])  # finished (the bookie writes the last one)
    offset, lid, eid = next((off, lid, eid) for off, rec in scan_entry_log(corrupt)
                            for _, lid, eid, _ in [entry_format.peek_ids(rec, 0)] if lid in live)
    with open(corrupt, "r+b") as f:  # the record's entry id, as a bad disk would change it
        f.seek(offset + 8)
        f.write(b"\xff" * 8)
    size = os.path.getsize(corrupt)

    after = wait_for_pass(bk, bookie.bookie_id, force_major_pass(bk, bookie.bookie_id))
    (skipped,) = after.skipped
    assert skipped.entryLogId == int(logs[0][:-4], 16) and skipped.path == corrupt
    assert f"is not ledger {LedgerId(0, lid)} entry {eid}" in skipped.reason
    assert after.majorCompactionCount >= 1 and after.bytesReclaimed > 0  # the other logs were compacted
    assert os.path.getsize(corrupt) == size
    assert not any(os.path.exists(os.path.join(current_dir(bookie), n)) for n in logs[1:-1])
    for other in live - {lid}:
        check_ledger(bk, other, 400)
    entries = bk.open_ledger(lid, PASSWORD).read(eid + 1, 399)  # past the corrupt record: all there
    assert [e.payload for e in entries] == [payload(lid, e) for e in range(eid + 1, 400)]
