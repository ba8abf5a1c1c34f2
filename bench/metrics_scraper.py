"""What a bookie with metrics and the HTTP admin server costs, measured against one without: the two settings
the benches compare, and a scraper that asks each bookie's /metrics as Prometheus would (every second here,
fifteen times as often as Prometheus' default), so the cost includes serving the scrapes."""
from __future__ import annotations

import contextlib
import threading
import urllib.request

# enableStatistics=false records nothing (NULL_STATS_LOGGER) and httpServerEnabled=false serves nothing.
METRICS_OFF = {"enableStatistics": False, "httpServerEnabled": False}
METRICS_ON = {"enableStatistics": True, "httpServerEnabled": True, "httpServerPort": 0}
SCRAPE_INTERVAL = 1.0  # seconds


@contextlib.contextmanager
def scraped(addresses: list[str], interval: float = SCRAPE_INTERVAL):
    """Scrape ``http://<address>/metrics`` of each address every ``interval`` seconds until the block ends;
    yields a list whose length is the number of scrapes done (a scrape that fails raises at the end)."""
    done: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(interval):
            for address in addresses:
                try:
                    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
                        response.read()
                    done.append(1)
                except OSError as exc:
                    errors.append(exc)
                    return

    thread = threading.Thread(target=scrape, name="metrics-scraper", daemon=True)
    thread.start()
    try:
        yield done
    finally:
        stop.set()
        thread.join()
    if errors:
        raise RuntimeError(f"a scrape of /metrics failed: {errors[0]}")
