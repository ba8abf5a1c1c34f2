"""The writer's guarantees on every append path under load (issue 15): ``append_async`` (one future per
call), ``append_batch`` and ``append``.

- Futures complete in entry order and the ids have no gaps; what was acknowledged reads back.
- Nothing is acknowledged before AQ bookies have it (E=3 WQ=3 AQ=3, one bookie held by SIGSTOP while
  appends are in flight: nothing it did not acknowledge completes until SIGCONT).
- Back-pressure: a producer trying a million ``append_async`` calls against held bookies blocks at
  ``maxPendingAdds`` entries pending (``LedgerHandle.pending_adds``).

Real ZooKeeper and bookie processes; bookies are held by SIGSTOP of their process group (by PID) and
always resumed, also on failure.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager

import pytest

from bookie.client import BookKeeper
from bookie.proto import status
from tests.helpers.waiting import DEADLINE, wait_for

PW = b"pw"
PATHS = ("append_async", "append_batch", "append")
APPEND_THREADS = 16  # blocking appends in flight at once on the ``append`` path


def payload(i: int) -> bytes:
    return b"%d:" % i + bytes([i % 251]) * (i % 700)


@contextmanager
def held(c, indexes):
    """Bookies ``indexes`` stopped (SIGSTOP to their process group) until the block ends; waits until
    the kernel reports each stopped, so nothing sent from then on is answered."""
    pids = [c.bookies[i].proc.pid for i in indexes]
    try:
        for pid in pids:
            os.killpg(pid, signal.SIGSTOP)
        for pid in pids:
            wait_for(lambda pid=pid: process_state(pid) == "T", f"bookie process {pid} to stop")
        yield
    finally:
        for pid in pids:
            os.killpg(pid, signal.SIGCONT)


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


class Writer:
    """Appends entries ``payload(i)`` by one path and records, in the order futures complete, the ids
    they complete with (callbacks run in completion order; see test_futures_complete_in_entry_order)."""

    def __init__(self, lh, path: str):
        self.lh, self.path = lh, path
        self.completed: list[int] = []  # entry ids, in the order their futures completed
        self.futures = []  # (first id, last id, future) per call of append_async / append_batch
        self.errors: list[BaseException] = []
        self.next = 0  # entries issued so far
        self.appended: dict[int, bytes] = {}  # ``append`` path: entry id -> its payload
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def _record(self, future) -> None:
        result = future.result()
        self.completed.extend(result if isinstance(result, range) else [result])

    def write(self, count: int, batch_sizes=(1, 7, 256, 40, 3)) -> None:
        """Issue ``count`` more entries without waiting for them (``append``: threads that each block)."""
        if self.path == "append":
            self._write_blocking(count)
            return
        end = self.next + count
        k = 0
        while self.next < end:
            if self.path == "append_async":
                ids = [self.next]
                future = self.lh.append_async(payload(self.next))
            else:
                n = min(batch_sizes[k % len(batch_sizes)], end - self.next)
                ids = range(self.next, self.next + n)
                future = self.lh.append_batch([payload(i) for i in ids])
                k += 1
            self.futures.append((ids[0], ids[-1], future))
            future.add_done_callback(self._record)
            self.next = ids[-1] + 1

    def _write_blocking(self, count: int) -> None:
        """Threads that each call ``append`` (blocking) in a loop; ids are known only once it returns, so
        each payload is a unique tag and ``appended`` maps the id returned to it."""
        quota = [count]

        def run(thread: int) -> None:
            k = 0
            while not self._stop.is_set():
                with self._lock:
                    if quota[0] == 0:
                        return
                    quota[0] -= 1
                    self.next += 1
                data = b"t%d-%d" % (thread, k)
                k += 1
                try:
                    entry_id = self.lh.append(data)
                except BaseException as exc:
                    self.errors.append(exc)
                    return
                with self._lock:
                    self.appended[entry_id] = data
                    self.completed.append(entry_id)

        for _ in range(APPEND_THREADS):
            thread = threading.Thread(target=run, args=(len(self._threads),), daemon=True)
            thread.start()
            self._threads.append(thread)

    def expected(self, entry_id: int) -> bytes:
        return self.appended[entry_id] if self.path == "append" else payload(entry_id)

    def wait_all(self) -> None:
        wait_for(lambda: len(self.completed) == self.next or self.errors, f"{self.next} appends to complete")
        for thread in self._threads:
            thread.join(DEADLINE)
        self._threads = []
        assert not self.errors, self.errors[0]


def check_read_back(bk, lh, writer: Writer) -> None:
    """The ledger, closed, holds exactly the entries issued, 0..count-1, each with its payload."""
    count = writer.next
    lh.close()
    md = bk.ledger_metadata(lh.ledger_id)
    assert md.last_entry_id == count - 1
    rh = bk.open_ledger(lh.ledger_id, password=PW)
    entries = rh.read(0, count - 1)
    assert [e.entry_id for e in entries] == list(range(count))
    bad = [e.entry_id for e in entries if e.payload != writer.expected(e.entry_id)]
    assert not bad, f"entries {bad[:5]} read back differ from what was appended"


@pytest.mark.parametrize("quorum", [(3, 3, 2), (3, 2, 2)], ids=["E3-WQ3-AQ2", "striped-E3-WQ2-AQ2"])
@pytest.mark.parametrize("path", PATHS)
def test_futures_complete_in_entry_order_without_gaps(shared_cluster, path, quorum):
    """20,000 entries issued without waiting (all in flight at once on the future paths; 5,000 by 16
    threads on ``append``): ids 0..19,999 without a gap, futures completing in id order, everything reads back.

    Order is observable through callbacks: a future's callback runs when it completes (on the client's
    completion thread), or at once in the appending thread if it completed before the callback was
    added, which still follows the completion of every earlier id."""
    with BookKeeper(shared_cluster.metadata_service_uri) as bk:
        lh = bk.create_ledger(*quorum, password=PW)
        writer = Writer(lh, path)
        count = 5000 if path == "append" else 20_000  # ``append``: 16 threads, one entry in flight each
        writer.write(count)
        writer.wait_all()
        if path == "append":  # ids returned have no gap or duplicate
            assert sorted(writer.completed) == list(range(count))
        else:
            assert writer.completed == list(range(count)), "futures completed out of entry order"
        assert [first for first, _, _ in writer.futures] == sorted(first for first, _, _ in writer.futures)
        check_read_back(bk, lh, writer)


@pytest.mark.parametrize("path", PATHS)
def test_nothing_completes_that_a_stopped_bookie_did_not_acknowledge(bk_cluster, path):
    """E=3 WQ=3 AQ=3 on exactly three bookies (no replacement), addEntryTimeout long: one bookie is
    held by SIGSTOP while appends are in flight. Once the other two have acknowledged every entry
    issued, nothing issued after the stop (which the held bookie cannot have) is acknowledged: the LAC
    stays below it and no such future is done. After SIGCONT everything completes, in order."""
    c, bk = bk_cluster(3, client_conf={"addEntryTimeout": 600.0})
    lh = bk.create_ledger(3, 3, 3, password=PW)
    acked = {bookie: 0 for bookie in lh.ensemble}  # entries each bookie acknowledged, as the handle saw them
    batch_done = lh._batch_done

    def spy(batch, future):  # runs on the bookie's add-stream thread, after the handle took the answer
        batch_done(batch, future)
        if future.exception() is None and future.result().status == status.EOK:
            acked[batch.bookie] += sum(op.count for op in batch.ops)

    lh._batch_done = spy
    writer = Writer(lh, path)
    writer.write(300)
    writer.wait_all()
    held_index = next(b.index for b in c.bookies if b.bookie_id == lh.ensemble[1])
    others = [lh.ensemble[0], lh.ensemble[2]]
    writer.write(4000)  # in flight while the bookie stops
    with held(c, [held_index]):
        stopped_at = lh.last_add_pushed + 1  # entries from here on were sent after the bookie stopped
        writer.write(4000)
        wait_for(lambda: all(acked[b] >= lh.last_add_pushed + 1 for b in others),
                 "the two running bookies to acknowledge every entry issued")
        issued = lh.last_add_pushed + 1
        assert issued > stopped_at
        assert lh.last_add_confirmed < stopped_at, (
            f"entries up to {lh.last_add_confirmed} acknowledged, but {stopped_at}.. never reached the held bookie")
        early = [(first, last) for first, last, future in list(writer.futures) if last >= stopped_at and future.done()]
        assert not early, f"futures of entries {early[:3]} completed without the held bookie"
        assert not [i for i in list(writer.completed) if i >= stopped_at]
    writer.wait_all()
    if path != "append":
        assert writer.completed == list(range(writer.next))
    check_read_back(bk, lh, writer)


def blocked_in_append(thread: threading.Thread) -> bool:
    """Whether ``thread`` is waiting inside ``LedgerHandle.append_async`` (for room: back-pressure)."""
    frame = sys._current_frames().get(thread.ident)
    waiting = False
    while frame is not None:
        name = frame.f_code.co_name
        if name == "wait" and frame.f_code.co_filename.endswith("threading.py"):
            waiting = True
        if name == "append_async":
            return waiting
        frame = frame.f_back
    return False


def test_a_fast_producer_blocks_at_max_pending_adds(bk_cluster):
    """A producer trying a million 1 KiB ``append_async`` calls while every bookie is held blocks once
    ``maxPendingAdds`` entries are pending: exactly that many calls returned, ``pending_adds`` equals the
    bound, and no call ever saw more pending. Resumed bookies acknowledge them all, in order."""
    limit = 5000
    c, bk = bk_cluster(3, client_conf={"maxPendingAdds": limit, "addEntryTimeout": 600.0})
    lh = bk.create_ledger(3, 3, 2, password=PW)
    lh.append(b"connected")
    data = os.urandom(1024)
    futures, most_pending, stop = [], [0], threading.Event()

    def produce() -> None:
        for _ in range(1_000_000):
            if stop.is_set():
                return
            futures.append(lh.append_async(data))
            most_pending[0] = max(most_pending[0], lh.pending_adds)
            if most_pending[0] > limit:
                return  # no back-pressure: stop before a gigabyte piles up

    producer = threading.Thread(target=produce, daemon=True)
    with held(c, range(3)):
        producer.start()
        wait_for(lambda: blocked_in_append(producer) or not producer.is_alive(),
                 "the producer to block in append_async")
        assert producer.is_alive() and blocked_in_append(producer)
        assert len(futures) == limit and lh.pending_adds == limit and most_pending[0] == limit
        assert not any(f.done() for f in futures)
        stop.set()  # it returns after the call it is blocked in
    producer.join(DEADLINE)
    assert not producer.is_alive()
    lh.drain(DEADLINE)
    assert [f.result() for f in futures] == list(range(1, len(futures) + 1))
    assert lh.pending_adds == 0
