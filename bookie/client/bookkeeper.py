"""The BookKeeper client: ledgers on a cluster (create, open, delete, list, metadata).

    with BookKeeper("zk://127.0.0.1:2181/ledgers") as bk:
        lh = bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2, password=b"secret")
        lh.append(b"payload")
        lh.close()

Synchronous and thread-safe. One connection per bookie, shared by every ledger: gRPC where the
bookie's registration offers it, BookKeeper's native protocol otherwise (a stock bookie); one thread
completes append futures in entry order; a timer thread fails adds that exceed addEntryTimeout and
sends explicit LACs for idle writers.

One ledger's ensemble may mix both kinds of bookie, and an ensemble change replaces a bookie of either
kind with one of either kind. Ledgers of a non-zero scope (128-bit ids) exist only on the gRPC path, so
their ensembles and replacements are gRPC bookies (``writable_bookies(grpc_only=True)``).

Metrics (BookKeeperClientStats, bookie/client/bookkeeper_client_stats.py): ``stats_logger`` is the root; the
client records under ``bookkeeper_client`` (``client_stats``, which its handles record in too).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from concurrent.futures import InvalidStateError, ThreadPoolExecutor

from bookie.client import ledger_recovery
from bookie.client.bookie_client import BookieClient
from bookie.client.bookkeeper_client_stats import CLIENT_SCOPE, BookKeeperClientStats, timed
from bookie.client.conf import AUTO, NATIVE, POOLED_DIRECT, ClientConfiguration
from bookie.client.ensemble_placement import BookieQuarantine, new_ensemble
from bookie.client.ledger_handle import LedgerHandle
from bookie.client.ledger_handle_adv import LedgerHandleAdv
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.client.read_only_ledger_handle import ReadOnlyLedgerHandle
from bookie.exceptions import (BKClientClosedException, BKDigestMatchException, BKIncorrectParameterException,
                               BKLedgerExistException, BKNotEnoughBookiesException, BKUnauthorizedAccessException,
                               BKZKException)
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import GRPC, BookieServiceInfo
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.metadata_store import Versioned
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto.checksum import DigestType
from bookie.stats.stats_logger import NULL_STATS_LOGGER, StatsLogger
from bookie.util.allocator import keep_large_buffers
from bookie.util.periodic_thread import PeriodicThread

log = logging.getLogger(__name__)
UNREGISTERED_RECHECK = 1.0  # seconds before asking ZooKeeper again what an unregistered bookie speaks
TIMER_INTERVAL = 0.1  # seconds between the timer's rounds: the resolution of addEntryTimeout and explicitLacInterval
_STOP = object()


def make_bookie_client(bookie_id: str, info: BookieServiceInfo | None, timeout: float,
                       protocol: str = AUTO, use_v2: bool = False) -> BookieClient | NativeBookieClient:
    """gRPC at the registered ``grpc`` endpoint if the bookie offers one (and ``protocol`` is not
    ``native``); otherwise BookKeeper's native protocol at its registered ``bookie-rpc`` endpoint
    (DefaultBookieAddressResolver), or at the bookie id when it lists none or is not registered (the legacy
    resolution: how an older stock bookie is reached), its adds in v2 with ``use_v2`` (useV2WireProtocol).
    Either client names ``bookie_id`` to the bookie it finds there, which refuses if it is another one."""
    endpoint = info.endpoint(GRPC) if info is not None and protocol != NATIVE else None
    if endpoint is not None:
        return BookieClient(bookie_id, timeout, address=endpoint.address)
    return NativeBookieClient(bookie_id, timeout, address=info.native_address(bookie_id) if info else bookie_id,
                              use_v2=use_v2)


def as_ledger_id(ledger, scope_id: int = 0) -> LedgerId:
    """A LedgerId from an int id (+ scope), a LedgerId, or a 32-hex-digit qualified name."""
    if isinstance(ledger, LedgerId):
        return ledger
    if isinstance(ledger, str) and not ledger.isdigit():
        return LedgerId.from_qualified_name(ledger)
    try:
        return LedgerId.of(int(ledger), scope_id)
    except (TypeError, ValueError) as exc:
        raise BKIncorrectParameterException(f"ledger id {ledger!r}: {exc}") from None


class BookKeeper:
    def __init__(self, metadata_service_uri: str, conf: ClientConfiguration | dict | None = None,
                 stats_logger: StatsLogger = NULL_STATS_LOGGER, **overrides):
        self.conf = conf if isinstance(conf, ClientConfiguration) else ClientConfiguration.of(conf, **overrides)
        self.client_stats = BookKeeperClientStats(stats_logger.scope(CLIENT_SCOPE))
        if self.conf.allocatorPoolingPolicy == POOLED_DIRECT:
            keep_large_buffers()  # range reads move multi-megabyte messages: reuse their memory
        self.store = ZKMetadataStore(metadata_service_uri, self.conf.zkTimeout, self.conf.zkConnectTimeout)
        self.store.instance_id()  # fails clearly if the cluster was never initialised
        self._clients: dict[str, BookieClient | NativeBookieClient] = {}
        # Bookies not registered when first asked for (down, or gone): a client by guess, and when to ask again.
        self._guessed: dict[str, tuple[BookieClient | NativeBookieClient, float]] = {}
        self._lock = threading.Lock()
        self._writable: list[str] = []
        self._readonly: list[str] = []
        self._bookies_known = threading.Event()
        self.store.watch_bookies(self._on_bookies)
        self._quarantine = BookieQuarantine(self.conf)
        self.executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="bk-client")
        self._completions: queue.SimpleQueue = queue.SimpleQueue()
        self._completion_thread = threading.Thread(target=self._complete_loop, name="bk-completions", daemon=True)
        self._completion_thread.start()
        self._writers: "weakref.WeakSet[LedgerHandle]" = weakref.WeakSet()
        self._closed = threading.Event()
        self._timer = PeriodicThread("bk-timer", TIMER_INTERVAL, self._check_writers)
        self._timer.start()

    # -- bookies ------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _on_bookies(self, writable: list[str], readonly: list[str]) -> None:
        self._writable, self._readonly = writable, readonly
        self._bookies_known.set()

    def writable_bookies(self, grpc_only: bool = False) -> list[str]:
        """Writable bookies; with ``grpc_only`` those that speak gRPC (the only path for ledgers of a
        non-zero scope: BookKeeper's native protocol names ledgers by 64-bit id)."""
        self._bookies_known.wait(self.conf.zkConnectTimeout)
        writable = list(self._writable)
        return [b for b in writable if self.speaks_grpc(b)] if grpc_only else writable

    def readonly_bookies(self) -> list[str]:
        self._bookies_known.wait(self.conf.zkConnectTimeout)
        return list(self._readonly)

    def bookie_failed(self, bookie: str) -> None:
        """``bookie`` failed a request (see ``quarantined``)."""
        self._quarantine.failed(bookie)

    def quarantined(self) -> set[str]:
        """Bookies new ensembles and replacements avoid while others will do: failed recently
        (``bookieFailureHistoryExpirationMSec``) or quarantined (``bookieErrorThresholdPerInterval``)."""
        return self._quarantine.avoid()

    def _pick_ensemble(self, size: int, grpc_only: bool = False) -> list[str]:
        writable = self.writable_bookies(grpc_only)
        if grpc_only and len(writable) < size:
            raise BKNotEnoughBookiesException(
                f"need {size} writable bookies that speak gRPC, {len(writable)} available: ledgers of a non-zero "
                "scope (128-bit ids) exist only on the gRPC path (BookKeeper's native protocol names ledgers "
                "by 64-bit id)")
        avoid = self.quarantined()
        if len([b for b in writable if b not in avoid]) >= size:
            return new_ensemble(writable, size, avoid)
        return new_ensemble(writable, size)

    def bookie_client(self, bookie: str) -> BookieClient | NativeBookieClient:
        """The bookie's client, by the transport its registration offers (see ``make_bookie_client``)."""
        with self._lock:
            if self._closed.is_set():
                raise BKClientClosedException("the BookKeeper client is closed")
            client = self._clients.get(bookie)
            if client is not None:
                return client
            guessed, recheck = self._guessed.get(bookie, (None, 0.0))
            if guessed is not None and time.monotonic() < recheck:
                return guessed
        try:
            info = self.store.bookie_service_info(bookie)
        except BKZKException:
            info = None
        with self._lock:
            if self._closed.is_set():
                raise BKClientClosedException("the BookKeeper client is closed")
            if bookie in self._clients:
                return self._clients[bookie]
            if info is not None:
                client = self._clients[bookie] = self._make_client(bookie, info)
                return client
            guessed = self._guessed.get(bookie, (None, 0.0))[0] or self._make_client(bookie, None)
            self._guessed[bookie] = (guessed, time.monotonic() + UNREGISTERED_RECHECK)
            return guessed

    def _make_client(self, bookie: str, info: BookieServiceInfo | None) -> BookieClient | NativeBookieClient:
        return make_bookie_client(bookie, info, self.conf.readTimeout, self.conf.bookieProtocol,
                                  self.conf.useV2WireProtocol)

    def speaks_grpc(self, bookie: str) -> bool:
        return isinstance(self.bookie_client(bookie), BookieClient)

    # -- completions (entry order) and timers --------------------------------------------------------
    def complete_in_order(self, ops) -> None:
        if ops:
            self._completions.put(ops)

    def fail_all(self, failed) -> None:
        if failed:
            self._completions.put(failed)

    def _complete_loop(self) -> None:
        """Complete each queued item in order: a list of acknowledged PendingAddOps, or of (future, error)."""
        while True:
            item = self._completions.get()
            if item is _STOP:
                return
            for entry in item:
                try:  # a future its owner cancelled stays cancelled
                    if isinstance(entry, tuple):
                        entry[0].set_exception(entry[1])
                    elif entry.futures is not None:
                        first = entry.entry_id
                        for k, future in enumerate(entry.futures):
                            try:
                                future.set_result(first + k)
                            except InvalidStateError:
                                pass
                    else:
                        entry.future.set_result(entry.result())
                except InvalidStateError:
                    pass

    def register_writer(self, handle: LedgerHandle) -> None:
        """Watch ``handle`` with the timer until it closes (its add timeouts and explicit LAC)."""
        self._writers.add(handle)

    def unregister_writer(self, handle: LedgerHandle) -> None:
        self._writers.discard(handle)

    def _check_writers(self) -> None:
        """One round of the timer: add timeouts and explicit LACs of every open writer."""
        if self._closed.is_set():
            return  # close() fails what is pending; nothing to time out any more
        now = time.monotonic()
        for handle in list(self._writers):
            try:  # one writer's failure must not starve the others
                handle.check_add_timeouts(now)
                handle.flush_explicit_lac_if_due(now)
            except Exception:
                log.exception("timer of ledger %s failed", handle.ledger)

    # -- ledgers ------------------------------------------------------------------------------------
    def create_ledger(self, ensemble_size: int = 3, write_quorum: int = 2, ack_quorum: int = 2,
                      digest: str | DigestType = "crc32c", password: bytes = b"",
                      custom_metadata: dict[str, bytes] | None = None, ledger_id: int | None = None,
                      scope_id: int = 0, bookies: list[str] | None = None) -> LedgerHandle:
        """A new ledger on ``ensemble_size`` writable bookies (random, or ``bookies``), open for appends."""
        return timed(self.client_stats.create_op, lambda: self._create(
            LedgerHandle, ensemble_size, write_quorum, ack_quorum, digest, password, custom_metadata, ledger_id,
            scope_id, bookies))

    def create_ledger_adv(self, ensemble_size: int = 3, write_quorum: int = 2, ack_quorum: int = 2,
                          digest: str | DigestType = "crc32c", password: bytes = b"",
                          custom_metadata: dict[str, bytes] | None = None, ledger_id: int | None = None,
                          scope_id: int = 0, bookies: list[str] | None = None) -> LedgerHandleAdv:
        """A new ledger whose writer chooses entry ids (``add_entry(entry_id, payload)``)."""
        return timed(self.client_stats.create_op, lambda: self._create(
            LedgerHandleAdv, ensemble_size, write_quorum, ack_quorum, digest, password, custom_metadata, ledger_id,
            scope_id, bookies))

    def _create(self, cls, ensemble_size, write_quorum, ack_quorum, digest, password, custom_metadata, ledger_id,
                scope_id, bookies):
        if not (isinstance(ensemble_size, int) and isinstance(write_quorum, int) and isinstance(ack_quorum, int)
                and 0 < ack_quorum <= write_quorum <= ensemble_size):
            raise BKIncorrectParameterException(
                f"quorums must satisfy 0 < ack_quorum <= write_quorum <= ensemble_size; got ensemble_size="
                f"{ensemble_size}, write_quorum={write_quorum}, ack_quorum={ack_quorum}")
        if not isinstance(password, bytes):
            raise BKIncorrectParameterException(f"password must be bytes, not {type(password).__name__}")
        try:
            digest_type = DigestType.parse(digest)
        except ValueError as exc:
            raise BKIncorrectParameterException(str(exc)) from None
        custom = tuple(sorted((str(k), bytes(v)) for k, v in (custom_metadata or {}).items()))
        if bookies is not None and len(bookies) != ensemble_size:
            raise BKIncorrectParameterException(f"{len(bookies)} bookies given for an ensemble of {ensemble_size}")
        ensemble = list(bookies) if bookies is not None else self._pick_ensemble(ensemble_size, grpc_only=scope_id != 0)
        native = [b for b in ensemble if scope_id != 0 and not self.speaks_grpc(b)]
        if native:
            raise BKIncorrectParameterException(
                f"bookies {', '.join(native)} speak only BookKeeper's native protocol: ledgers of a non-zero scope "
                "(128-bit ids) exist only on the gRPC path")
        metadata = LedgerMetadata(ensemble_size=ensemble_size, write_quorum_size=write_quorum, ack_quorum_size=ack_quorum,
                                  ensembles=((0, tuple(ensemble)),), password=password, digest_type=digest_type,
                                  custom_metadata=custom)
        while True:
            lid = LedgerId.of(ledger_id if ledger_id is not None else self.store.generate_ledger_id(), scope_id)
            try:
                versioned = self.store.create_ledger(lid, metadata)
                break
            except BKLedgerExistException:
                if ledger_id is not None:
                    raise
        return cls(self, lid, versioned, password)

    def open_ledger(self, ledger, password: bytes = b"", recovery: bool = True, scope_id: int = 0,
                    digest: str | DigestType | None = None, *, versioned: Versioned[LedgerMetadata] | None = None):
        """Open for reading. With ``recovery`` (the default) an open ledger is fenced, recovered and
        closed first, so the old writer can add nothing more; without, it is read up to its LAC and the
        writer is not disturbed. ``versioned``: the metadata the caller has just read (a walk of many
        ledgers reads them pipelined, MetadataStore.read_ledgers), so it is not read again."""
        lid = as_ledger_id(ledger, scope_id)
        return timed(self.client_stats.open_op, lambda: self._open(lid, password, recovery, digest, versioned))

    def _open(self, lid: LedgerId, password: bytes, recovery: bool, digest: str | DigestType | None,
              versioned: Versioned[LedgerMetadata] | None) -> ReadOnlyLedgerHandle:
        if versioned is None:
            versioned = self.store.read_ledger(lid)
        md = versioned.value
        if md.password != password:
            raise BKUnauthorizedAccessException(f"wrong password for ledger {lid}")
        if digest is not None and DigestType.parse(digest) != md.digest_type and not self.conf.enableDigestTypeAutodetection:
            raise BKDigestMatchException(f"ledger {lid} uses digest {md.digest_type.name.lower()}, not {digest}")
        if recovery and not md.is_closed:
            versioned = timed(self.client_stats.recover_op,
                              lambda: ledger_recovery.recover(self, lid, versioned, password))
        return ReadOnlyLedgerHandle(self, lid, versioned, password)

    def delete_ledger(self, ledger, scope_id: int = 0) -> None:
        """Delete the ledger's metadata; the bookies reclaim its space by GC."""
        lid = as_ledger_id(ledger, scope_id)
        timed(self.client_stats.delete_op, lambda: self.store.delete_ledger(lid))

    def list_ledgers(self, scope_id: int | None = 0) -> list[LedgerId]:
        return list(self.store.iterate_ledgers(scope_id))

    def ledger_metadata(self, ledger, scope_id: int = 0) -> LedgerMetadata:
        return self.store.read_ledger(as_ledger_id(ledger, scope_id)).value

    # -- life cycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Fail what is still pending (BKClientClosedException) and release every connection."""
        if self._closed.is_set():
            return
        self._closed.set()
        for handle in list(self._writers):
            handle.fail_all_pending(BKClientClosedException(f"client closed with appends to ledger {handle.ledger} pending"))
        self._completions.put(_STOP)
        self._completion_thread.join()
        self._timer.shutdown()
        with self._lock:
            clients = list(self._clients.values()) + [c for c, _ in self._guessed.values()]
            self._clients, self._guessed = {}, {}
        for client in clients:
            client.close()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
