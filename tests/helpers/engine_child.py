"""A process that appends entries through the storage engine, for crash tests.

    python -m tests.helpers.engine_child CONF_JSON LEDGER MODE [OPS...]

It continues the ledger after the last entry the bookie has, appends framed batches of entries
whose payloads are a pure function of (ledger, entry id) (see ``payload_for``), and prints
``ACK <first> <last>`` once each batch is acknowledged (fsynced). The parent SIGKILLs it.

MODE selects where the process kills itself with SIGKILL, to hit the windows that matter:
``random`` (never; the parent kills it), ``after-fsync`` (right after a journal fsync, before any
checkpoint covers it), ``mid-roll`` (while an entry log is being finished), ``mid-checkpoint``
(entry logs flushed, index and LastLogMark not yet).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sys

from bookie.exceptions import NoLedgerException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import Bookie, ServerConfiguration
from bookie.server.entry_logger import EntryLogger
from bookie.server.journal import Journal
from bookie.server.ledger_cache import LedgerCache

PASSWORD = b"crash"


def payload_for(ledger: LedgerId, entry_id: int) -> bytes:
    seed = hashlib.sha256(f"{ledger.scope_id}/{ledger.ledger_id}/{entry_id}".encode()).digest()
    return (seed * (1 + seed[0] * 8 // 32))[: 16 + seed[1] * 4]


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(mode: str, rng: random.Random) -> None:
    if mode == "after-fsync":
        original = Journal._flush
        countdown = [rng.randint(3, 40)]

        def flush_then_maybe_die(self, *group_and_its_stats):
            original(self, *group_and_its_stats)
            countdown[0] -= 1
            if countdown[0] == 0:
                die()  # fsynced (maybe acknowledged) but no checkpoint has covered it
        Journal._flush = flush_then_maybe_die
    elif mode == "mid-roll":
        original_map = EntryLogger._write_ledgers_map

        def map_and_die(self):
            self._write_buffer()
            self._chunks.append(b"\0" * 100)  # half a ledgers map, then the lights go out
            self._chunk_starts.append(self.position)
            self._write_buffer()
            die()
        EntryLogger._write_ledgers_map = map_and_die if rng.random() < 0.7 else original_map
    elif mode == "mid-checkpoint":
        original_flush = LedgerCache.flush
        countdown = [rng.randint(1, 4)]

        def flush_and_die(self, headers=None):
            countdown[0] -= 1
            if countdown[0] == 0:
                self._before_write()  # entry logs are on disk, the index and the mark are not
                die()
            return original_flush(self, headers)
        LedgerCache.flush = flush_and_die


def main() -> None:
    conf = ServerConfiguration(json.loads(sys.argv[1]))
    ledger = LedgerId(*map(int, sys.argv[2].split("/")))
    mode = sys.argv[3]
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    arm(mode, rng)
    bookie = Bookie(conf).start()
    try:
        next_id = bookie.storage.require(ledger).last_entry_id + 1
    except NoLedgerException:
        next_id = 0
    digest = DigestManager(ledger, PASSWORD)
    key = generate_master_key(PASSWORD)
    length = 0
    print(f"START {next_id}", flush=True)
    in_flight = []
    while True:
        n = rng.randint(1, 64)
        ids = range(next_id, next_id + n)
        blob, length = digest.build_framed(next_id, next_id - 1, length, [payload_for(ledger, i) for i in ids])
        in_flight.append((next_id, next_id + n - 1, bookie.add_entries(ledger, key, blob)))
        next_id += n
        while in_flight and (len(in_flight) > 4 or in_flight[0][2].done()):
            first, last, future = in_flight.pop(0)
            future.result()
            print(f"ACK {first} {last}", flush=True)


if __name__ == "__main__":
    main()
