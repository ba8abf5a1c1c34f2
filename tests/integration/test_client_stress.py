"""Stress: a writer with many appends in flight, a bookie SIGKILLed and restarted under it, the writer
SIGKILLed, two recoveries at once. Every acknowledged entry survives byte-identical, no gaps, and the
recoveries agree."""
from __future__ import annotations

import queue
import signal
import threading
import time

from bookie.ledger_id import LedgerId
from bookie.meta.zk_metadata_store import ZKMetadataStore
from tests.procs import child, kill

COUNT = 20_000


def _lines(stream, out: queue.Queue) -> None:
    for line in stream:
        out.put(line.split())
    out.put(None)


def test_bookie_and_writer_crash_under_load_then_two_recoveries_agree(cluster):
    c = cluster(4, zkTimeout=2000)
    acked, ledger_id = -1, None
    with child("-m", "tests.helpers.client_writer", c.metadata_service_uri, str(COUNT)) as writer:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(writer.stdout, lines), daemon=True).start()
        killed = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            words = lines.get(timeout=60)
            assert words is not None, f"writer died: {writer.stderr.read()}"
            if words[0] == "LEDGER":
                ledger_id, ensemble = int(words[1]), words[2].split(",")
            elif words[0] == "ACK":
                acked = int(words[1])
                if killed is None and acked >= 3000:
                    killed = next(b.index for b in c.bookies if b.bookie_id == ensemble[1])
                    c.kill_bookie(killed, signal.SIGKILL)
                    restart = threading.Thread(target=c.start_bookie, args=(killed,))
                    restart.start()
                if acked >= 12_000:
                    break
            elif words[0] == "DONE":
                break
        kill(writer)  # SIGKILL with appends in flight
        restart.join(60)
        while not lines.empty():  # acknowledgements printed before the kill still count
            words = lines.get_nowait()
            if words and words[0] == "ACK":
                acked = max(acked, int(words[1]))
    assert acked >= 12_000, "the writer made too little progress for the test to mean anything"

    recoveries = [child("-m", "tests.helpers.client_recover", c.metadata_service_uri, str(ledger_id)) for _ in range(2)]
    procs = [r.__enter__() for r in recoveries]
    try:
        results = [p.communicate(timeout=180) for p in procs]
    finally:
        for r in recoveries:
            r.__exit__(None, None, None)
    lasts = []
    for out, err in results:
        assert out.startswith("LAST"), err
        words = out.split()
        lasts.append(int(words[1]))
        assert words[3] == "0", f"entries differ after recovery: {out}"
    assert lasts[0] == lasts[1], f"the two recoveries disagree: {lasts}"
    assert lasts[0] >= acked, f"recovery lost acknowledged entries: last {lasts[0]} < acknowledged {acked}"
    with ZKMetadataStore(c.metadata_service_uri) as store:
        md = store.read_ledger(LedgerId(0, ledger_id)).value
    assert md.is_closed and md.last_entry_id == lasts[0]
    assert len(md.ensembles) >= 2, "the killed bookie never made the writer change its ensemble"
