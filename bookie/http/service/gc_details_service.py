"""GET /api/v1/bookie/gc_details (BookKeeper's GCDetailsService): the garbage collector's status, as a list of one
GarbageCollectionStatus (InterleavedLedgerStorage has one collector) with BookKeeper's fields, then what this
bookie's collector reports beyond them (passes, what was reclaimed, suspensions, the running phase)."""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.bookie_server_service import BookieServerService
from bookie.http.service.trigger_gc_service import garbage_collection


class GCDetailsService(BookieServerService):
    WRONG_METHOD = ("Only support GET method to retrieve GC details. If you want to trigger gc, send a POST to gc "
                    "endpoint.")

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        s = garbage_collection(self.running_bookie())
        return HttpServiceResponse.json([{
            # GarbageCollectionStatus, as BookKeeper names its fields (times in ms since the epoch)
            "forceCompacting": s.forceCompacting, "majorCompacting": s.majorCompacting,
            "minorCompacting": s.minorCompacting, "lastMajorCompactionTime": s.lastMajorCompactionMs,
            "lastMinorCompactionTime": s.lastMinorCompactionMs, "lastEntryLocationCompactionTime": 0,
            "majorCompactionCounter": s.majorCompactionCount, "minorCompactionCounter": s.minorCompactionCount,
            "entryLocationCompactionCounter": 0,  # no entry-location index (a DbLedgerStorage RocksDB) here
            # beyond BookKeeper's
            "majorCompactionSuspended": s.majorCompactionSuspended,
            "minorCompactionSuspended": s.minorCompactionSuspended, "passes": s.passes,
            "lastPassStartTime": s.lastPassStartMs, "lastPassDurationMs": s.lastPassDurationMs,
            "ledgersDeleted": s.ledgersDeleted, "entryLogsDeleted": s.entryLogsDeleted,
            "bytesReclaimed": s.bytesReclaimed, "entryLogs": len(s.entryLogs),
            "skippedEntryLogs": [{"entryLogId": k.entryLogId, "path": k.path, "reason": k.reason} for k in s.skipped],
            "passRunning": s.passRunning, "phase": s.phase, "phaseDone": s.phaseDone, "phaseTotal": s.phaseTotal,
        }])
