"""The metadata store on ZooKeeper (kazoo), in BookKeeper's layout (bookie.meta.layout).

One kazoo client per store, connected to every server of the ensemble the URI lists: kazoo moves to
another server when its server goes, keeping the session. A request that may be sent twice (a read, the
ledger id, a ledger's creation, a registration) is sent again once the client is connected again, for up
to two zkTimeouts (BookKeeper's ZooKeeperClient waits zkTimeout for a connection); a change whose reply was lost
is in doubt and raised as BKZKConnectionLossException for the caller to re-read. After a session expiry,
kazoo opens a new session and the bookie's registrations are created again.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Callable, Iterable, Iterator, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (BadVersionError, ConnectionLoss, KazooException, NodeExistsError, NoNodeError,
                              NotEmptyError, OperationTimeoutError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from bookie.exceptions import (BKLedgerExistException, BKMetadataSerializationException,
                               BKMetadataVersionException, BKNoSuchLedgerExistsOnMetadataServerException,
                               BKZKConnectionLossException, BKZKException)
from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta import ledger_metadata
from bookie.meta.bookie_service_info import BookieServiceInfo, Endpoint
from bookie.meta.ledger_id_generator import ZkLedgerIdGenerator
from bookie.meta.ledger_range_iterator import LedgerRangeIterator
from bookie.meta.metadata_store import LedgerRange, MetadataStore, Versioned
from bookie.meta.multi_read import read_many, supports_multi_read
from bookie.meta.pipelined_reads import READ_WINDOW, pipelined
from bookie.meta.retry import retry_when_reconnected
from bookie.meta.service_uri import MetadataServiceUri

log = logging.getLogger(__name__)
T = TypeVar("T")
LOST_CONNECTION = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)  # kazoo's: the request is in doubt
# What metaformat deletes besides the ledger trees and id generators (ZKRegistrationManager.format and the
# ledger manager factory's format): under the root, and under underreplication (the marks and the locks; the
# auditor's settings stay).
FORMATTED_NODES = (layout.COOKIE_NODE, layout.INSTANCEID, layout.LAYOUT_ZNODE, *layout.CONNECTOR_NODES)
FORMATTED_UNDER_REPLICATION = (layout.UNDER_REPLICATED_LEDGERS, layout.SCOPED_UNDER_REPLICATED_LEDGERS,
                               f"{layout.UNDER_REPLICATION_NODE}/locks")


def _answer(result):
    """A kazoo async read's ``(data, stat)``, or its exception (as multi_read.read_many hands them)."""
    try:
        return result.get()
    except KazooException as exc:
        return exc


def connect(hosts: str, timeout_ms: int = 10000, connect_timeout: float = 15.0) -> KazooClient:
    """A started kazoo client, or BKZKException saying ZooKeeper could not be reached in time."""
    client = KazooClient(hosts=hosts, timeout=timeout_ms / 1000.0,
                         connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
                         command_retry=KazooRetry(max_tries=5, max_delay=1.0))
    try:
        client.start(timeout=connect_timeout)
    except KazooTimeoutError:
        client.close()
        raise BKZKException(f"ZooKeeper at {hosts} is not reachable (waited {connect_timeout:.0f} s)") from None
    return client


class ZKMetadataStore(MetadataStore):
    def __init__(self, uri: str | MetadataServiceUri, zk_timeout_ms: int = 10000, connect_timeout: float = 15.0):
        self.uri = uri if isinstance(uri, MetadataServiceUri) else MetadataServiceUri.parse(uri)
        self.root = self.uri.root
        self.zk = connect(self.uri.hosts, zk_timeout_ms, connect_timeout)
        self.zk_timeout_ms = zk_timeout_ms
        self._manager: str | None = None
        self._multi_read: bool | None = None  # the server has multiRead (asked at the first walk)
        self._registrations: dict[tuple[str, bool], bytes] = {}
        self._registering = threading.Lock()  # registrations and their re-creation after an expiry, one at a time
        self._lock = threading.Lock()
        self._watchers: dict = {}  # node_children's one-shot watch callables -> their kazoo watcher
        self.zk.add_listener(self._on_state)

    # -- helpers -------------------------------------------------------------------------------------
    def _path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _node_path(self, path: str) -> str:
        """A plain node's path (relative to the root; "" is the root itself)."""
        return self._path(path) if path else self.root

    @property
    def manager(self) -> str:
        """The ledger manager of the cluster's LAYOUT (hierarchical for a cluster without one)."""
        if self._manager is None:
            try:
                data, _ = self._retrying("read of the layout", lambda: self.zk.get(self._path(layout.LAYOUT_ZNODE)))
                found = layout.LedgerLayout.decode(data).manager
            except NoNodeError:
                found = self.uri.layout or "hierarchical"
            except KazooException as exc:
                raise self._zk_error(f"read of {self._path(layout.LAYOUT_ZNODE)}", exc) from None
            if self.uri.layout and self.uri.layout != found:
                raise BKZKException(f"metadataServiceUri asks for the {self.uri.layout} layout but the cluster at "
                                    f"{self.uri} uses {found}")
            self._manager = found
        return self._manager

    def ledger_path(self, ledger: LedgerId) -> str:
        return layout.ledger_path(self.root, self.manager, ledger)

    def _zk_error(self, what: str, exc: Exception) -> BKZKException:
        # A lost connection leaves a change in doubt (applied or not): a distinct class, so callers re-read.
        uncertain = isinstance(exc, LOST_CONNECTION)
        return (BKZKConnectionLossException if uncertain else BKZKException)(
            f"{what} failed on ZooKeeper {self.uri.hosts}: {type(exc).__name__} {exc}")

    def _retrying(self, what: str, request: Callable[[], T]) -> T:
        """``request()``, one that may be sent twice (a read, or a write whose repeat is harmless), sent again
        when the connection is lost under it, once kazoo is connected again (to any server of the ensemble),
        for up to two zkTimeouts (a hung server is left after two thirds of one, and a quorum that lost its
        leader needs a new election); then BKZKConnectionLossException. Other kazoo errors pass through."""
        def attempt() -> T:
            try:
                return request()
            except LOST_CONNECTION as exc:
                raise self._zk_error(what, exc) from None
        return retry_when_reconnected(attempt, lambda: self.zk.connected, 2 * self.zk_timeout_ms / 1000.0)

    def _delete_if_there(self, what: str, path: str, recursive: bool = False) -> None:
        """Delete ``path`` (and everything under it if ``recursive``), sent again after a lost reply (a node gone
        already is deleted)."""
        try:
            self._retrying(what, lambda: self.zk.delete(path, recursive=recursive))
        except NoNodeError:
            pass
        except KazooException as exc:
            raise self._zk_error(what, exc) from None

    # -- cluster -------------------------------------------------------------------------------------
    def init_new_cluster(self) -> bool:
        manager = self.uri.layout or "hierarchical"
        try:
            if self._retrying("initnewcluster", lambda: self.zk.exists(self._path(layout.INSTANCEID))):
                return False
            self._retrying("initnewcluster", lambda: self.zk.ensure_path(self.root))  # every parent of the root too
        except KazooException as exc:
            raise self._zk_error("initnewcluster", exc) from None
        return self._create_cluster_nodes("initnewcluster", manager, layout.AVAILABLE_NODE,
                                          f"{layout.AVAILABLE_NODE}/{layout.READONLY}")

    def _create_cluster_nodes(self, what: str, manager: str, *empty: str) -> bool:
        """Create the ``empty`` nodes, LAYOUT and a new INSTANCEID in one transaction; False if one exists."""
        tx = self.zk.transaction()
        for path in empty:
            tx.create(self._path(path), b"")
        tx.create(self._path(layout.LAYOUT_ZNODE), layout.LedgerLayout(manager).encode())
        tx.create(self._path(layout.INSTANCEID), str(uuid.uuid4()).encode())
        results = tx.commit()
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            if any(isinstance(e, NodeExistsError) for e in errors):
                return False
            raise self._zk_error(what, errors[0])
        self._manager = manager
        return True

    def format_metadata(self) -> None:
        for name in self._children(self.root):
            if layout.is_ledger_tree(name) or layout.is_id_generator(name) or name in FORMATTED_NODES:
                self.delete_tree(name)
        for path in FORMATTED_UNDER_REPLICATION:
            self.delete_tree(path)
        readonly = self._path(layout.AVAILABLE_NODE, layout.READONLY)
        try:
            self._retrying("metaformat", lambda: self.zk.ensure_path(readonly))  # the root and available too
        except KazooException as exc:
            raise self._zk_error("metaformat", exc) from None
        self._manager = None
        if not self._create_cluster_nodes("metaformat", self.uri.layout or "hierarchical"):
            raise BKZKException(f"metaformat of {self.uri}: another process created {layout.LAYOUT_ZNODE} or "
                                f"{layout.INSTANCEID} meanwhile; run it again once that process is done")

    def instance_id(self) -> str:
        try:
            data, _ = self._retrying("read of the instance id", lambda: self.zk.get(self._path(layout.INSTANCEID)))
            return data.decode()
        except NoNodeError:
            raise BKZKException(f"no cluster at {self.uri}: {self._path(layout.INSTANCEID)} is missing "
                                "(run `bk shell initnewcluster`)") from None
        except KazooException as exc:
            raise self._zk_error("read of the instance id", exc) from None

    # -- ledgers -------------------------------------------------------------------------------------
    def generate_ledger_id(self) -> int:
        # Sent again after a lost reply: at worst an id goes unused.
        try:
            return self._retrying("ledger id generation", ZkLedgerIdGenerator(self.zk, self.root).generate)
        except KazooException as exc:
            raise self._zk_error("ledger id generation", exc) from None

    def create_ledger(self, ledger: LedgerId, metadata: ledger_metadata.LedgerMetadata) -> Versioned[ledger_metadata.LedgerMetadata]:
        path = self.ledger_path(ledger)
        data = ledger_metadata.serialize(metadata)
        try:
            self._retrying(f"create of ledger {ledger}", lambda: self.zk.create(path, data, makepath=True))
        except NodeExistsError:
            # A create resent after a connection loss may have succeeded: the creation token tells.
            existing = self.read_ledger(ledger)
            if existing.value.ctoken == metadata.ctoken:
                return existing
            raise BKLedgerExistException(f"ledger {ledger} already exists ({path})") from None
        except KazooException as exc:
            raise self._zk_error(f"create of ledger {ledger}", exc) from None
        return Versioned(metadata, 0)

    def read_ledger(self, ledger: LedgerId) -> Versioned[ledger_metadata.LedgerMetadata]:
        versioned = self._read_answer(ledger, self._get_ledger(ledger), ledger_metadata.parse)
        if versioned is None:
            raise BKNoSuchLedgerExistsOnMetadataServerException(
                f"ledger {ledger} does not exist ({self.ledger_path(ledger)})")
        return versioned

    def _get_ledger(self, ledger: LedgerId):
        """The ledger znode's (data, stat), sent again after a lost connection (``_retrying``); or the error."""
        path = self.ledger_path(ledger)
        try:
            return self._retrying(f"read of ledger {ledger}", lambda: self.zk.get(path))
        except KazooException as exc:
            return exc

    def read_ledgers(self, ledgers: Iterable[LedgerId], window: int = READ_WINDOW
                     ) -> Iterator[tuple[LedgerId, Versioned[ledger_metadata.LedgerMetadata] | None]]:
        """Each ledger with its metadata (None: it does not exist), in the order given, up to ``window`` reads in
        flight: batched in multiRead requests where the server has them (bookie.meta.multi_read), else one
        request per ledger. A read that loses its connection is sent again on its own."""
        return self._read_many(ledgers, window, ledger_metadata.parse)

    def read_ledger_access(self, ledgers: Iterable[LedgerId], window: int = READ_WINDOW
                           ) -> Iterator[tuple[LedgerId, Versioned[ledger_metadata.LedgerAccess] | None]]:
        """``read_ledgers``, decoding only each ledger's password and digest type."""
        return self._read_many(ledgers, window, ledger_metadata.parse_access)

    def _read_many(self, ledgers: Iterable[LedgerId], window: int, parse: Callable[[bytes], T]
                   ) -> Iterator[tuple[LedgerId, Versioned[T] | None]]:
        if self._multi_read is None:
            self._multi_read = supports_multi_read(self.zk)
        if self._multi_read:
            answers = read_many(self.zk, ((ledger, self.ledger_path(ledger)) for ledger in ledgers), window=window)
        else:
            answers = pipelined(ledgers, lambda ledger: self.zk.get_async(self.ledger_path(ledger)),
                                lambda _, result: _answer(result), window)
        for ledger, answer in answers:
            yield ledger, self._read_answer(ledger, answer, parse)

    def _read_answer(self, ledger: LedgerId, answer, parse: Callable[[bytes], T]) -> Versioned[T] | None:
        if isinstance(answer, LOST_CONNECTION):
            answer = self._get_ledger(ledger)
        if isinstance(answer, NoNodeError):
            return None
        if isinstance(answer, Exception):
            raise self._zk_error(f"read of ledger {ledger}", answer)
        data, stat = answer
        return Versioned(self._parse(ledger, data, parse), stat.version)

    @staticmethod
    def _parse(ledger: LedgerId, data: bytes, parse: Callable[[bytes], T]) -> T:
        try:
            return parse(data)
        except Exception as exc:  # protobuf decode errors have no common base
            raise BKMetadataSerializationException(f"metadata of ledger {ledger} cannot be decoded: {exc}") from None

    def write_ledger(self, ledger: LedgerId, metadata: ledger_metadata.LedgerMetadata, version: int) -> Versioned[ledger_metadata.LedgerMetadata]:
        try:
            stat = self.zk.set(self.ledger_path(ledger), ledger_metadata.serialize(metadata), version=version)
        except BadVersionError:
            raise BKMetadataVersionException(f"metadata of ledger {ledger} changed since version {version}") from None
        except NoNodeError:
            raise BKNoSuchLedgerExistsOnMetadataServerException(f"ledger {ledger} was deleted") from None
        except KazooException as exc:
            raise self._zk_error(f"update of ledger {ledger}", exc) from None
        return Versioned(metadata, stat.version)

    def delete_ledger(self, ledger: LedgerId, version: int = -1) -> None:
        try:
            self.zk.delete(self.ledger_path(ledger), version=version)
        except NoNodeError:
            raise BKNoSuchLedgerExistsOnMetadataServerException(f"ledger {ledger} does not exist") from None
        except BadVersionError:
            raise BKMetadataVersionException(f"metadata of ledger {ledger} changed since version {version}") from None
        except KazooException as exc:
            raise self._zk_error(f"delete of ledger {ledger}", exc) from None

    def _children(self, path: str) -> list[str]:
        try:
            return self._retrying(f"listing {path}", lambda: self.zk.get_children(path))
        except NoNodeError:
            return []  # a range that was emptied and removed: nothing in it
        except KazooException as exc:
            raise self._zk_error(f"listing {path}", exc) from None

    def iterate_ledgers(self, scope_id: int | None = 0) -> Iterator[LedgerId]:
        scope_ids = [scope_id] if scope_id is not None else [0, *self.scopes()]
        for scope in scope_ids:
            for ledger_range in self.ledger_ranges(scope):
                yield from (LedgerId(scope, i) for i in sorted(ledger_range.ledgers))

    def ledger_ranges(self, scope_id: int = 0) -> Iterator[LedgerRange]:
        return LedgerRangeIterator(self._children, self.root, self.manager).ranges(scope_id)

    def scopes(self) -> list[int]:
        return LedgerRangeIterator(self._children, self.root, self.manager).scopes()

    def sync(self) -> None:
        try:
            self._retrying(f"sync of {self.root}", lambda: self.zk.sync(self.root))
        except KazooException as exc:
            raise self._zk_error(f"sync of {self.root}", exc) from None

    def watch_ledger(self, ledger, callback):
        stopped = threading.Event()

        def on_change(data, stat, event=None):
            if stopped.is_set():
                return False
            callback(None if data is None else Versioned(self._parse(ledger, data, ledger_metadata.parse), stat.version))
            return data is not None

        self.zk.DataWatch(self.ledger_path(ledger), on_change)
        return stopped.set

    # -- bookies -------------------------------------------------------------------------------------
    def _bookie_path(self, bookie_id: str, read_only: bool) -> str:
        return self._path(layout.AVAILABLE_NODE, *([layout.READONLY] if read_only else []), bookie_id)

    def register_bookie(self, bookie_id: str, read_only: bool, endpoints: tuple[Endpoint, ...]) -> None:
        data = BookieServiceInfo(tuple(endpoints), {"readOnly": str(read_only).lower()}).encode()
        path = self._bookie_path(bookie_id, read_only)

        def register() -> None:  # sent again after a lost reply: a node of our own session is replaced
            self._wait_stale_registration(path)
            self.zk.create(path, data, ephemeral=True, makepath=True)

        with self._registering:
            try:
                self._retrying(f"registration of bookie {bookie_id}", register)
            except NodeExistsError:
                raise BKZKException(f"bookie {bookie_id} is already registered at {path} by a live session: "
                                    "is another bookie running with the same id?") from None
            except KazooException as exc:
                raise self._zk_error(f"registration of bookie {bookie_id}", exc) from None
            self._registrations[(bookie_id, read_only)] = data
        log.info("registered bookie %s at %s", bookie_id, path)

    def _wait_stale_registration(self, path: str) -> None:
        """A node left by our previous (crashed) process goes when its session expires: wait for that."""
        deadline = time.monotonic() + 2 * self.zk_timeout_ms / 1000.0 + 5
        while time.monotonic() < deadline:
            stat = self.zk.exists(path)
            if stat is None or stat.ephemeralOwner == self.zk.client_id[0]:
                if stat is not None:
                    self.zk.delete(path)
                return
            log.info("waiting for the stale registration %s to expire", path)
            time.sleep(0.2)

    def bookie_service_info(self, bookie_id: str) -> BookieServiceInfo | None:
        """What the bookie registered (writable or read-only); None if it is not registered."""
        for read_only in (False, True):
            path = self._bookie_path(bookie_id, read_only)
            try:
                data, _ = self._retrying(f"read of bookie {bookie_id}'s registration", lambda: self.zk.get(path))
            except NoNodeError:
                continue
            except KazooException as exc:
                raise self._zk_error(f"read of bookie {bookie_id}'s registration", exc) from None
            return BookieServiceInfo.decode(data)
        return None

    def registration_session(self, bookie_id: str) -> int | None:
        """The ZooKeeper session that holds the bookie's registration (rw or ro), None if unregistered."""
        for read_only in (False, True):
            path = self._bookie_path(bookie_id, read_only)
            try:
                stat = self._retrying(f"read of bookie {bookie_id}'s registration", lambda: self.zk.exists(path))
            except KazooException as exc:
                raise self._zk_error(f"read of bookie {bookie_id}'s registration", exc) from None
            if stat is not None:
                return stat.ephemeralOwner
        return None

    def unregister_bookie(self, bookie_id: str, read_only: bool) -> None:
        path = self._bookie_path(bookie_id, read_only)
        with self._registering:
            self._registrations.pop((bookie_id, read_only), None)
            self._delete_if_there(f"unregistration of bookie {bookie_id}", path)

    def _on_state(self, state) -> None:
        # Ephemeral registrations vanish with an expired session (BookKeeper's ZKRegistrationManager tells its
        # BookieStateManager, which registers again): put them back once connected with the new session.
        if state == KazooState.CONNECTED and self._registrations:
            threading.Thread(target=self._reregister, name="ZKReregistration", daemon=True).start()

    def _reregister(self) -> None:
        """Create again every registration of this store that is missing (kept in ``_registrations``, with
        its endpoints); one already there from this session stays. A failure is logged: the next
        reconnection tries again."""
        with self._registering:
            for (bookie_id, read_only), data in list(self._registrations.items()):
                path = self._bookie_path(bookie_id, read_only)
                try:
                    self._retrying(f"re-registration of bookie {bookie_id}",
                                   lambda: self.zk.create(path, data, ephemeral=True, makepath=True))
                    log.info("re-registered bookie %s at %s with a new ZooKeeper session", bookie_id, path)
                except NodeExistsError:
                    pass
                except (KazooException, BKZKException):
                    log.exception("re-registration of bookie %s failed; trying again at the next reconnection",
                                  bookie_id)

    def bookies(self, read_only: bool = False) -> list[str]:
        children = self._children(self._path(layout.AVAILABLE_NODE, *([layout.READONLY] if read_only else [])))
        return sorted(c for c in children if c != layout.READONLY)

    def watch_bookies(self, callback) -> None:
        state = {"rw": [], "ro": []}

        def notify(key):
            def on_children(children):
                state[key] = sorted(c for c in children if c != layout.READONLY)
                callback(state["rw"], state["ro"])
            return on_children

        try:
            self.zk.ensure_path(self._path(layout.AVAILABLE_NODE, layout.READONLY))
            self.zk.ChildrenWatch(self._path(layout.AVAILABLE_NODE), notify("rw"))
            self.zk.ChildrenWatch(self._path(layout.AVAILABLE_NODE, layout.READONLY), notify("ro"))
        except KazooException as exc:
            raise self._zk_error("watching the bookies", exc) from None

    def cookie_location(self, bookie_id: str) -> str:
        return f"zookeeper {self._path(layout.COOKIE_NODE, bookie_id)}"

    def read_cookie(self, bookie_id: str) -> Versioned[bytes] | None:
        path = self._path(layout.COOKIE_NODE, bookie_id)
        try:
            data, stat = self._retrying(f"read of {path}", lambda: self.zk.get(path))
        except NoNodeError:
            return None
        except KazooException as exc:
            raise self._zk_error(f"read of {path}", exc) from None
        return Versioned(data, stat.version)

    def write_cookie(self, bookie_id: str, cookie: bytes, version: int | None) -> None:
        path = self._path(layout.COOKIE_NODE, bookie_id)
        try:
            if version is None:
                self.zk.create(path, cookie, makepath=True)
            else:
                self.zk.set(path, cookie, version=version)
        except (NodeExistsError, BadVersionError):
            raise BKMetadataVersionException(f"cookie of bookie {bookie_id} changed concurrently") from None
        except KazooException as exc:
            raise self._zk_error(f"write of {path}", exc) from None

    def delete_cookie(self, bookie_id: str) -> None:
        path = self._path(layout.COOKIE_NODE, bookie_id)
        self._delete_if_there(f"delete of {path}", path)

    # -- plain nodes ---------------------------------------------------------------------------------
    def read_node(self, path: str) -> Versioned[bytes] | None:
        full = self._node_path(path)
        try:
            data, stat = self._retrying(f"read of {full}", lambda: self.zk.get(full))
        except NoNodeError:
            return None
        except KazooException as exc:
            raise self._zk_error(f"read of {full}", exc) from None
        return Versioned(data, stat.version, stat.mtime)

    def write_node(self, path: str, data: bytes, version: int | None) -> Versioned[bytes]:
        full = self._path(path)
        try:
            if version is None:
                self.zk.create(full, data, makepath=True)
                return self.read_node(path) or Versioned(data, 0)
            if version >= 0:
                stat = self.zk.set(full, data, version=version)
                return Versioned(data, stat.version, stat.mtime)
            while True:  # any version: set, or create if missing (someone may create it meanwhile)
                try:
                    stat = self.zk.set(full, data)
                    return Versioned(data, stat.version, stat.mtime)
                except NoNodeError:
                    pass
                try:
                    self.zk.create(full, data, makepath=True)
                    return Versioned(data, 0)
                except NodeExistsError:
                    pass
        except (NodeExistsError, BadVersionError, NoNodeError):
            raise BKMetadataVersionException(f"{full} changed since version {version}") from None
        except KazooException as exc:
            raise self._zk_error(f"write of {full}", exc) from None

    def delete_node(self, path: str, version: int = -1) -> bool:
        full = self._path(path)
        try:
            self.zk.delete(full, version=version)
            return True
        except (NoNodeError, NotEmptyError):
            return False
        except BadVersionError:
            raise BKMetadataVersionException(f"{full} changed since version {version}") from None
        except KazooException as exc:
            raise self._zk_error(f"delete of {full}", exc) from None

    def delete_tree(self, path: str) -> None:
        full = self._node_path(path)
        self._delete_if_there(f"delete of {full}", full, recursive=True)

    def node_children(self, path: str, watch=None) -> list[str]:
        full = self._node_path(path)
        if watch is None:
            return sorted(self._children(full))
        with self._lock:  # one kazoo watcher per callable: kazoo keeps a set, so re-arming does not pile up
            watcher = self._watchers.setdefault(watch, lambda event: watch())
        try:
            return sorted(self._retrying(f"listing {full}", lambda: self.zk.get_children(full, watch=watcher)))
        except NoNodeError:
            return []
        except KazooException as exc:
            raise self._zk_error(f"listing {full}", exc) from None

    def create_node(self, path: str, data: bytes, ephemeral: bool = False, sequential: bool = False) -> str:
        full = self._path(path)
        try:
            created = self.zk.create(full, data, ephemeral=ephemeral, sequence=sequential, makepath=True)
        except NodeExistsError:
            raise BKMetadataVersionException(f"{full} exists already") from None
        except KazooException as exc:
            raise self._zk_error(f"create of {full}", exc) from None
        return created[len(self.root) + 1:]

    def watch_node(self, path, callback):
        stopped = threading.Event()

        def on_change(data, stat, event=None):
            if stopped.is_set():
                return False
            callback(None if stat is None else Versioned(data, stat.version, stat.mtime))
            return None

        try:
            self.zk.DataWatch(self._path(path), on_change)
        except KazooException as exc:
            raise self._zk_error(f"watching {self._path(path)}", exc) from None
        return stopped.set

    def close(self) -> None:
        self.zk.remove_listener(self._on_state)
        self.zk.stop()
        self.zk.close()
