"""The cluster as the cluster-wide HTTP services reach it from inside a bookie or AutoRecovery process
(BKHttpServiceProvider's BookKeeperAdmin, LedgerManagerFactory and executor).

Each part is opened when a service first needs it, once, whatever thread asks (a service asks from a worker
thread of the event loop: opening one connects to ZooKeeper); ``close`` closes what was opened. Long jobs that
a service answers before they end (a recovery, a decommission) run one after another on the context's own
thread, as BookKeeper runs them on the provider's single-thread executor.
"""
from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, TypeVar

from bookie.client import BookKeeper
from bookie.client.bookkeeper_admin import BookKeeperAdmin
from bookie.exceptions import BKClientClosedException
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.conf import ConfigurationException, ServerConfiguration

log = logging.getLogger(__name__)
T = TypeVar("T")


class ClusterContext:
    def __init__(self, conf: ServerConfiguration):
        self.conf = conf
        self._lock = threading.Lock()
        self._closed = False
        self._store: ZKMetadataStore | None = None
        self._bookkeeper: BookKeeper | None = None
        self._admin: BookKeeperAdmin | None = None
        self._underreplication: LedgerUnderreplicationManager | None = None
        self._jobs: queue.SimpleQueue[tuple[str, Callable[[], None] | None]] = queue.SimpleQueue()
        self._job_thread: threading.Thread | None = None

    @property
    def metadata_service_uri(self) -> str:
        uri = self.conf.metadata_service_uri
        if not uri:
            raise ConfigurationException("no metadata service: the configuration sets neither metadataServiceUri "
                                         "nor zkServers, so the cluster-wide HTTP services have no cluster")
        return uri

    def _open(self, attribute: str, make: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise BKClientClosedException("the HTTP services' cluster context is closed")
            value = getattr(self, attribute)
            if value is None:
                value = make()
                setattr(self, attribute, value)
            return value

    def store(self) -> ZKMetadataStore:
        """The metadata store (ZooKeeper) of the cluster."""
        return self._open("_store", lambda: ZKMetadataStore(self.metadata_service_uri, self.conf["zkTimeout"]))

    def bookkeeper(self) -> BookKeeper:
        """A BookKeeper client of the cluster."""
        return self._open("_bookkeeper",
                          lambda: BookKeeper(self.metadata_service_uri, {"zkTimeout": self.conf["zkTimeout"]}))

    def admin(self) -> BookKeeperAdmin:
        """A BookKeeperAdmin over ``bookkeeper()``."""
        bk = self.bookkeeper()  # outside the lock: _open takes it
        return self._open("_admin", lambda: BookKeeperAdmin(bk))

    def underreplication(self) -> LedgerUnderreplicationManager:
        """The under-replication manager over ``store()`` (marks, AutoRecovery's switch, the recovery delay)."""
        store = self.store()
        return self._open("_underreplication", lambda: LedgerUnderreplicationManager(store))

    def run_in_background(self, what: str, job: Callable[[], None]) -> None:
        """Run ``job`` after those submitted before it, on the context's thread (a daemon, as BookKeeper's
        BKHttpServiceThread: a decommission may wait a day, and must not hold the process when it stops); its
        end, or its failure, is logged naming ``what``."""
        with self._lock:
            if self._closed:
                raise BKClientClosedException("the HTTP services' cluster context is closed")
            self._jobs.put((what, job))
            if self._job_thread is None:
                self._job_thread = threading.Thread(target=self._run_jobs, name="BKHttpServiceThread", daemon=True)
                self._job_thread.start()

    def _run_jobs(self) -> None:
        while True:
            what, job = self._jobs.get()
            if job is None:
                return
            log.info("%s: started", what)
            try:
                job()
            except Exception:
                log.exception("%s: failed", what)
            else:
                log.info("%s: done", what)

    def close(self) -> None:
        """Close what was opened; jobs not started are dropped, and one still running fails on the closed
        client (and says so)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            bk, store = self._bookkeeper, self._store
            try:
                while True:
                    self._jobs.get_nowait()
            except queue.Empty:
                pass
            self._jobs.put(("stop", None))
        if bk is not None:
            bk.close()
        if store is not None:
            store.close()
