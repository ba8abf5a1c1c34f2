"""Positions in a log, as Kafka's source has offsets in a partition: where a read starts and ends (by offset or
by commit time), how far a micro-batch goes, and how many entries a stream is behind.

A position is ``(segment, entry)``, a stream's offset ``{"segment": s, "entry": e}``: entry e of the log's
segment number s (absolute: truncation renumbers nothing). ``(s, e)`` with e the segment's entry count and
``(s + 1, 0)`` are the same place; a stream's offsets use the second form. ``(end_segment, 0)`` is the log's
end, where its next commit will go.

Time: a log keeps each segment's commit time (``committed_ms``: every segment of one batch has its batch's),
so a time selects whole segments, Kafka's offsetsForTimes with a segment's granularity: ``startingTimestamp``
selects the first segment, in log order, committed at or after it, and every segment after that one;
``endingTimestamp`` ends the read before the first segment committed at or after it. A segment's entries
count as of its commit time even if they were written a little before. Segments of a record older than
commit times (``committed_ms`` missing) take their ledger's creation time instead (``ctime``, as age-based
truncation does, bookie.client.log_truncation), a ledger without one (deleted) counts as older than any time.

Batch reads (``batch_range``): Kafka's batch rules: ``startingOffsets`` earliest (default) or a position,
``endingOffsets`` latest (default) or a position, exclusive; a position past the log's end, or past the
entries of its segment, is refused; a start on segments truncated away fails (``failOnDataLoss=true``) or
reads from the first segment left.
"""
from __future__ import annotations

import ast
import json
import logging
from datetime import datetime, timezone
from functools import partial
from typing import Callable

from bookie.client.log_truncation import segment_time
from bookie.exceptions import BKException
from bookie.meta.log_metadata import Log, LogSegment
from spark_bookkeeper.options import EARLIEST, LATEST, BookKeeperOptionException, Position, ReadOptions

logger = logging.getLogger(__name__)
TimeOf = Callable[[LogSegment], "int | None"]


class LogDataLossException(BKException, RuntimeError):
    """The segments a read of a log was to start at were truncated away (failOnDataLoss=true)."""


def commit_time(bk) -> TimeOf:
    """A segment's time: its batch's commit time; in a record older than commit times, its ledger's ctime."""
    return partial(segment_time, bk)


def segment_at(log: Log, ms: int, time_of: TimeOf) -> int | None:
    """The first segment (absolute number), in log order, whose time is at or after ``ms``; None if none is."""
    for number, segment in log.numbered():
        committed = time_of(segment)
        if committed is not None and committed >= ms:
            return number
    return None


def _when(ms: int) -> str:
    return f"{ms} ({datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec='milliseconds')})"


def _nothing_at(log: Log, ms: int, time_of: TimeOf) -> BookKeeperOptionException:
    times = [t for t in (time_of(s) for s in log.segments) if t is not None]
    newest = f"its newest commit was at {_when(max(times))}" if times else (
        "it has no segments" if not log.segments else "none of its segments has a commit time")
    return BookKeeperOptionException(
        f"log {log.name!r}: no segment was committed at or after startingTimestamp={_when(ms)}; {newest}. Set "
        "option startingOffsetsByTimestampStrategy=latest to start at the log's end instead")


def starting_position(log: Log, opts: ReadOptions, time_of: TimeOf) -> Position:
    """Where a stream without checkpoint, or a batch read, starts (maybe a truncated segment: see ``batch_range``)."""
    if opts.starting_timestamp is not None:
        found = segment_at(log, opts.starting_timestamp, time_of)
        if found is not None:
            return found, 0
        if opts.timestamp_strategy == LATEST:
            return log.end_segment, 0
        raise _nothing_at(log, opts.starting_timestamp, time_of)
    if opts.starting_offsets == EARLIEST:
        return log.first_segment, 0
    if opts.starting_offsets == LATEST:
        return log.end_segment, 0
    return opts.starting_offsets


def ending_position(log: Log, opts: ReadOptions, time_of: TimeOf) -> Position:
    """Where a batch read ends (exclusive): the log's end unless endingOffsets / endingTimestamp say earlier."""
    if opts.ending_timestamp is not None:
        found = segment_at(log, opts.ending_timestamp, time_of)
        return (log.end_segment, 0) if found is None else (found, 0)
    if opts.ending_offsets == LATEST:
        return log.end_segment, 0
    return opts.ending_offsets


def _check_within(log: Log, position: Position, name: str) -> None:
    segment, entry = position
    if position > (log.end_segment, 0):
        raise BookKeeperOptionException(
            f"option {name}={json.dumps({'segment': segment, 'entry': entry})} is past the end of log {log.name!r}: "
            f"its next segment will be {log.end_segment}, so the furthest position is "
            f"{json.dumps({'segment': log.end_segment, 'entry': 0})}")
    if log.first_segment <= segment < log.end_segment and entry > log.segment(segment).entries:
        raise BookKeeperOptionException(
            f"option {name}: segment {segment} of log {log.name!r} has {log.segment(segment).entries} entries; entry "
            f"{entry} is past its end")


def batch_range(log: Log, opts: ReadOptions, time_of: TimeOf) -> list[tuple[int, int, int | None]]:
    """(segment, first entry, last entry or None: to its end) of each segment a batch read of ``log`` reads."""
    for name, given in (("startingOffsets", opts.starting_offsets), ("endingOffsets", opts.ending_offsets)):
        if isinstance(given, tuple):
            _check_within(log, given, name)
    start, end = starting_position(log, opts, time_of), ending_position(log, opts, time_of)
    if start[0] < log.first_segment:
        lost = log.describe_loss(*start)
        if opts.fail_on_data_loss:
            raise LogDataLossException(f"{lost}. Set option failOnDataLoss=false to read from segment "
                                       f"{log.first_segment}")
        logger.warning("%s; reading from there (failOnDataLoss=false)", lost)
        start = (log.first_segment, 0)
    out = []
    for number, _ in log.numbered():
        if not start[0] <= number <= end[0] or (number, 0) == end:
            continue
        first = start[1] if number == start[0] else 0
        last = end[1] - 1 if number == end[0] else None
        if last is None or last >= first:
            out.append((number, first, last))
    return out


def advance(log: Log, start: Position, end: Position, max_entries: int | None = None,
            max_bytes: int | None = None) -> Position:
    """Where a micro-batch from ``start`` ends: at ``end``, or before it where it holds ``max_entries`` entries or
    the next entry would pass ``max_bytes`` (estimated: a segment's bytes over its entries, which the log records);
    at least one entry when there is one, so a stream always goes on."""
    segment, entry = start
    taken, spent = 0, 0.0
    while (segment, entry) < end:
        s = log.segment(segment)
        stop = s.entries if segment < end[0] else min(s.entries, end[1])
        take = max(0, stop - entry)
        if max_entries is not None:
            take = min(take, max_entries - taken)
        per_entry = s.bytes / s.entries if s.entries else 0.0
        if max_bytes is not None and per_entry > 0:
            take = min(take, max(int((max_bytes - spent) // per_entry), 0 if taken else 1))
        entry, taken, spent = entry + take, taken + take, spent + take * per_entry
        if entry >= s.entries:
            segment, entry = segment + 1, 0
        elif entry < stop:
            break  # a budget is spent
    return segment, entry


def entries_between(log: Log, start: Position, end: Position) -> int:
    """Entries of the log from ``start`` up to ``end`` (exclusive); segments truncated away count for nothing."""
    total = 0
    for number, s in log.numbered():
        if start[0] <= number <= end[0]:
            lo = start[1] if number == start[0] else 0
            hi = min(end[1], s.entries) if number == end[0] else s.entries
            total += max(0, hi - lo)
    return total


def progress_offset(value) -> dict | None:
    """A progress report's offset: a dict, its JSON text, or (PySpark before 4.2 reports ``str()`` of the offset
    it parsed: ``{'segment': 2, 'entry': 0}``) its Python text; "null"/"None"/absent: none."""
    if isinstance(value, dict):
        return value
    if value is None or str(value) in ("", "null", "None"):
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return ast.literal_eval(value)


def stream_lag(source_progress, uri: str | None = None, log: str | None = None) -> int | None:
    """Entries a stream of this source is behind: from ``endOffset`` (what its last micro-batch read up to) to
    ``latestOffset`` (what was readable when Spark last asked), of one source's progress,
    ``query.lastProgress["sources"][i]``. None when Spark reports no latestOffset (PySpark before 4.2, or
    no trigger yet).

    A stream of ledgers: the offsets alone tell it. A stream of a log: its offsets count segments, so the log's
    metadata is read for their entries: pass the cluster's ``uri`` and the ``log``'s name.
    """
    def field(name: str):
        return source_progress[name] if isinstance(source_progress, dict) else getattr(source_progress, name)

    latest = progress_offset(field("latestOffset"))
    end = progress_offset(field("endOffset")) if latest is not None else None
    if latest is None or end is None:
        return None
    if "ledgers" in latest:
        done = end.get("ledgers", {})
        return sum(max(0, int(at) - int(done.get(key, 0))) for key, at in latest["ledgers"].items())
    if uri is None or log is None:
        raise ValueError("the lag of a log stream is counted in the log's segments: pass uri= and log=")
    from spark_bookkeeper import connections
    from spark_bookkeeper.log import read_log
    record = read_log(connections.driver_client(uri).store, log)
    return entries_between(record, (int(end["segment"]), int(end["entry"])),
                           (int(latest["segment"]), int(latest["entry"])))
