"""Clients that live as long as the Python process: one BookKeeper client per metadata URI on the
driver-side workers, and plain per-bookie channels on executors (which never need ZooKeeper)."""
from __future__ import annotations

import atexit
import gc
import threading
from concurrent.futures import ThreadPoolExecutor

from bookie.client.bookie_client import BookieClient
from bookie.client.conf import ClientConfiguration
from bookie.util.allocator import keep_large_buffers

_lock = threading.Lock()
_drivers: dict[str, object] = {}
_workers = None


def driver_client(uri: str, connect_timeout: float = 10.0):
    """A BookKeeper client for ``uri`` (cached): metadata, LACs, recovery, writes."""
    from bookie.client import BookKeeper
    from bookie.exceptions import BKZKException
    from spark_bookkeeper.options import BookKeeperOptionException
    with _lock:
        client = _drivers.get(uri)
        if client is None or client.closed:
            try:
                client = _drivers[uri] = BookKeeper(uri, zkConnectTimeout=connect_timeout)
            except BKZKException as exc:
                raise BookKeeperOptionException(f"cannot reach the cluster at {uri}: {exc}") from None
        return client


class WorkerClients:
    """What a LedgerReader needs on an executor: bookie channels, a small thread pool, the conf."""

    def __init__(self):
        self.conf = ClientConfiguration()
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bk-spark-read")
        self._clients: dict[str, BookieClient] = {}

    def bookie_client(self, bookie: str) -> BookieClient:
        # gRPC by bookie id: an executor has no ZooKeeper to read a bookie's registration from, so
        # ledgers on stock (native-only) bookies are not readable from executors yet.
        with _lock:
            client = self._clients.get(bookie)
            if client is None:
                client = self._clients[bookie] = BookieClient(bookie, self.conf.readTimeout)
            return client


def worker_clients() -> WorkerClients:
    global _workers
    with _lock:
        if _workers is None:
            _workers = WorkerClients()
            # PySpark runs a full gc.collect() after every task of a reused worker; what is loaded by
            # now (PySpark, pyarrow, grpc, these clients) lives as long as the process, so keep it
            # out of those collections.
            gc.collect()
            gc.freeze()
            keep_large_buffers()  # range-read messages are megabytes: reuse their memory
        return _workers


@atexit.register
def _close_all() -> None:
    for client in list(_drivers.values()):
        try:
            client.close()
        except Exception:
            pass
