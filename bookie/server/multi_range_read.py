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
from typing import NamedTuple

from bookie.exceptions import BadRequestException
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from bookie.server.bookie import Bookie
from bookie.server.index import MAX_ENTRY_ID

log = logging.getLogger(__name__)

MAX_RANGES_PER_CALL = 1 << 20  # bounds the work one request can ask for (a request is at most a few MiB anyway)


class Range(NamedTuple):  # a tuple: a call of many small ledgers asks for tens of thousands
    ledger: LedgerId
    first: int
    last: int
    stride: int
    offset: int


@dataclass
class Cursor:
    """Where the next message starts: range ``index``, from entry ``entry`` (None: the range's first)."""
    index: int = 0
    entry: int | None = None


def checked_range(r: pb.ReadRangeRequest) -> Range:
    """The range ``r`` asks for (ReadEntries', or one of ReadEntriesOfLedgers'); BadRequestException naming
    what is wrong and what is allowed."""
    if r.ledgerScopeId < 0 or r.ledgerId < 0:
        raise BadRequestException(f"ledger id {r.ledgerScopeId}/{r.ledgerId} is negative")
    ledger = LedgerId(r.ledgerScopeId, r.ledgerId)
    if r.firstEntryId < 0 or r.lastEntryId < r.firstEntryId:
        raise BadRequestException(f"bad range {r.firstEntryId}..{r.lastEntryId} of ledger {ledger}: entry ids are "
                                  f"0..{MAX_ENTRY_ID} and firstEntryId <= lastEntryId")
    if r.stride < 0 or (r.stride and not 0 <= r.offset < r.stride):
        raise BadRequestException(f"bad stride {r.stride} / offset {r.offset}: stride >= 0, and with a stride "
                                  "0 <= offset < stride")
    return Range(ledger, r.firstEntryId, r.lastEntryId, r.stride, r.offset)


def check_message_bytes(max_bytes: int) -> None:
    if max_bytes < 0:
        raise BadRequestException(f"maxBytesPerMessage {max_bytes} refused (allowed: 0 for the bookie's default, "
                                  "or a positive number of bytes)")


def checked_ranges(request: pb.ReadRangesRequest) -> list[Range]:
    """The request's ranges; BadRequestException naming the first bad one and what is allowed."""
    if len(request.ranges) > MAX_RANGES_PER_CALL:
        raise BadRequestException(f"{len(request.ranges)} ranges in one call refused (allowed: up to "
                                  f"{MAX_RANGES_PER_CALL})")
    check_message_bytes(request.maxBytesPerMessage)
    out = []
    for i, r in enumerate(request.ranges):
        try:
            out.append(checked_range(r))
        except BadRequestException as exc:
            raise BadRequestException(f"range {i}: {exc}") from None
    return out


FEW_BATCH = 1024  # ranges located and read together (read_few_ranges); at most these are read again in the next message


def next_message(bookie: Bookie, ranges: list[Range], cursor: Cursor, budget: int) -> bytes:
    """The next serialized ReadRangesResponse from ``cursor`` on (which it advances), about ``budget`` bytes
    of entries; the last message is the one whose ``rangesCovered`` is ``len(ranges)``. Ranges of a few ids
    (small ledgers) are read FEW_BATCH at a time (``Bookie.read_few_ranges``), the others one by one."""
    parts: list = []
    count = total = 0
    few: list[list[bytes] | None] = []  # what read_few_ranges gave for ranges[cursor.index:]
    while cursor.index < len(ranges) and total < budget:
        r = ranges[cursor.index]
        if cursor.entry is None and not few:
            few = bookie.read_few_ranges(ranges[cursor.index: cursor.index + FEW_BATCH])[::-1]
        got = few.pop() if cursor.entry is None else None
        if got is not None:
            parts += got
            count += len(got)
            total += sum(len(p) for p in got)
            cursor.index += 1
            continue
        first = r.first if cursor.entry is None else cursor.entry
        try:
            got, n, covered = bookie.read_entries_parts(r.ledger, first, r.last, budget - total, r.stride, r.offset)
        except Exception as exc:  # its replicas, then entry-by-entry reads, will tell what it was
            log.debug("range %d (ledger %s %d..%d) not read: %s", cursor.index, r.ledger, first, r.last, exc)
            got, n, covered = [], 0, r.last
        if n == 0 and covered < first and total:
            break  # nothing fitted in what is left of this message: the range starts the next one
        parts += got
        count += n
        total += sum(len(p) for p in got)
        if covered >= r.last or covered < first:  # done (or no progress even in a fresh message: give it up)
            cursor.index, cursor.entry = cursor.index + 1, None
        else:
            cursor.entry = covered + 1
            few = []  # those after it are read again once it is done
    return pb.ReadRangesResponse(status=status.EOK, entries=b"".join(parts), entryCount=count,
                                 rangesCovered=cursor.index).SerializeToString()
