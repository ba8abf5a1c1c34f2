"""Append entries through the client as fast as it goes, reporting progress, until SIGKILLed.

    python -m tests.helpers.client_writer URI COUNT

Prints ``LEDGER <id> <bookie,bookie,...>``, then ``ACK <n>`` as acknowledgements come in (entries 0..n
are acknowledged: completions are in order), then ``DONE`` and waits.
"""
from __future__ import annotations

import sys
import threading
import time

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from tests.helpers.engine_child import payload_for

WINDOW = 2000


def main() -> None:
    uri, count = sys.argv[1], int(sys.argv[2])
    bk = BookKeeper(uri, addEntryTimeout=3.0)
    lh = bk.create_ledger(3, 2, 2, password=b"stress")
    print(f"LEDGER {lh.ledger_id} {','.join(lh.ensemble)}", flush=True)
    ledger = LedgerId(0, lh.ledger_id)
    acked = [-1]
    room = threading.Semaphore(WINDOW)

    def on_done(future):
        room.release()
        if future.exception() is None:
            acked[0] = max(acked[0], future.result())

    def report():
        last = -1
        while True:
            if acked[0] != last:
                last = acked[0]
                print(f"ACK {last}", flush=True)
            time.sleep(0.02)

    threading.Thread(target=report, daemon=True).start()
    for i in range(count):
        room.acquire()
        lh.append_async(payload_for(ledger, i)).add_done_callback(on_done)
    lh.drain()
    time.sleep(0.1)
    print("DONE", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
