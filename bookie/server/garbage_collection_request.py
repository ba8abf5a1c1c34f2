"""The GarbageCollection request (BookKeeper's GC admin over HTTP: PUT /api/v1/bookie/gc, GET gc_details,
suspend/resume compaction; here one request, so executors and ``bk shell gc`` ask bookies directly): force a
pass, suspend or resume a compaction, or report the GarbageCollectorThread's status, with each entry log's
ledgers on request (the audit tables)."""
from __future__ import annotations

import os

from bookie.exceptions import BKException
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from bookie.server.garbage_collection_status import GarbageCollectionStatus


def handle(bookie, request: pb.GarbageCollectionRequest) -> pb.GarbageCollectionResponse:
    """Answer ``request`` for ``bookie`` (a running Bookie)."""
    gc = bookie.garbage_collector
    Action = pb.GarbageCollectionRequest
    if gc is None:  # a bookie started without a metadata store cannot tell deleted ledgers
        return pb.GarbageCollectionResponse(status=status.EIO, message="this bookie runs no garbage collector "
                                            "(it has no metadata store to compare its ledgers with)")
    forced = 0
    if request.action == Action.FORCE:
        forced = gc.force_gc(major=request.major, minor=request.minor)
    elif request.action in (Action.SUSPEND, Action.RESUME):
        if not (request.major or request.minor):
            return pb.GarbageCollectionResponse(status=status.EBADREQ, message=(
                f"{Action.Action.Name(request.action)} names no compaction: set major, minor or both"))
        suspend = request.action == Action.SUSPEND
        if request.major:
            gc.suspend_major_gc() if suspend else gc.resume_major_gc()
        if request.minor:
            gc.suspend_minor_gc() if suspend else gc.resume_minor_gc()
    elif request.action != Action.STATUS:
        return pb.GarbageCollectionResponse(status=status.EBADREQ, message=(
            f"unknown action {request.action}; allowed: {', '.join(Action.Action.keys())}"))
    response = garbage_collection_response(gc.status(), forced, request.ledgerDetails)
    response.minorCompactionThreshold = gc.conf["minorCompactionThreshold"]
    response.majorCompactionThreshold = gc.conf["majorCompactionThreshold"]
    response.gcWaitTimeMs = gc.conf["gcWaitTime"]
    if request.ledgerDetails:
        logger = bookie.storage.entry_logger
        log_id, size, ledgers = logger.current_log_usage()
        response.currentEntryLog.CopyFrom(_usage_of_map(log_id, size, ledgers))
        response.entryLogs.extend(_finished_since_last_pass(logger, response))
    return response


def _usage_of_map(log_id: int, size: int, ledgers: dict[LedgerId, int]) -> pb.EntryLogUsage:
    return pb.EntryLogUsage(entryLogId=log_id, totalSize=size, remainingSize=sum(ledgers.values()),
                            ledgerCount=len(ledgers), ledgers=[_ledger_bytes(ledger, n) for ledger, n in ledgers.items()])


def _finished_since_last_pass(logger, response: pb.GarbageCollectionResponse) -> list[pb.EntryLogUsage]:
    """Logs finished after the garbage collector's last pass (it has not described them yet), from their ledgers
    maps: without them, the bytes of a ledger whose log rolled since that pass would be in no log at all."""
    known = {u.entryLogId for u in response.entryLogs} | {k.entryLogId for k in response.skipped}
    out = []
    for log_id in logger.finished_log_ids():
        if log_id in known:
            continue
        path = logger.path_of(log_id)
        try:
            ledgers = logger.read_ledgers_map(log_id)
            size = os.path.getsize(path) if path is not None else 0
        except (OSError, BKException):
            continue  # removed meanwhile, or unreadable: the next pass describes or skips it
        if ledgers is not None:
            out.append(_usage_of_map(log_id, size, ledgers))
    return out


def _ledger_bytes(ledger: LedgerId, size: int, deleted_at_pass: int = 0) -> pb.LedgerBytes:
    return pb.LedgerBytes(scopeId=ledger.scope_id, ledgerId=ledger.ledger_id, bytes=size, deletedAtPass=deleted_at_pass)


def _entry_log_usage(u, details: bool) -> pb.EntryLogUsage:
    usage = pb.EntryLogUsage(entryLogId=u.entry_log_id, totalSize=u.total_size, remainingSize=u.remaining_size,
                             ledgerCount=u.ledger_count)
    if details:
        usage.ledgers.extend(_ledger_bytes(ledger, n) for ledger, n in u.ledgers)
        usage.ledgers.extend(_ledger_bytes(ledger, n, at) for ledger, n, at in u.removed)
    return usage


def garbage_collection_response(gc: GarbageCollectionStatus, forced_pass: int = 0,
                                details: bool = False) -> pb.GarbageCollectionResponse:
    return pb.GarbageCollectionResponse(
        status=status.EOK, forcedPass=forced_pass, forceCompacting=gc.force_compacting,
        majorCompacting=gc.major_compacting, minorCompacting=gc.minor_compacting,
        majorCompactionSuspended=gc.major_compaction_suspended, minorCompactionSuspended=gc.minor_compaction_suspended,
        passes=gc.passes, lastPassStartMs=gc.last_pass_start_ms, lastPassDurationMs=gc.last_pass_duration_ms,
        lastMajorCompactionMs=gc.last_major_compaction_ms, lastMinorCompactionMs=gc.last_minor_compaction_ms,
        majorCompactionCount=gc.major_compaction_count, minorCompactionCount=gc.minor_compaction_count,
        ledgersDeleted=gc.ledgers_deleted, entryLogsDeleted=gc.entry_logs_deleted, bytesReclaimed=gc.bytes_reclaimed,
        entryLogs=[_entry_log_usage(u, details) for u in gc.entry_logs],
        skipped=[pb.SkippedEntryLog(entryLogId=k.entry_log_id, path=k.path, reason=k.reason) for k in gc.skipped],
        passRunning=gc.pass_running, phase=gc.phase, phaseDone=gc.phase_done, phaseTotal=gc.phase_total)
