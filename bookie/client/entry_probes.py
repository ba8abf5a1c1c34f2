"""Whether bookies hold given entries, asked many at a time (for a check of many ledgers).

LedgerChecker asks each bookie for the first and last entry of its share of each fragment; checking every
ledger (the Auditor's check) is then a few single-entry reads per ledger, each a call of its own. Here the
probes of one bookie are queued and sent together, as one ReadEntriesOfLedgers call of one-entry ranges per
PROBE_BATCH of them: what the bookie sends back it holds, what it does not send it lacks, and a call that
fails answers every probe in it "no". A bookie without that call (BookKeeper's native protocol) gets a read
per probe, as before. Queued probes go out once a bookie has PROBE_BATCH of them, or on ``flush()``: a caller
that waits for probes flushes first. A probe answers through a callback (``done``), not a Future: a check of
10,000 ledgers makes 60,000 probes.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
from dataclasses import dataclass
from typing import Callable

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format, status
from bookie.proto.range_columns import RangeColumns

PROBE_BATCH = 1000  # one-entry ranges per call
PROBE_THREADS = 4  # calls in flight (each a blocking stream)


@dataclass(frozen=True)
class Probe:
    ledger: LedgerId
    entry_id: int
    answered: bool  # True: only whether the bookie answers at all (it stores nothing there)
    done: Callable[[bool], None]  # called with the answer (no Future per probe: a check makes tens of thousands)


def read_probe(client, ledger: LedgerId, entry_id: int, done: Callable[[bool], None], answered: bool = False) -> None:
    """One probe as a read of its own: ``done(whether client's bookie returns entry_id)`` (any failure,
    absence included: False); with ``answered``, ``done(whether it answers at all)``."""
    pending = client.read_entry_async(ledger, entry_id)
    pending.add_done_callback(lambda f: done(f.exception() is None and (answered or f.result().status == status.EOK)))


class EntryProbes:
    def __init__(self, bk):
        self.bk = bk
        self._queues: dict[str, list[Probe]] = {}
        self._lock = threading.Lock()
        self._pool = cf.ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="EntryProbes")

    def probe(self, bookie: str, ledger: LedgerId, entry_id: int, done: Callable[[bool], None],
              answered: bool = False) -> None:
        """``done(whether bookie holds entry_id)`` (any failure: False), once the bookie has answered; with
        ``answered``, ``done(whether it answers at all)``."""
        try:
            client = self.bk.bookie_client(bookie)
        except Exception:  # noqa: BLE001 - an unreachable bookie is a bad one, whatever the error
            done(False)
            return
        if not isinstance(client, BookieClient):
            read_probe(client, ledger, entry_id, done, answered)
            return
        with self._lock:
            queue = self._queues.setdefault(bookie, [])
            queue.append(Probe(ledger, entry_id, answered, done))
            full = self._queues.pop(bookie) if len(queue) >= PROBE_BATCH else None
        if full:
            self._pool.submit(self._send, client, full)

    def flush(self) -> None:
        """Send every queued probe now."""
        with self._lock:
            queues, self._queues = self._queues, {}
        for bookie, probes in queues.items():
            self._pool.submit(self._send, self.bk.bookie_client(bookie), probes)

    def close(self) -> None:
        self.flush()
        self._pool.shutdown(wait=True)

    @staticmethod
    def _send(client: BookieClient, probes: list[Probe]) -> None:
        entry_ids = [p.entry_id for p in probes]
        ranges = RangeColumns.of([p.ledger.scope_id for p in probes], [p.ledger.ledger_id for p in probes], entry_ids,
                                 entry_ids)
        held: set[tuple[int, int, int]] = set()
        answered = False
        try:
            for message in client.read_entries_of_ledgers(ranges):
                if message.status != status.EOK:
                    break
                for entry in entry_format.iter_frames(message.entries):
                    held.add(entry_format.peek_ids(entry, 0)[:3])
            else:
                answered = True
        except Exception:  # noqa: BLE001 - a bookie that fails the call fails every probe in it
            pass
        for p in probes:
            p.done(answered and (p.answered or (p.ledger.scope_id, p.ledger.ledger_id, p.entry_id) in held))
