"""Logs: a named, ordered list of ledgers kept in ZooKeeper, changed only by compare-and-set.

``<ledgers root>/logs/<name>`` holds JSON::

    {"ledgers": [{"ledger": 12, "scope": 0, "entries": 100, "bytes": 102400,
                  "writer": "9f1c...", "batch": 3}, ...],
     "commits": {"<writer id>": <last committed batch id>},
     "recent": ["<commit attempt id>", ...],
     "swept": [[<scope>, <ledger>], ...]}

A batch's ledgers are appended in ONE znode ``setData`` with the expected version, so concurrent
writers never lose each other's ledgers (the loser re-reads and retries). An overwrite swaps the
whole list in the same way. The ledger ``segment`` of a read is its position in ``ledgers``. One
znode holds about 8,000 ledgers (ZooKeeper's 1 MB node limit).

What the record keeps, and why it stays bounded:

- ``commits``: the last batch id of each *replayable* writer (a streaming query, a ``foreachBatch``
  pipeline, or a write given ``writerId``), so a replayed batch (batch id not above the last committed)
  adds nothing. One entry per such writer, kept for good: that is what exactly-once needs.
- ``recent``: the ids of the last ``RECENT_COMMITS_KEPT`` commit attempts. A plain ``df.write`` is
  never replayed by Spark (its writer id is fresh), so it is recorded only here, for as long as an
  in-doubt commit needs to find itself (below).
- ``swept``: ledgers a sweep is deleting (``claim_for_sweep`` / ``release_swept``).

A commit in doubt: ZooKeeper may apply a ``setData``/``create`` whose reply is lost (kazoo
``ConnectionLoss``, ``OperationTimeoutError``, ``SessionExpiredError``). ``commit_batch`` then reads
the log back (retrying until ``COMMIT_RESOLVE_SECONDS``): its attempt id in ``recent`` means it
landed; otherwise it did not, and the compare-and-set is tried again. If ZooKeeper cannot be read in
that time, ``LogCommitInDoubtException`` is raised and nothing may be deleted on the strength of it.

Sweep and commit exclude each other through the log znode's version:

1. The sweep picks candidates (ledgers tagged for the log, old, of no running writer), reads the log
   at version v, drops candidates the log names, and writes them into ``swept`` by compare-and-set at
   v. Only then does it delete them; afterwards it removes them from ``swept`` (again by CAS).
2. A commit reads the log at version v', fails if ``swept`` holds one of its ledgers, then checks
   that each of its ledgers exists and is closed, then compare-and-sets at v'.

If the sweep's CAS lands first, the commit's CAS at an older version fails and its re-read sees the
mark (deletion in progress) or, once released, the ledger gone (deletion is complete before the
release, and the commit checks existence after reading the version it CASes at). If the commit's CAS
lands first, the sweep's CAS fails and its re-read finds the ledgers named by the log. Either way a
log never names a swept ledger. A sweep that dies between mark and release leaves marks that the
next sweep completes.

Running writes: each task of a write touches ``<ledgers root>/log-writers/<log>/<writer>`` before it
creates its ledger and while it writes (``touch_running``); the commit or abort removes it. A sweep
leaves alone the ledgers of a writer touched within its ``older_than``, so a long job is not swept
under a commit that the protocol above would then have to fail.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from bookie.exceptions import (BKException, BKMetadataVersionException, BKNoSuchLedgerExistsException,
                               BKZKConnectionLossException)
from bookie.ledger_id import LedgerId
from bookie.meta.metadata_store import MetadataStore, Versioned
from bookie.meta.metadata_update_loop import update_metadata
from bookie.meta.retry import retry_on_connection_loss

LOGS_NODE = "logs"
RUNNING_NODE = "log-writers"
RECENT_COMMITS_KEPT = 100  # commit attempts remembered for in-doubt resolution (~35 bytes each)
COMMIT_RESOLVE_SECONDS = 60.0  # how long a commit in doubt keeps trying to read the log back


class LogNotFoundException(BKException, LookupError):
    pass


class LogCommitException(BKException, RuntimeError):
    """The batch is not committed (the log is unchanged); running it again is safe."""


class LogUnavailableException(BKException, RuntimeError):
    """ZooKeeper did not answer a read of the log in time ("could not read", not "no such log")."""


class LogCommitInDoubtException(LogUnavailableException):
    """Whether the batch is in the log could not be learnt: nothing may be deleted because of it."""


@dataclass
class LogSegment:
    ledger: LedgerId
    entries: int
    bytes: int
    writer: str
    batch: int

    def to_json(self) -> dict:
        return {"ledger": self.ledger.ledger_id, "scope": self.ledger.scope_id, "entries": self.entries,
                "bytes": self.bytes, "writer": self.writer, "batch": self.batch}

    @classmethod
    def from_json(cls, d: dict) -> "LogSegment":
        return cls(LedgerId(d.get("scope", 0), d["ledger"]), d["entries"], d["bytes"], d["writer"], d["batch"])


@dataclass
class Log:
    name: str
    segments: list[LogSegment] = field(default_factory=list)
    commits: dict[str, int] = field(default_factory=dict)
    recent: list[str] = field(default_factory=list)
    swept: list[LedgerId] = field(default_factory=list)
    version: int = -1  # znode version; -1 = not created yet

    def encode(self) -> bytes:
        return json.dumps({"ledgers": [s.to_json() for s in self.segments], "commits": self.commits,
                           "recent": self.recent, "swept": [list(lid) for lid in self.swept]},
                          sort_keys=True).encode()

    def ledgers(self) -> set[LedgerId]:
        return {s.ledger for s in self.segments}

    def empty(self) -> bool:
        """Nothing a user wrote: only a sweep's bookkeeping."""
        return not (self.segments or self.commits or self.recent or self.swept)


def log_path(store: MetadataStore, name: str) -> str:
    """The log's znode, for messages."""
    return f"{store.root}/{_log_node(name)}"


def _log_node(name: str) -> str:
    return f"{LOGS_NODE}/{name}"


def read_log(store: MetadataStore, name: str, missing_ok: bool = False) -> Log:
    found = store.read_node(_log_node(name))
    if found is None:
        if missing_ok:
            return Log(name)
        raise LogNotFoundException(f"log {name!r} does not exist at {log_path(store, name)}")
    d = json.loads(found.value)
    return Log(name, [LogSegment.from_json(s) for s in d["ledgers"]], d.get("commits", {}), d.get("recent", []),
               [LedgerId(*lid) for lid in d.get("swept", [])], found.version)


def _read_versioned(store: MetadataStore, name: str) -> Versioned[Log]:
    log = read_log(store, name, missing_ok=True)
    return Versioned(log, log.version)


def read_log_retrying(store: MetadataStore, name: str, seconds: float | None = None) -> Log:
    """``read_log`` (missing = empty) through a lost connection; LogUnavailableException after ``seconds``."""
    try:
        return retry_on_connection_loss(lambda: read_log(store, name, missing_ok=True),
                                        COMMIT_RESOLVE_SECONDS if seconds is None else seconds)
    except BKZKConnectionLossException as exc:
        raise LogUnavailableException(f"log {name!r} could not be read from ZooKeeper ({exc})") from None


def list_logs(store: MetadataStore) -> list[str]:
    return store.node_children(LOGS_NODE)


def _write(store: MetadataStore, log: Log, version: int) -> Versioned[Log]:
    """Compare-and-set ``log`` at ``version`` (create when it did not exist: version -1)."""
    written = store.write_node(_log_node(log.name), log.encode(), None if version < 0 else version)
    log.version = written.version
    return Versioned(log, written.version)


def _update(store: MetadataStore, name: str, needs_update, transform, write=_write) -> Log:
    """One MetadataUpdateLoop over the log (bookie.meta.metadata_update_loop)."""
    log = read_log_retrying(store, name)
    return update_metadata(lambda: _read_versioned(store, name), lambda log, version: write(store, log, version),
                           Versioned(log, log.version), needs_update, transform, COMMIT_RESOLVE_SECONDS,
                           f"log {name!r}").value


def _check_present(store: MetadataStore, log: Log, segments: list[LogSegment], what: str) -> None:
    """Fail the batch if a sweep marked or deleted one of its ledgers, or one is still open."""
    swept = set(log.swept)
    problems = [f"{s.ledger} is being deleted by sweep_uncommitted" for s in segments if s.ledger in swept]
    for s in segments:
        if s.ledger in swept:
            continue
        try:
            if not store.read_ledger(s.ledger).value.is_closed:
                problems.append(f"{s.ledger} is not closed")
        except BKNoSuchLedgerExistsException:
            problems.append(f"{s.ledger} no longer exists (deleted by sweep_uncommitted or by hand)")
    if problems:
        raise LogCommitException(f"{what} is not committed to log {log.name!r}: ledger {'; ledger '.join(problems)}. "
                                 "The log is unchanged; run the batch again")


def commit_batch(store: MetadataStore, name: str, writer: str, batch: int, segments: list[LogSegment],
                 overwrite: bool = False, replayable: bool = True) -> tuple[bool, list[LogSegment]]:
    """Add (or with ``overwrite`` put in place of all) ``segments`` as ``writer``'s batch ``batch``.

    Returns (applied, replaced segments). Not applied when the log shows this writer's batch committed
    before (``replayable`` writers only: a plain write's writer id is fresh and never replayed).
    Raises LogCommitException (log unchanged) or LogCommitInDoubtException (outcome unknown).
    """
    attempt = uuid.uuid4().hex  # found in ``recent`` by a re-read if a write whose reply was lost landed
    what = f"batch {batch} of writer {writer}"
    replaced: list[LogSegment] = []

    def needs_update(log: Log) -> bool:
        return attempt not in log.recent and not (replayable and log.commits.get(writer, -1) >= batch)

    def add_batch(log: Log) -> Log:
        nonlocal replaced
        _check_present(store, log, segments, what)
        replaced = log.segments if overwrite else []
        log.segments = list(segments) if overwrite else log.segments + list(segments)
        if replayable:
            log.commits[writer] = batch
        log.recent = (log.recent + [attempt])[-RECENT_COMMITS_KEPT:]
        return log

    try:
        log = _update(store, name, needs_update, add_batch)
    except BKZKConnectionLossException as exc:
        raise LogCommitInDoubtException(
            f"{what} is in doubt: its commit to log {name!r} may or may not have been applied, and the log could "
            f"not be read back within {COMMIT_RESOLVE_SECONDS:.0f} s ({exc}). Its ledgers are kept; read the log "
            "before running the batch again") from None
    if attempt in log.recent:
        return True, replaced
    return False, []


# -- running writes and sweeps ----------------------------------------------------------------------
def _running_node(name: str, writer: str | None = None) -> str:
    return f"{RUNNING_NODE}/{name}" + ("" if writer is None else f"/{quote(writer, safe='')}")


def touch_running(store: MetadataStore, name: str, writer: str) -> None:
    """Mark ``writer`` as writing to ``name`` now (its znode's mtime is the heartbeat)."""
    store.write_node(_running_node(name, writer), b"", -1)


def finish_running(store: MetadataStore, name: str, writer: str) -> None:
    store.delete_node(_running_node(name, writer))


def running_writers(store: MetadataStore, name: str, older_than: float) -> set[str]:
    """Writers of ``name`` that touched their marker within ``older_than`` seconds; staler markers (a
    driver that died mid-write) are removed."""
    cutoff = (time.time() - older_than) * 1000
    running = set()
    for child in store.node_children(_running_node(name)):
        marker = store.read_node(f"{_running_node(name)}/{child}")
        if marker is None:
            continue
        if marker.mtime > cutoff:
            running.add(unquote(child))
            continue
        try:
            store.delete_node(f"{_running_node(name)}/{child}", marker.version)
        except BKMetadataVersionException:
            pass  # touched again just now
    store.delete_node(_running_node(name))  # only once it has no markers left
    return running


def claim_for_sweep(store: MetadataStore, name: str, candidates: list[LedgerId]) -> list[LedgerId]:
    """Mark in the log the ``candidates`` it does not name, by compare-and-set; returns every marked
    ledger (also those an earlier sweep marked and did not finish)."""
    def doomed(log: Log) -> list[LedgerId]:
        listed = log.ledgers()
        return [c for c in candidates if c not in listed and c not in log.swept]

    def mark(log: Log) -> Log:
        log.swept = log.swept + doomed(log)
        return log

    return list(_update(store, name, lambda log: bool(doomed(log)), mark).swept)


def release_swept(store: MetadataStore, name: str, deleted: list[LedgerId]) -> None:
    """Unmark ``deleted`` (now gone for good); remove the log again if a sweep alone created it."""
    gone = set(deleted)

    def unmark(log: Log) -> Log:
        log.swept = [lid for lid in log.swept if lid not in gone]
        return log

    def write_or_remove(store: MetadataStore, log: Log, version: int) -> Versioned[Log]:
        if not log.empty():
            return _write(store, log, version)
        if not store.delete_node(_log_node(log.name), version):
            raise BKMetadataVersionException(f"log {log.name!r} is gone")  # re-read: nothing left to release
        return Versioned(Log(log.name), -1)

    _update(store, name, lambda log: log.version >= 0 and bool(gone & set(log.swept)), unmark, write_or_remove)
