"""Clients that live as long as the Python process: one BookKeeper client per metadata URI on the
driver-side workers, and plain per-bookie connections on executors (which never need ZooKeeper).

An executor cannot read a bookie's registration, so the driver reads it when it plans (each partition
carries the BookieServiceInfo of its ensemble's bookies) and the executor connects as the driver's
client would (``make_bookie_client``): gRPC at the registered gRPC endpoint, BookKeeper's native
protocol at the bookie id for a bookie without one (a stock BookKeeper bookie).

The first ``worker_clients()`` of an executor's Python worker also ``gc.freeze()``s what is loaded by
then (PySpark runs a full ``gc.collect()`` after every task of a reused worker, and PySpark, pyarrow,
grpc and these clients would be scanned each time) and keeps freed multi-megabyte buffers as the bookie
does (bookie/util/allocator.py).
"""
from __future__ import annotations

import atexit
import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping

from bookie.client.bookie_client import BookieClient
from bookie.client.bookkeeper import make_bookie_client
from bookie.client.conf import ClientConfiguration
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.meta.bookie_service_info import GRPC, BookieServiceInfo, Endpoint
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
    """An executor's bookie connections (one per bookie and transport), a small thread pool, the conf."""

    def __init__(self):
        self.conf = ClientConfiguration()
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bk-spark-read")
        self._clients: dict[tuple[str, Endpoint | None], BookieClient | NativeBookieClient] = {}

    def bookie_client(self, bookie: str, info: BookieServiceInfo | None) -> BookieClient | NativeBookieClient:
        """The connection to ``bookie`` over the transport its registration ``info`` offers."""
        # Keyed by the endpoint too: a bookie restarted on another gRPC port gets a new connection.
        key = (bookie, info.endpoint(GRPC) if info is not None else None)
        with _lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = make_bookie_client(bookie, info, self.conf.readTimeout)
            return client

    def for_bookies(self, services: Mapping[str, BookieServiceInfo | None]) -> "PartitionClients":
        return PartitionClients(self, services)


class PartitionClients:
    """What a LedgerReader needs for one partition: ``bookie_client(bookie)`` by the registrations the
    driver read when it planned the partition, the executor's thread pool and conf."""

    def __init__(self, workers: WorkerClients, services: Mapping[str, BookieServiceInfo | None]):
        self.workers = workers
        self.services = services
        self.conf = workers.conf
        self.executor = workers.executor

    def bookie_client(self, bookie: str) -> BookieClient | NativeBookieClient:
        return self.workers.bookie_client(bookie, self.services.get(bookie))


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
