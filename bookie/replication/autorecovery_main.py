"""One AutoRecovery participant (BookKeeper's AutoRecoveryMain): the auditor election, the auditor while
this participant is elected, and a ReplicationWorker that copies the ledgers the auditor marks.

Runs as ``bk autorecovery`` (a process of its own; several may run, one is the auditor) or inside a bookie
with ``autoRecoveryDaemonEnabled=true`` (``bk bookie`` starts it once the bookie is up; the server layer
does not import replication).

Metrics: ``stats_logger`` is the root; the election and the auditor record under ``auditor``, the worker under
``replication_worker``, the participant's client under ``bookkeeper_client`` (AutoRecoveryMain's scopes).
"""
from __future__ import annotations

import logging
import threading

from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.replication.auditor import Auditor, AuditorStats
from bookie.replication.auditor_elector import AuditorElector
from bookie.replication.replication_stats import AUDITOR_SCOPE, REPLICATION_WORKER_SCOPE
from bookie.replication.replication_worker import ReplicationSettings, ReplicationWorker
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger

log = logging.getLogger(__name__)


def default_id(conf) -> str:
    """The participant's id, as BookKeeper's: the bookie id its configuration gives."""
    return conf.bookie_id


class AutoRecoveryMain:
    def __init__(self, conf, participant_id: str | None = None, stats_logger: StatsLogger = NULL_STATS_LOGGER):
        self.conf = conf
        self.id = participant_id or default_id(conf)
        self.stats_logger = stats_logger
        auditor_scope = stats_logger.scope(AUDITOR_SCOPE)
        self.auditor_stats = AuditorStats(auditor_scope)  # one for every term as the auditor (gauges register once)
        self.store = ZKMetadataStore(conf.metadata_service_uri, zk_timeout_ms=conf["zkTimeout"])
        self.manager = LedgerUnderreplicationManager(self.store, self.id)
        self._client = None
        self._auditor: Auditor | None = None
        self._lock = threading.Lock()
        self.elector = AuditorElector(self.id, self.store, self._start_auditor, self._stop_auditor, auditor_scope)
        self.worker: ReplicationWorker | None = None

    @property
    def auditor(self) -> Auditor | None:
        return self._auditor

    def start(self) -> "AutoRecoveryMain":
        self.elector.start()
        self.worker = ReplicationWorker(self._bk(), LedgerUnderreplicationManager(self.store, self.id),
                                        ReplicationSettings.of(self.conf), self.id,
                                        self.stats_logger.scope(REPLICATION_WORKER_SCOPE)).start()
        log.info("autorecovery %s started", self.id)
        return self

    def _bk(self):
        """The participant's client (the worker's, and the auditor's replicas check)."""
        from bookie.client import BookKeeper
        with self._lock:
            if self._client is None:  # one configuration for both, as BookKeeper's: the same session timeout
                self._client = BookKeeper(self.conf.metadata_service_uri, {"zkTimeout": self.conf["zkTimeout"]},
                                          stats_logger=self.stats_logger)
            return self._client

    def _bookie_client(self, bookie: str):
        return self._bk().bookie_client(bookie)

    def _start_auditor(self) -> None:
        self._auditor = Auditor(self.id, self.store, self.manager, self.conf, self._bookie_client,
                               client=self._bk, auditor_stats=self.auditor_stats).start()

    def _stop_auditor(self) -> None:
        auditor, self._auditor = self._auditor, None
        if auditor is not None:
            auditor.shutdown()

    def shutdown(self, grace: float | None = None) -> None:
        """Stop the worker (its locks released) and the election (the auditor with it), then leave
        ZooKeeper. While ZooKeeper does not answer, their calls retry for good: after ``grace`` seconds
        (default zkTimeout) the sessions are closed under them, which ends those calls; the locks and
        the vote are ephemeral and go with the session."""
        grace = self.conf["zkTimeout"] / 1000.0 if grace is None else grace
        if self.worker is not None:
            self.worker.stop()
        self.elector.stop()  # both told first: neither waits for the other's ZooKeeper calls to end
        services = threading.Thread(target=self._stop_services, name="AutoRecoveryShutdown", daemon=True)
        services.start()
        services.join(grace)
        if services.is_alive():
            log.warning("autorecovery %s: ZooKeeper did not answer within %.0f s; closing the sessions to stop",
                        self.id, grace)
        with self._lock:
            client = self._client
        if client is not None:
            client.close()
        self.store.close()
        services.join(grace)
        if services.is_alive():
            log.error("autorecovery %s: a thread is still blocked; stopping without it", self.id)
        log.info("autorecovery %s stopped", self.id)

    def _stop_services(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()  # releases the locks it holds
        self.elector.shutdown()  # steps down: stops the auditor
