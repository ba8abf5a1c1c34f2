"""Truncating a log (bookie.meta.log_metadata): drop its first segments in one compare-and-set, then
delete their ledgers. Here, in the client layer, because deleting ledgers needs the client; both the
Spark connector (``spark_bookkeeper.truncate_log``, retention at commit) and ``bk shell truncatelog``
use it.

The CAS moves the dropped segments to the log's ``truncated`` list (deletion pending) before any ledger
is deleted, so the log never names a deleted ledger. Then every pending ledger is deleted (also those
an earlier truncation failed to delete: that is how a failure is retried), and a second CAS records
them as deleted. A ledger already gone counts as deleted; any other failure leaves it pending and is
reported in ``TruncationResult.failed``.
"""
from __future__ import annotations

from functools import partial

import logging
import time
from dataclasses import dataclass, field, replace

from bookie.exceptions import BKException, BKNoSuchLedgerExistsException
from bookie.ledger_id import LedgerId
from bookie.meta.log_metadata import Log, LogRetention, LogSegment, read_log, update_log

log = logging.getLogger(__name__)


@dataclass
class TruncationResult:
    log: str
    dropped: list[tuple[int, LedgerId]] = field(default_factory=list)  # (segment, ledger) this call removed
    deleted: list[LedgerId] = field(default_factory=list)  # ledgers this call deleted (or found gone)
    failed: dict[LedgerId, str] = field(default_factory=dict)  # still pending, with why; the next call retries
    first_segment: int = 0  # the log's first segment afterwards

    def describe(self) -> str:
        if self.dropped:
            segments = f"segments {self.dropped[0][0]}..{self.dropped[-1][0]}"
            text = f"log {self.log!r}: dropped {segments} (ledgers {', '.join(str(l) for _, l in self.dropped)})"
        else:
            text = f"log {self.log!r}: nothing to drop"
        text += f"; first segment now {self.first_segment}; {len(self.deleted)} ledgers deleted"
        if self.failed:
            text += "; NOT deleted (retried by the next truncation): " + "; ".join(
                f"ledger {lid}: {why}" for lid, why in self.failed.items())
        return text


def segment_time(bk, segment: LogSegment) -> int | None:
    """A segment's time: its batch's commit time; when its log record predates commit times, its ledger's
    creation time (None: the ledger is gone)."""
    if segment.committed_ms is not None:
        return segment.committed_ms
    try:
        return bk.ledger_metadata(segment.ledger).ctime
    except BKNoSuchLedgerExistsException:
        return None


def truncate_log(bk, name: str, retention: LogRetention) -> TruncationResult:
    """Drop the first segments of log ``name`` that ``retention`` selects, then delete their ledgers (and
    any left pending by an earlier truncation). LogNotFoundException when there is no such log."""
    read_log(bk.store, name)  # "no such log" is an answer, not an empty log to create
    if retention.max_age_ms is not None and retention.now_ms is None:
        retention = replace(retention, now_ms=int(time.time() * 1000))

    time_of = partial(segment_time, bk)
    attempt: dict = {}

    def drop(current: Log) -> Log:
        attempt["log"] = current
        attempt["dropped"] = current.drop_first(retention.drop_count(current, time_of))
        return current

    after = update_log(bk.store, name, lambda current: retention.drop_count(current, time_of) > 0, drop)
    # The loop returns our transformed record only if our CAS is what it ends with.
    dropped = attempt["dropped"] if attempt.get("log") is after else []
    result = TruncationResult(name, [(n, s.ledger) for n, s in dropped])
    return delete_truncated(bk, after, result)


def delete_truncated(bk, current: Log, result: TruncationResult | None = None) -> TruncationResult:
    """Delete the ledgers ``current`` holds as truncated and not yet deleted; record them deleted by CAS."""
    result = result or TruncationResult(current.name)
    for ledger in current.pending_deletion():
        try:
            bk.delete_ledger(ledger)
        except BKNoSuchLedgerExistsException:
            pass  # deleted before (by a sweep, by hand, or by a call whose record did not land)
        except BKException as exc:
            log.warning("log %s: could not delete truncated ledger %s (retried by the next truncation): %s",
                        current.name, ledger, exc)
            result.failed[ledger] = str(exc)
            continue
        result.deleted.append(ledger)
    gone = set(result.deleted)

    def record(stored: Log) -> Log:
        stored.mark_deleted(gone)
        return stored

    if gone:
        current = update_log(bk.store, current.name, lambda stored: bool(gone & set(stored.pending_deletion())),
                             record)
    result.first_segment = current.first_segment
    return result
