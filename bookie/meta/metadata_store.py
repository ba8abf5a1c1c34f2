"""The metadata interface: everything the bookie and the client ask of the metadata service.

``ZKMetadataStore`` (bookie.meta.zk_metadata_store) implements it on ZooKeeper; another backend (etcd,
say) implements the same methods and nothing above this module changes. Errors are BKExceptions:
BKNoSuchLedgerExistsOnMetadataServerException, BKMetadataVersionException (CAS conflict),
BKLedgerExistException, BKZKException / BKMetaStoreException for everything else.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Iterator, TypeVar

from bookie.exceptions import BKNoSuchLedgerExistsOnMetadataServerException
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BookieServiceInfo, Endpoint
from bookie.meta.ledger_metadata import LedgerAccess, LedgerMetadata

T = TypeVar("T")


@dataclass(frozen=True)
class Versioned(Generic[T]):
    value: T
    version: int
    mtime: int = 0  # when it last changed (ms since the epoch), where the store knows it


@dataclass(frozen=True)
class LedgerRange:
    """One listing of the ledger tree (BookKeeper's LedgerRange): the ledgers of ``scope_id`` whose ids
    fall in ``[start, end]`` are exactly ``ledgers`` at the time of the listing."""
    scope_id: int
    start: int
    end: int
    ledgers: frozenset[int]


class MetadataStore(abc.ABC):
    root: str  # where the cluster's metadata lives (``/ledgers``), for messages
    # -- cluster -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def init_new_cluster(self) -> bool:
        """Create the cluster's metadata (root, LAYOUT, INSTANCEID, available, readonly); False if it exists."""

    @abc.abstractmethod
    def instance_id(self) -> str:
        """The cluster's instance id (BKZKException if the cluster was never initialised)."""

    @abc.abstractmethod
    def format_metadata(self) -> None:
        """BookKeeperAdmin.format's metadata part (the ledger manager's format, then the registration manager's):
        delete every ledger, ledger id generator, cookie, under-replication mark and lock, and the connector's
        logs; write a new LAYOUT and INSTANCEID, creating the root, available and readonly if missing.
        Registrations and the auditor's settings stay."""

    # -- ledgers -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def generate_ledger_id(self) -> int: ...

    @abc.abstractmethod
    def create_ledger(self, ledger: LedgerId, metadata: LedgerMetadata) -> Versioned[LedgerMetadata]: ...

    @abc.abstractmethod
    def read_ledger(self, ledger: LedgerId) -> Versioned[LedgerMetadata]: ...

    @abc.abstractmethod
    def write_ledger(self, ledger: LedgerId, metadata: LedgerMetadata, version: int) -> Versioned[LedgerMetadata]:
        """Compare-and-set: replaces the metadata only if it is still at ``version``."""

    @abc.abstractmethod
    def delete_ledger(self, ledger: LedgerId, version: int = -1) -> None: ...

    @abc.abstractmethod
    def iterate_ledgers(self, scope_id: int | None = 0) -> Iterator[LedgerId]:
        """Every ledger of a scope (None: all scopes), in id order within each range.

        Safe for GC: any error while listing raises; a listing is never silently cut short.
        """

    @abc.abstractmethod
    def ledger_ranges(self, scope_id: int = 0) -> Iterator[LedgerRange]:
        """The ranges of a scope's ledger tree in increasing id order (BookKeeper's LedgerRangeIterator),
        one listing each. Ids between two ranges, or past the last, belong to no ledger of the scope.
        Any error raises: a range is never skipped or cut short."""

    @abc.abstractmethod
    def scopes(self) -> list[int]:
        """The scopes (other than 0) that have ledgers, or had some."""

    @abc.abstractmethod
    def sync(self) -> None:
        """Make the reads that follow see every change completed before this call (ZooKeeper's sync)."""

    def ledgers_with_metadata(self, scope_id: int | None = 0) -> Iterator[tuple[LedgerId, LedgerMetadata]]:
        """Every ledger of a scope (None: all scopes) with its metadata, as ``iterate_ledgers`` lists them; a
        ledger deleted between the listing and its read is left out (what the auditor, the admin and the
        metadata tables walk)."""
        for ledger, versioned in self.read_ledgers(self.iterate_ledgers(scope_id)):
            if versioned is not None:
                yield ledger, versioned.value

    def read_ledgers(self, ledgers: Iterable[LedgerId]) -> Iterator[tuple[LedgerId, Versioned[LedgerMetadata] | None]]:
        """Each ledger with its metadata (None: it does not exist), in the order given. A store that can
        have many reads in flight overrides this (ZKMetadataStore pipelines them)."""
        for ledger in ledgers:
            try:
                yield ledger, self.read_ledger(ledger)
            except BKNoSuchLedgerExistsOnMetadataServerException:
                yield ledger, None

    def read_ledger_access(self, ledgers: Iterable[LedgerId]) -> Iterator[tuple[LedgerId, Versioned[LedgerAccess] | None]]:
        """``read_ledgers``, each ledger's password and digest type only: what a check of many ledgers needs
        (ZKMetadataStore decodes no more)."""
        for ledger, versioned in self.read_ledgers(ledgers):
            yield ledger, None if versioned is None else Versioned(
                LedgerAccess(versioned.value.password, versioned.value.digest_type), versioned.version)

    @abc.abstractmethod
    def watch_ledger(self, ledger: LedgerId, callback: Callable[[Versioned[LedgerMetadata] | None], None]) -> Callable[[], None]:
        """Call ``callback`` with each new version (None once deleted); returns a function that stops it."""

    # -- bookies -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def register_bookie(self, bookie_id: str, read_only: bool, endpoints: tuple[Endpoint, ...]) -> None: ...

    @abc.abstractmethod
    def bookie_service_info(self, bookie_id: str) -> BookieServiceInfo | None:
        """What the bookie registered (its endpoints); None if it is not registered."""

    @abc.abstractmethod
    def unregister_bookie(self, bookie_id: str, read_only: bool) -> None: ...

    @abc.abstractmethod
    def bookies(self, read_only: bool = False) -> list[str]: ...

    @abc.abstractmethod
    def watch_bookies(self, callback: Callable[[list[str], list[str]], None]) -> None:
        """Call ``callback(writable, read_only)`` now and whenever either set changes."""

    # Cookies are opaque versioned bytes here; the bookie's cookie.py encodes them (RegistrationManager).
    @abc.abstractmethod
    def cookie_location(self, bookie_id: str) -> str:
        """Where the bookie's cookie is kept, for messages."""

    @abc.abstractmethod
    def read_cookie(self, bookie_id: str) -> Versioned[bytes] | None: ...

    @abc.abstractmethod
    def write_cookie(self, bookie_id: str, cookie: bytes, version: int | None) -> None:
        """Create (``version`` None) or CAS-update a bookie's cookie."""

    @abc.abstractmethod
    def delete_cookie(self, bookie_id: str) -> None: ...

    # -- plain nodes, for the layers above (e.g. the Spark connector's logs) ---------------------------
    # Paths are relative to the root ("" is the root itself for read_node, node_children and delete_tree).
    # Conflicts are BKMetadataVersionException; a lost connection is BKZKConnectionLossException (the change
    # may or may not have been applied).
    @abc.abstractmethod
    def read_node(self, path: str) -> Versioned[bytes] | None:
        """The node's data, version and mtime; None if there is no such node."""

    @abc.abstractmethod
    def write_node(self, path: str, data: bytes, version: int | None) -> Versioned[bytes]:
        """Create (``version`` None; parents too), compare-and-set (``version`` >= 0; a node deleted
        meanwhile is a conflict too), or set whatever its version, creating it if missing (``version`` -1)."""

    @abc.abstractmethod
    def delete_node(self, path: str, version: int = -1) -> bool:
        """Delete (at ``version``, or any with -1); False if it was not there or still has children."""

    @abc.abstractmethod
    def delete_tree(self, path: str) -> None:
        """Delete the node and everything under it, if it is there ("" is the root: the whole cluster)."""

    @abc.abstractmethod
    def node_children(self, path: str, watch: Callable[[], None] | None = None) -> list[str]:
        """Names of the node's children, sorted; [] if there is no such node. ``watch`` (if given, and
        the node exists) is called once, on the next change of the children or of the node."""

    @abc.abstractmethod
    def create_node(self, path: str, data: bytes, ephemeral: bool = False, sequential: bool = False) -> str:
        """Create a node (parents too) and return its path (relative to the root; a sequential node's
        name ends with its sequence number). An ephemeral node lives as long as this store's session.
        BKMetadataVersionException if it exists already."""

    @abc.abstractmethod
    def watch_node(self, path: str, callback: Callable[[Versioned[bytes] | None], None]) -> Callable[[], None]:
        """Call ``callback`` with the node now and with each change (None while it does not exist);
        returns a function that stops it."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
