"""The connector's commit protocol on logs: a named, ordered list of ledgers kept in ZooKeeper, changed
only by compare-and-set. The record itself (JSON at ``<ledgers root>/logs/<name>``, absolute segment
numbers, truncation bookkeeping) is ``bookie.meta.log_metadata``, so that ``bk shell truncatelog`` can
use it without importing the connector; truncation is ``bookie.client.log_truncation``. Reads placed in a
log by offsets or by the commit times stamped here are spark_bookkeeper/log_offsets.py.

A batch's ledgers are appended in ONE znode ``setData`` with the expected version, so concurrent
writers (and truncations) never lose each other's changes (the loser re-reads and retries). An
overwrite drops every segment and appends the batch in the same way; retention at commit
(``retentionSegments``, ``retentionMs``) drops first segments in that same CAS. Dropped segments wait
in ``truncated`` until their ledgers are deleted. One znode holds about 8,000 ledgers (ZooKeeper's
1 MB node limit).

What the record keeps, and why it stays bounded:

- ``commits``: the last batch id of each *replayable* writer (a streaming query, a ``foreachBatch``
  pipeline, or a write given ``writerId``), so a replayed batch (batch id not above the last committed)
  adds nothing. One entry per such writer, kept for good: that is what exactly-once needs.
- ``recent``: the ids of the last ``RECENT_COMMITS_KEPT`` commit attempts. A plain ``df.write`` is
  never replayed by Spark (its writer id is fresh), so it is recorded only here, for as long as an
  in-doubt commit needs to find itself (below).
- ``swept``: ledgers a sweep is deleting (``claim_for_sweep`` / ``release_swept``).
- ``truncated``: dropped segments whose ledgers are not yet deleted, and the last deleted ones (bounded
  in ``bookie.meta.log_metadata``).

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

import time
import uuid
from dataclasses import replace
from urllib.parse import quote, unquote

from bookie.exceptions import (BKException, BKMetadataVersionException, BKNoSuchLedgerExistsException,
                               BKZKConnectionLossException)
from bookie.ledger_id import LedgerId
from bookie.meta.log_metadata import (COMMIT_RESOLVE_SECONDS, Log, LogNotFoundException, LogRetention, LogSegment,
                                      LogUnavailableException, list_logs, log_node, log_path, read_log,
                                      read_log_retrying, update_log, write_log)
from bookie.meta.metadata_store import MetadataStore, Versioned

__all__ = ["COMMIT_RESOLVE_SECONDS", "Log", "LogCommitException", "LogCommitInDoubtException", "LogNotFoundException",
           "LogRetention", "LogSegment", "LogUnavailableException", "claim_for_sweep", "commit_batch",
           "finish_running", "list_logs", "log_path", "read_log", "read_log_retrying", "release_swept",
           "running_writers", "touch_running"]

RUNNING_NODE = "log-writers"
RECENT_COMMITS_KEPT = 100  # commit attempts remembered for in-doubt resolution (~35 bytes each)


class LogCommitException(BKException, RuntimeError):
    """The batch is not committed (the log is unchanged); running it again is safe."""


class LogCommitInDoubtException(LogUnavailableException):
    """Whether the batch is in the log could not be learnt: nothing may be deleted because of it."""


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
                 overwrite: bool = False, replayable: bool = True, retention: LogRetention | None = None,
                 now_ms: int | None = None) -> tuple[bool, Log]:
    """Add (or with ``overwrite`` put in place of all) ``segments`` as ``writer``'s batch ``batch``, stamped
    with the commit time (``now_ms``, default the clock at each CAS attempt), in one compare-and-set that
    also drops what ``retention`` selects (never the batch's own segments).

    Returns (applied, the log as stored). Replaced or dropped segments move to the log's ``truncated``
    list, deletion pending (``bookie.client.log_truncation.delete_truncated`` deletes them). Not applied
    when the log shows this writer's batch committed before (``replayable`` writers only: a plain write's
    writer id is fresh and never replayed). Raises LogCommitException (log unchanged) or
    LogCommitInDoubtException (outcome unknown).
    """
    attempt = uuid.uuid4().hex  # found in ``recent`` by a re-read if a write whose reply was lost landed
    what = f"batch {batch} of writer {writer}"

    def needs_update(log: Log) -> bool:
        return attempt not in log.recent and not (replayable and log.commits.get(writer, -1) >= batch)

    def add_batch(log: Log) -> Log:
        _check_present(store, log, segments, what)
        committed = int(time.time() * 1000) if now_ms is None else now_ms
        if overwrite:
            log.drop_first(len(log.segments))
        log.segments = log.segments + [replace(s, committed_ms=committed) for s in segments]
        if retention is not None:
            log.drop_first(replace(retention, now_ms=committed, keep_last=len(segments)).drop_count(log))
        if replayable:
            log.commits[writer] = batch
        log.recent = (log.recent + [attempt])[-RECENT_COMMITS_KEPT:]
        return log

    try:
        log = update_log(store, name, needs_update, add_batch)
    except BKZKConnectionLossException as exc:
        raise LogCommitInDoubtException(
            f"{what} is in doubt: its commit to log {name!r} may or may not have been applied, and the log could "
            f"not be read back within {COMMIT_RESOLVE_SECONDS:.0f} s ({exc}). Its ledgers are kept; read the log "
            "before running the batch again") from None
    return attempt in log.recent, log


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

    return list(update_log(store, name, lambda log: bool(doomed(log)), mark).swept)


def release_swept(store: MetadataStore, name: str, deleted: list[LedgerId]) -> None:
    """Unmark ``deleted`` (now gone for good); remove the log again if a sweep alone created it."""
    gone = set(deleted)

    def unmark(log: Log) -> Log:
        log.swept = [lid for lid in log.swept if lid not in gone]
        return log

    def write_or_remove(store: MetadataStore, log: Log, version: int) -> Versioned[Log]:
        if not log.empty():
            return write_log(store, log, version)
        if not store.delete_node(log_node(log.name), version):
            raise BKMetadataVersionException(f"log {log.name!r} is gone")  # re-read: nothing left to release
        return Versioned(Log(log.name), -1)

    update_log(store, name, lambda log: log.version >= 0 and bool(gone & set(log.swept)), unmark, write_or_remove)
