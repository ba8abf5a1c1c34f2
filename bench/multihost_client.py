"""The client side of bench/multihost.py, run on a host (or on loopback for the baseline).

    python bench/multihost_client.py URI throughput SECONDS     -> {"rate", "p50", "p99"} of pipelined appends
    python bench/multihost_client.py URI stall ADD_TIMEOUT      -> {"change_s", "gap_s", "acked"}

``stall``: appends one at a time to E=3 WQ=3 AQ=3, prints ``READY <bookie,...>`` once entries flow, then waits
for a line on stdin (the driver cuts one ensemble bookie off and writes the time it did); it reports how long
after that the writer's ensemble changed and its longest wait for an acknowledgement.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

from bookie.client import BookKeeper
from bookie.client import benchmark

DEADLINE = 120.0  # seconds any phase of the stall run may take before it is reported as failed


def throughput(uri: str, seconds: float) -> dict:
    with BookKeeper(uri) as bk:
        result = benchmark.write_throughput(bk, seconds, 1024, 3, 3, 2, in_flight=2000)
    return {"rate": result.rate, "p50": result.percentile(50), "p99": result.percentile(99)}


def stall(uri: str, add_timeout: float) -> dict:
    with BookKeeper(uri, {"addEntryTimeout": add_timeout}) as bk:
        handle = bk.create_ledger(3, 3, 3, password=b"bench")
        first = tuple(handle.ensemble)
        acks: list[float] = []
        stop = threading.Event()

        def append() -> None:
            payload = os.urandom(1024)
            while not stop.is_set():
                handle.append(payload)  # a failure ends the thread: wait() below reports it
                acks.append(time.monotonic())

        def wait(condition, what: str) -> None:
            deadline = time.monotonic() + DEADLINE
            while not condition():
                if time.monotonic() > deadline or not writer.is_alive():
                    raise RuntimeError(f"{what}: not within {DEADLINE:.0f} s (writer error: {handle.error})")
                time.sleep(0.001)  # a benchmark's own pacing, not a test

        writer = threading.Thread(target=append, daemon=True)
        writer.start()
        wait(lambda: len(acks) >= 100, "the first 100 acknowledgements")
        print("READY " + ",".join(first), flush=True)
        sys.stdin.readline()
        cut = time.monotonic()
        wait(lambda: tuple(handle.ensemble) != first, "the ensemble change")
        changed = time.monotonic() - cut
        count = len(acks)
        wait(lambda: len(acks) >= count + 100, "100 acknowledgements after the change")
        stop.set()
        writer.join()
        after = [t for t in acks if t >= cut]
        gap = max(b - a for a, b in zip([cut] + after, after))
        handle.close()
    return {"change_s": changed, "gap_s": gap, "acked": len(acks)}


if __name__ == "__main__":
    uri, what, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
    print(json.dumps(throughput(uri, value) if what == "throughput" else stall(uri, value)), flush=True)
