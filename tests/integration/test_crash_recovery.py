"""A bookie killed with SIGKILL loses no acknowledged entry (journal replay from LastLogMark)."""
from __future__ import annotations

import json
import queue
import random
import threading
import time

from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto.checksum import DigestManager
from bookie.server import Bookie, ServerConfiguration
from tests.helpers.engine_child import PASSWORD, payload_for
from tests.helpers.engine_ops import engine_settings
from tests.procs import child, kill

MODES = ["random", "after-fsync", "mid-roll", "mid-checkpoint"]


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line.split())
    lines.put(None)


def run_until_killed(settings: dict, ledger: LedgerId, mode: str, rng: random.Random) -> list[tuple[int, int]]:
    """Run the writer child until it dies (or we SIGKILL it); return the acknowledged id ranges."""
    acked = []
    spec = f"{ledger.scope_id}/{ledger.ledger_id}"
    with child("-m", "tests.helpers.engine_child", json.dumps(settings), spec, mode) as proc:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        deadline = time.monotonic() + 60
        # The parent kills at a random ack; modes that kill themselves get longer to do so first.
        kill_after_acks = rng.randint(1, 120) if mode == "random" else 400
        while time.monotonic() < deadline:
            try:
                words = lines.get(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if words is None:  # the child killed itself
                break
            if words[0] == "ACK":
                acked.append((int(words[1]), int(words[2])))
                if len(acked) >= kill_after_acks:
                    time.sleep(rng.random() * 0.01)  # land somewhere in the middle of the next batch
                    kill(proc)
                    break
        else:
            kill(proc)
            raise AssertionError(f"writer ({mode}) went quiet for 60 s: {proc.stderr.read()}")
        kill(proc)
        err = proc.stderr.read()
        assert "Traceback" not in err, err
    return acked


def verify(bookie: Bookie, ledger: LedgerId, acked_ids: set[int]) -> int:
    digest = DigestManager(ledger, PASSWORD)
    for eid in sorted(acked_ids):
        header, payload = digest.verify(bookie.read_entry(ledger, eid), eid)
        assert payload.tobytes() == payload_for(ledger, eid), f"entry {eid} differs after restart"
    last = bookie.storage.require(ledger).last_entry_id
    blob, count, _ = bookie.read_entries(ledger, 0, last, max_bytes=1 << 40)
    ids = [entry_format.parse_header(frame).entry_id for frame in entry_format.iter_frames(blob)]
    assert ids == sorted(set(ids)), "an entry appears twice or out of order in a range read"
    assert count == len(ids)
    assert acked_ids <= set(ids)
    return last


def test_sigkill_at_random_moments_loses_no_acknowledged_entry(tmp_path):
    settings = engine_settings(tmp_path, flushInterval=40, entryLogSizeLimit=48 * 1024, journalMaxSizeMB=1,
                               journalMaxBackups=1, pageSize=256, pageLimit=4, journalFlushWhenQueueEmpty=False,
                               journalMaxGroupWaitMSec=1)
    rng = random.Random(20261121)
    ledger = LedgerId(0, 42)
    acked_ids: set[int] = set()
    rounds = 24
    for round_no in range(rounds):
        mode = MODES[round_no % len(MODES)]
        for first, last in run_until_killed(settings, ledger, mode, rng):
            acked_ids.update(range(first, last + 1))
        if round_no % 2 == 1 or round_no == rounds - 1:
            # Every other round the next writer replays a crashed bookie itself, so crashes also
            # hit state that is only replayed, never checkpointed.
            bookie = Bookie(ServerConfiguration(settings)).start()
            try:
                verify(bookie, ledger, acked_ids)
            finally:
                bookie.shutdown()
    assert len(acked_ids) > 500, "the writers acknowledged too little for the test to mean anything"


def test_scoped_ledger_survives_sigkill(tmp_path):
    """A 128-bit (v2 entry format) ledger replays like a scope-0 one."""
    settings = engine_settings(tmp_path, flushInterval=3600000)
    ledger = LedgerId(7, 1 << 40)
    acked = run_until_killed(settings, ledger, "random", random.Random(5))
    ids = {i for first, last in acked for i in range(first, last + 1)}
    assert ids
    bookie = Bookie(ServerConfiguration(settings)).start()
    try:
        assert sum(r.records for r in bookie.replayed) > 0, "nothing was replayed: the test proves nothing"
        verify(bookie, ledger, ids)
    finally:
        bookie.shutdown()
