"""Which ledgers are under-replicated, and who is re-replicating them (BookKeeper's
ZkLedgerUnderreplicationManager), over the MetadataStore.

BookKeeper's znodes and formats, so its BookieShell (``listunderreplicated``, ``lostbookierecoverydelay``,
``autorecovery``) reads what this writes (BookKeeper's ZkLedgerUnderreplicationManager layout):

- ``underreplication/LAYOUT``: TextFormat ``LedgerRereplicationLayoutFormat`` ``{type: "BASIC" version: 1}``;
- ``underreplication/ledgers/<%04x>/<%04x>/<%04x>/<%04x>/urL%010d``: persistent, TextFormat
  ``UnderreplicatedLedgerFormat`` (missing replicas, ctime); re-marking merges the replica lists by CAS;
- ``underreplication/locks/urL%010d``: ephemeral, TextFormat ``LockDataFormat`` (the worker's id);
- ``underreplication/disable`` (present: AutoRecovery disabled), ``lostBookieRecoveryDelay`` (seconds
  as text), ``checkallledgersctime`` / ``placementpolicycheckctime`` / ``replicascheckctime`` (binary).

Beyond BookKeeper: ``underreplication/state/urL%010d`` holds each marked ledger's state and reason as
JSON (``ReplicationState``), in a node of its own so that BookKeeper's parser of urL nodes never sees it;
it is deleted with the urL node. Ledgers of other scopes (BP-35, 128-bit ids) are marked in a tree of
their own, ``underreplication/scopedledgers/<seven levels of the qualified name>/urS<qualified name>``
(same record), locked at ``locks/urS…`` and described at ``state/urS…``: BookKeeper's tools never see them.
Ledgers are LedgerIds; an int is a scope-0 (BookKeeper) ledger id.

A worker's ZooKeeper round trips per ledger are about BookKeeper's: the inner levels of the tree it walks to
find work are cached until their watch fires (BookKeeper's SubTreeCache), the locks are listed only before it
waits, and while it holds a ledger's lock its state is written without checking the urL node first (only the
lock's holder deletes that).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator

from google.protobuf import text_format

from bookie.exceptions import BKMetadataVersionException
from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta.metadata_store import MetadataStore
from bookie.meta.sub_tree_cache import SubTreeCache
from bookie.proto.data_formats_pb2 import (CheckAllLedgersFormat, LedgerRereplicationLayoutFormat, LockDataFormat,
                                           PlacementPolicyCheckFormat, ReplicasCheckFormat,
                                           UnderreplicatedLedgerFormat)

log = logging.getLogger(__name__)

UR = layout.UNDER_REPLICATION_NODE
LAYOUT_PATH = f"{UR}/{layout.LAYOUT_ZNODE}"
LEDGERS_PATH = layout.UNDER_REPLICATED_LEDGERS
SCOPED_LEDGERS_PATH = layout.SCOPED_UNDER_REPLICATED_LEDGERS
LOCKS_PATH = f"{UR}/locks"
STATE_PATH = f"{UR}/state"
DISABLE_PATH = f"{UR}/disable"
LOST_BOOKIE_RECOVERY_DELAY_PATH = f"{UR}/lostBookieRecoveryDelay"
CHECK_ALL_LEDGERS_CTIME_PATH = f"{UR}/checkallledgersctime"
PLACEMENT_POLICY_CHECK_CTIME_PATH = f"{UR}/placementpolicycheckctime"
REPLICAS_CHECK_CTIME_PATH = f"{UR}/replicascheckctime"
UNDER_REPLICATION_LAYOUT_TYPE = "BASIC"  # ZkLedgerUnderreplicationManager.UNDER_REPLICATION_LAYOUT... type
UNDER_REPLICATION_LAYOUT_VERSION = 1

# States of an under-replicated ledger (ReplicationState.state).
WAITING_GRACE_PERIOD = "waiting-grace-period"
WAITING_RECOVERY_DELAY = "waiting-recovery-delay"
COPYING = "copying"
FAILED = "failed"
UNRECOVERABLE = "unrecoverable"
STATES = (WAITING_GRACE_PERIOD, WAITING_RECOVERY_DELAY, COPYING, FAILED, UNRECOVERABLE)


@dataclass(frozen=True)
class ReplicationState:
    """What is happening to one under-replicated ledger, for tools. ``details`` by state: copying
    {fragment, from, to, progress}; failed {next_try (ms since the epoch)}; unrecoverable {first, last}."""
    state: str
    reason: str = ""
    details: dict = field(default_factory=dict)
    by: str = ""  # the worker or auditor that wrote it
    mtime: int = field(default_factory=lambda: int(time.time() * 1000))

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"replication state {self.state!r} is not one of {', '.join(STATES)}")

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> "ReplicationState":
        return cls(**json.loads(data))


@dataclass(frozen=True)
class UnderreplicatedLedger:
    """One urL node (BookKeeper's UnderreplicatedLedger): the ledger, its missing replicas, when marked."""
    ledger: LedgerId
    replicas: tuple[str, ...]
    ctime: int  # ms since the epoch; -1 when the record has none (written by an old BookKeeper)
    version: int = -1


def encode_underreplicated(replicas, ctime: int) -> bytes:
    return text_format.MessageToString(UnderreplicatedLedgerFormat(replica=list(replicas), ctime=ctime)).encode()


def decode_underreplicated(data: bytes) -> UnderreplicatedLedgerFormat:
    return text_format.Parse(data.decode(), UnderreplicatedLedgerFormat())


def missing_replica_filter(including: str | None = None,
                           excluding: str | None = None) -> Callable[[tuple[str, ...]], bool]:
    """ListUnderReplicatedCommand's filter of marked ledgers by their missing replicas: those missing
    ``including`` and not ``excluding`` (None: no condition)."""
    def wanted(replicas: tuple[str, ...]) -> bool:
        return ((including is None or including in replicas)
                and (excluding is None or excluding not in replicas))
    return wanted


def state_path(ledger: LedgerId | int) -> str:
    return f"{STATE_PATH}/{layout.under_replication_name(ledger)}"


class LedgerUnderreplicationManager:
    """Marks, lists, locks and releases under-replicated ledgers; enable/disable; the recovery delay.

    One per process; ``worker_id`` goes into the locks it takes (LockDataFormat.bookieId). Locks are
    ephemeral nodes of the store's session: a worker that dies loses them with its session.
    """

    def __init__(self, store: MetadataStore, worker_id: str = ""):
        self.store = store
        self.worker_id = worker_id
        self._held: dict[LedgerId, int] = {}  # ledger -> version of its urL node when locked
        self._state_known: dict[LedgerId, bool] = {}  # held ledger -> whether its state node exists, once seen
        self._held_lock = threading.Lock()
        # Finding the next ledger lists the level that changed and the leaf only (BookKeeper's SubTreeCache).
        self._tree = SubTreeCache(store, self._on_change)
        self._changed = threading.Condition()
        self._changes = 0
        self._check_layout()

    def _check_layout(self) -> None:
        """Create LAYOUT (and the ledgers/locks nodes) if missing; refuse a layout we do not know."""
        wanted = LedgerRereplicationLayoutFormat(type=UNDER_REPLICATION_LAYOUT_TYPE,
                                                 version=UNDER_REPLICATION_LAYOUT_VERSION)
        found = self.store.read_node(LAYOUT_PATH)
        if found is None:
            try:
                self.store.create_node(LAYOUT_PATH, text_format.MessageToString(wanted).encode())
            except BKMetadataVersionException:
                found = self.store.read_node(LAYOUT_PATH)
        if found is not None:
            existing = text_format.Parse(found.value.decode(), LedgerRereplicationLayoutFormat())
            if existing != wanted:
                raise ValueError(f"{self.store.root}/{LAYOUT_PATH} is {text_format.MessageToString(existing, as_one_line=True)}, "
                                 f"not the supported {text_format.MessageToString(wanted, as_one_line=True)}")
        for path in (LEDGERS_PATH, SCOPED_LEDGERS_PATH, LOCKS_PATH):
            if self.store.read_node(path) is None:
                try:
                    self.store.create_node(path, b"")
                except BKMetadataVersionException:
                    pass

    # -- marking -------------------------------------------------------------------------------------
    def mark_ledger_underreplicated(self, ledger: LedgerId | int, missing_replicas) -> None:
        """Add ``missing_replicas`` to the ledger's urL node, creating it if needed (merge by CAS)."""
        path = layout.under_replicated_ledger_path(ledger)
        while True:
            found = self.store.read_node(path)
            if found is None:
                data = encode_underreplicated(sorted(set(missing_replicas)), int(time.time() * 1000))
                try:
                    self.store.create_node(path, data)
                    return
                except BKMetadataVersionException:
                    continue  # marked meanwhile by someone else: merge into theirs
            record = decode_underreplicated(found.value)
            merged = list(record.replica) + [r for r in sorted(set(missing_replicas)) if r not in record.replica]
            if merged == list(record.replica):
                return
            try:
                self.store.write_node(path, encode_underreplicated(merged, record.ctime), found.version)
                return
            except BKMetadataVersionException:
                continue  # changed or deleted meanwhile: read again

    def mark_ledger_replicated(self, ledger: LedgerId | int) -> None:
        """Delete the ledger's urL node (unless it was re-marked since we locked it: then the new
        marking stays for the next round), its state node and empty parents; release the lock."""
        ledger = LedgerId.coerce(ledger)
        path = layout.under_replicated_ledger_path(ledger)
        with self._held_lock:
            version = self._held.get(ledger, -1)
        try:
            if self.store.delete_node(path, version):
                self._delete_empty_parents(path)
            self.clear_state(ledger)
        except BKMetadataVersionException:
            log.info("ledger %s was marked under-replicated again while it was re-replicated; it stays marked",
                     ledger)
        self.release_underreplicated_ledger(ledger)

    def _delete_empty_parents(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        while parent not in (LEDGERS_PATH, SCOPED_LEDGERS_PATH) and self.store.delete_node(parent):
            parent = parent.rsplit("/", 1)[0]  # delete_node is False while the node has children

    def list_underreplicated(self, predicate: Callable[[tuple[str, ...]], bool] | None = None):
        """Every marked ledger whose replica list satisfies ``predicate`` (BookKeeper's
        listLedgersToRereplicate), in id order, as UnderreplicatedLedger records."""
        for node in self._url_nodes():
            found = self.store.read_node(node)
            if found is None:
                continue  # replicated meanwhile
            record = decode_underreplicated(found.value)
            replicas = tuple(record.replica)
            if predicate is None or predicate(replicas):
                yield UnderreplicatedLedger(layout.parse_under_replication_name(node.rsplit("/", 1)[1]), replicas,
                                            record.ctime if record.HasField("ctime") else -1, found.version)

    def _url_nodes(self, watch: Callable[[], None] | None = None, cached: bool = False) -> Iterator[str]:
        """Paths of the urL nodes (scope 0) then the urS nodes (other scopes), each in id order (the hex
        levels sort as the ids do), listed level by level as the caller goes on: a worker that locks the
        first ledger lists no further. ``cached``: the inner levels from the cache (the leaves, one per
        ledger or few, are listed each time with ``watch``)."""
        def walk(path: str, depth: int, levels: int, prefix: str) -> Iterator[str]:
            inner = cached and depth < levels
            for child in self._tree.children(path) if inner else self.store.node_children(path, watch):
                if depth < levels:
                    yield from walk(f"{path}/{child}", depth + 1, levels, prefix)
                elif child.startswith(prefix):
                    yield f"{path}/{child}"

        yield from walk(LEDGERS_PATH, 0, 4, layout.UNDER_REPLICATED_PREFIX)
        yield from walk(SCOPED_LEDGERS_PATH, 0, 7, layout.SCOPED_UNDER_REPLICATED_PREFIX)

    def get_underreplicated(self, ledger: LedgerId | int) -> UnderreplicatedLedger | None:
        ledger = LedgerId.coerce(ledger)
        found = self.store.read_node(layout.under_replicated_ledger_path(ledger))
        if found is None:
            return None
        record = decode_underreplicated(found.value)
        return UnderreplicatedLedger(ledger, tuple(record.replica),
                                     record.ctime if record.HasField("ctime") else -1, found.version)

    # -- state and reason (beyond BookKeeper) ---------------------------------------------------------
    def set_state(self, ledger: LedgerId | int, state: ReplicationState, require_marked: bool = True) -> None:
        """Record the ledger's state; with ``require_marked`` only while it is marked (a worker's state
        never outlives the urL node). The auditor's waiting-recovery-delay comes before the marking."""
        ledger = LedgerId.coerce(ledger)
        with self._held_lock:
            held = ledger in self._held  # under our lock the urL node stays: only its holder deletes it
            known = self._state_known.get(ledger)
        if require_marked and not held and self.store.read_node(layout.under_replicated_ledger_path(ledger)) is None:
            return
        path = state_path(ledger)
        if held and known is False:  # seen absent: one create, not a failed set first
            try:
                self.store.create_node(path, state.encode())
                self._know_state(ledger, True)
                return
            except BKMetadataVersionException:
                pass  # written meanwhile (the auditor's waiting-recovery-delay): overwrite it
        self.store.write_node(path, state.encode(), -1)
        self._know_state(ledger, True)

    def clear_state(self, ledger: LedgerId | int) -> None:
        """Forget the ledger's state (what it said no longer holds)."""
        ledger = LedgerId.coerce(ledger)
        self.store.delete_node(state_path(ledger))
        self._know_state(ledger, False)

    def get_state(self, ledger: LedgerId | int) -> ReplicationState | None:
        ledger = LedgerId.coerce(ledger)
        found = self.store.read_node(state_path(ledger))
        self._know_state(ledger, found is not None)
        return None if found is None else ReplicationState.decode(found.value)

    def _know_state(self, ledger: LedgerId, exists: bool) -> None:
        with self._held_lock:
            if ledger in self._held:
                self._state_known[ledger] = exists

    # -- locks (one worker per ledger) ----------------------------------------------------------------
    def _on_change(self) -> None:
        with self._changed:
            self._changes += 1
            self._changed.notify_all()

    def get_ledger_to_rereplicate(self, timeout: float | None = None,
                                  skip: Callable[[LedgerId], bool] | None = None) -> LedgerId | None:
        """Lock some marked ledger that no worker holds (ephemeral ``locks/urL…``) and return it;
        block until one can be locked (never while AutoRecovery is disabled), or ``timeout`` seconds (then
        None). ``skip`` leaves ledgers this worker does not want now (e.g. unrecoverable ones it reported
        already)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # Disabled (or disabled since the caller last looked): lock nothing until enabled, as BookKeeper's
            # waitIfLedgerReplicationDisabled before each attempt.
            if not self.is_ledger_replication_enabled():
                remaining = None if deadline is None else deadline - time.monotonic()
                if (remaining is not None and remaining <= 0) or not self.wait_until_enabled(remaining):
                    return None
            ledger = self._lock_first(skip)
            if ledger is not None:
                return ledger
            # Nothing to take: walk afresh before waiting, with watches on every level walked and on the locks,
            # so that a new marking or a released lock wakes us.
            self._tree.clear()  # a session that expired lost its watches: only a fresh walk is sure to be current
            with self._changed:
                seen = self._changes
            self.store.node_children(LOCKS_PATH, self._on_change)
            ledger = self._lock_first(skip)
            if ledger is not None:
                return ledger
            with self._changed:
                while self._changes == seen:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return None
                    self._changed.wait(remaining)

    def _lock_first(self, skip: Callable[[LedgerId], bool] | None) -> LedgerId | None:
        """Lock the first marked ledger (in id order) that ``skip`` leaves and no one holds."""
        for node in self._url_nodes(self._on_change, cached=True):
            ledger = layout.parse_under_replication_name(node.rsplit("/", 1)[1])
            if (skip is None or not skip(ledger)) and self._try_lock(ledger, node):
                if skip is not None and skip(ledger):
                    # Asked again under our lock: the worker that held it before may have recorded a verdict
                    # (e.g. unrecoverable) between our first look and its release.
                    self.release_underreplicated_ledger(ledger)
                    continue
                return ledger
        return None

    def _create_lock(self, ledger: LedgerId) -> bool:
        """Create the ledger's ephemeral lock node; False if someone (or this process) holds it."""
        with self._held_lock:
            if ledger in self._held:
                return False  # ours already (another thread of this process has it)
        try:
            self.store.create_node(layout.under_replication_lock_path(ledger),
                                   text_format.MessageToString(LockDataFormat(bookieId=self.worker_id)).encode(),
                                   ephemeral=True)
        except BKMetadataVersionException:
            return False  # another worker holds it
        return True

    def _try_lock(self, ledger: LedgerId, node: str) -> bool:
        if not self._create_lock(ledger):
            return False
        lock = layout.under_replication_lock_path(ledger)
        found = self.store.read_node(node)
        if found is None:  # replicated between our listing and our lock
            self.store.delete_node(lock)
            return False
        with self._held_lock:
            self._held[ledger] = found.version
        return True

    def acquire_underreplicated_ledger(self, ledger: LedgerId | int, timeout: float | None = 0.0) -> bool:
        """Take the ledger's lock whether or not it is marked (BookKeeper's acquireUnderreplicatedLedger):
        the GC's over-replication check and manual recovery hold it, so that no replication worker
        changes the ledger's ensembles meanwhile, and they none of a worker's. While another holds it,
        wait up to ``timeout`` seconds (None: for as long as it takes) for its release; False if it is
        still held then. ``release_underreplicated_ledger`` drops it."""
        ledger = LedgerId.coerce(ledger)
        lock = layout.under_replication_lock_path(ledger)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._create_lock(ledger):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            released = threading.Event()
            stop = self.store.watch_node(lock, lambda v: released.set() if v is None else None)
            try:
                if not released.wait(remaining):
                    return False
            finally:
                stop()
        found = self.store.read_node(layout.under_replicated_ledger_path(ledger))
        with self._held_lock:
            self._held[ledger] = -1 if found is None else found.version
        return True

    def release_underreplicated_ledger(self, ledger: LedgerId | int) -> None:
        """Drop our lock on the ledger (another worker may take it)."""
        ledger = LedgerId.coerce(ledger)
        with self._held_lock:
            held = self._held.pop(ledger, None)
            self._state_known.pop(ledger, None)
        if held is not None:
            self.store.delete_node(layout.under_replication_lock_path(ledger))

    def holds(self, ledger: LedgerId | int) -> bool:
        """Whether this manager holds the ledger's lock."""
        with self._held_lock:
            return LedgerId.coerce(ledger) in self._held

    def is_ledger_being_replicated(self, ledger: LedgerId | int) -> bool:
        return self.store.read_node(layout.under_replication_lock_path(ledger)) is not None

    def lock_holder(self, ledger: LedgerId | int) -> str | None:
        """The id in the ledger's lock (the worker re-replicating it), None if unlocked."""
        found = self.store.read_node(layout.under_replication_lock_path(ledger))
        if found is None:
            return None
        return text_format.Parse(found.value.decode(), LockDataFormat()).bookieId

    # -- enable / disable -----------------------------------------------------------------------------
    def disable_ledger_replication(self) -> None:
        try:
            self.store.create_node(DISABLE_PATH, b"")
        except BKMetadataVersionException:
            log.info("AutoRecovery is already disabled")

    def enable_ledger_replication(self) -> None:
        if not self.store.delete_node(DISABLE_PATH):
            log.info("AutoRecovery is already enabled")

    def is_ledger_replication_enabled(self) -> bool:
        return self.store.read_node(DISABLE_PATH) is None

    def wait_until_enabled(self, timeout: float | None = None) -> bool:
        """Block while AutoRecovery is disabled; False if still disabled after ``timeout`` seconds."""
        if self.is_ledger_replication_enabled():
            return True  # one read; a watch only when there is something to wait for
        enabled = threading.Event()
        stop = self.store.watch_node(DISABLE_PATH, lambda v: enabled.set() if v is None else enabled.clear())
        try:
            return enabled.wait(timeout)
        finally:
            stop()

    # -- lostBookieRecoveryDelay and the auditor's check times ----------------------------------------
    def initialize_lost_bookie_recovery_delay(self, delay_s: int) -> bool:
        """Write the configured delay unless one is stored already (the stored one wins); True if written."""
        try:
            self.store.create_node(LOST_BOOKIE_RECOVERY_DELAY_PATH, str(int(delay_s)).encode())
            return True
        except BKMetadataVersionException:
            return False

    def set_lost_bookie_recovery_delay(self, delay_s: int) -> None:
        """ValueError for a negative delay."""
        if delay_s < 0:
            raise ValueError(f"lostBookieRecoveryDelay must be >= 0 seconds, not {delay_s}")
        self.store.write_node(LOST_BOOKIE_RECOVERY_DELAY_PATH, str(int(delay_s)).encode(), -1)

    def trigger_audit(self, default_delay_s: int) -> None:
        """BookKeeperAdmin.triggerAudit: rewrite the delay (as it is, or ``default_delay_s`` if unset); the
        auditor watches it and audits at once."""
        self.set_lost_bookie_recovery_delay(self.get_lost_bookie_recovery_delay(default_delay_s))

    def get_lost_bookie_recovery_delay(self, default_s: int | None = None) -> int | None:
        """The stored delay; ``default_s`` when none is stored (no auditor has started on this cluster yet:
        the first one stores its configured lostBookieRecoveryDelay)."""
        found = self.store.read_node(LOST_BOOKIE_RECOVERY_DELAY_PATH)
        return default_s if found is None else int(found.value.decode().strip())

    def watch_lost_bookie_recovery_delay(self, callback: Callable[[int | None], None]) -> Callable[[], None]:
        """Call ``callback`` with the delay now and after each change; returns a function that stops it."""
        return self.store.watch_node(LOST_BOOKIE_RECOVERY_DELAY_PATH,
                                     lambda v: callback(None if v is None else int(v.value.decode().strip())))

    def _set_ctime(self, path: str, message) -> None:
        self.store.write_node(path, message.SerializeToString(), -1)

    def _get_ctime(self, path: str, message_type, field_name: str) -> int:
        found = self.store.read_node(path)
        if found is None:
            return -1
        return getattr(message_type.FromString(found.value), field_name)

    def set_check_all_ledgers_ctime(self, ctime_ms: int) -> None:
        self._set_ctime(CHECK_ALL_LEDGERS_CTIME_PATH, CheckAllLedgersFormat(checkAllLedgersCTime=ctime_ms))

    def get_check_all_ledgers_ctime(self) -> int:
        return self._get_ctime(CHECK_ALL_LEDGERS_CTIME_PATH, CheckAllLedgersFormat, "checkAllLedgersCTime")

    def set_placement_policy_check_ctime(self, ctime_ms: int) -> None:
        self._set_ctime(PLACEMENT_POLICY_CHECK_CTIME_PATH,
                        PlacementPolicyCheckFormat(placementPolicyCheckCTime=ctime_ms))

    def get_placement_policy_check_ctime(self) -> int:
        return self._get_ctime(PLACEMENT_POLICY_CHECK_CTIME_PATH, PlacementPolicyCheckFormat,
                               "placementPolicyCheckCTime")

    def set_replicas_check_ctime(self, ctime_ms: int) -> None:
        self._set_ctime(REPLICAS_CHECK_CTIME_PATH, ReplicasCheckFormat(replicasCheckCTime=ctime_ms))

    def get_replicas_check_ctime(self) -> int:
        return self._get_ctime(REPLICAS_CHECK_CTIME_PATH, ReplicasCheckFormat, "replicasCheckCTime")

    def held_ledgers(self) -> list[LedgerId]:
        with self._held_lock:
            return sorted(self._held)
