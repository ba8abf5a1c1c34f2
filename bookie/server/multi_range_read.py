"""Ranges of several ledgers read in one call: the ReadEntriesOfLedgers RPC's work on the bookie.

A Spark task that packs many small ledgers (spark_bookkeeper/partition_packing.py) wants a few entries of
each from one bookie; a call per ledger costs a round trip and a stream each, far more than the entries.
Here the task's whole share comes in one call: the ranges are read in request order into messages of
about ``maxBytesPerMessage`` (a range may run over several), each saying how many ranges it completes.
A range this bookie cannot read (a ledger it does not have, a failed read) sends nothing: the reader asks
its replicas, then entry by entry, which tells "no such entry" from "could not read" (the reads that
answer each request alone do).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from bookie.exceptions import BadRequestException
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto.range_columns import RangeColumns
from bookie.proto.read_range import encode_read_ranges_response
from bookie.server.bookie import Bookie
from bookie.server.index import MAX_ENTRY_ID

log = logging.getLogger(__name__)

MAX_RANGES_PER_CALL = 1 << 20  # bounds the work one request can ask for (a request is at most a few MiB anyway)


@dataclass
class Cursor:
    """Where the next message starts: range ``index``, from entry ``entry`` (None: the range's first)."""
    index: int = 0
    entry: int | None = None


def checked_range(r: pb.ReadRangeRequest) -> LedgerId:
    """The ledger of the range ``r`` asks for (ReadEntries', or one of ReadEntriesOfLedgers'), checked;
    BadRequestException naming what is wrong and what is allowed."""
    if r.ledgerScopeId < 0 or r.ledgerId < 0:
        raise BadRequestException(f"ledger id {r.ledgerScopeId}/{r.ledgerId} is negative")
    ledger = LedgerId(r.ledgerScopeId, r.ledgerId)
    if r.firstEntryId < 0 or r.lastEntryId < r.firstEntryId:
        raise BadRequestException(f"bad range {r.firstEntryId}..{r.lastEntryId} of ledger {ledger}: entry ids are "
                                  f"0..{MAX_ENTRY_ID} and firstEntryId <= lastEntryId")
    if r.stride < 0 or (r.stride and not 0 <= r.offset < r.stride):
        raise BadRequestException(f"bad stride {r.stride} / offset {r.offset}: stride >= 0, and with a stride "
                                  "0 <= offset < stride")
    return ledger


def check_message_bytes(max_bytes: int) -> None:
    if max_bytes < 0:
        raise BadRequestException(f"maxBytesPerMessage {max_bytes} refused (allowed: 0 for the bookie's default, "
                                  "or a positive number of bytes)")


def checked_ranges(request: pb.ReadRangesRequest) -> RangeColumns:
    """The request's ranges (as messages or as columns); BadRequestException naming the first bad one and what
    is allowed. Checked as columns: a call of many small ledgers has tens of thousands."""
    try:
        ranges = RangeColumns.of_request(request)
    except ValueError as exc:
        raise BadRequestException(str(exc)) from None
    if len(ranges) > MAX_RANGES_PER_CALL:
        raise BadRequestException(f"{len(ranges)} ranges in one call refused (allowed: up to {MAX_RANGES_PER_CALL})")
    check_message_bytes(request.maxBytesPerMessage)
    strides, offsets = ranges.strides, ranges.offsets
    bad = ((ranges.scopes < 0) | (ranges.ledgers < 0) | (ranges.firsts < 0) | (ranges.lasts < ranges.firsts)
           | (strides < 0) | ((strides != 0) & ((offsets < 0) | (offsets >= strides))))
    if bad.any():
        k = int(np.argmax(bad))
        try:
            checked_range(ranges.row(k))
        except BadRequestException as exc:
            raise BadRequestException(f"range {k}: {exc}") from None
    return ranges


FEW_BATCH = 1024  # ranges located and read together (read_few_ranges); at most these are read again in the next message


def next_message(bookie: Bookie, ranges: RangeColumns, cursor: Cursor, budget: int) -> bytes:
    """The next serialized ReadRangesResponse from ``cursor`` on (which it advances), about ``budget`` bytes
    of entries; the last message is the one whose ``rangesCovered`` is ``len(ranges)``. Ranges of a few ids
    (small ledgers) are read FEW_BATCH at a time (``Bookie.read_few_ranges``), the others one by one."""
    parts: list = []
    count = total = 0
    n = len(ranges)
    few: list[list[bytes] | None] = []  # what read_few_ranges gave for ranges[cursor.index - at:]
    at = 0
    while cursor.index < n and total < budget:
        if cursor.entry is None:
            if at == len(few):
                few, at = bookie.read_few_ranges(ranges[cursor.index: cursor.index + FEW_BATCH]), 0
            start = at
            while at < len(few) and total < budget:  # a small ledger's share each: kept lean
                got = few[at]
                if got is None:
                    break
                parts += got
                count += len(got)
                for part in got:
                    total += len(part)
                at += 1
            cursor.index += at - start
            if at == len(few) or total >= budget:
                continue
        # Range k on its own: one of many ids, one read_few_ranges could not read, or one that goes on.
        k = cursor.index
        ledger = LedgerId(int(ranges.scopes[k]), int(ranges.ledgers[k]))
        first = int(ranges.firsts[k]) if cursor.entry is None else cursor.entry
        last = int(ranges.lasts[k])
        try:
            got, got_count, covered = bookie.read_entries_parts(ledger, first, last, budget - total,
                                                                int(ranges.strides[k]), int(ranges.offsets[k]))
        except Exception as exc:  # its replicas, then entry-by-entry reads, will tell what it was
            log.debug("range %d (ledger %s %d..%d) not read: %s", k, ledger, first, last, exc)
            got, got_count, covered = [], 0, last
        if got_count == 0 and covered < first and total:
            break  # nothing fitted in what is left of this message: the range starts the next one
        parts += got
        count += got_count
        total += sum(len(p) for p in got)
        if covered >= last or covered < first:  # done (or no progress even in a fresh message: give it up)
            cursor.index, cursor.entry = k + 1, None
            if few:
                at += 1  # few[at] was this range's
        else:
            cursor.entry = covered + 1
            few, at = [], 0  # those after it are read again once it is done
    return encode_read_ranges_response(parts, count, cursor.index)
