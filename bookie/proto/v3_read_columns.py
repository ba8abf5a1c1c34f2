"""Runs of plain v3 READ_ENTRY requests and their answers as columns (numpy), not one protobuf message at a
time.

BookKeeper's Java client reads a range (``readEntries``) as one READ_ENTRY Request per entry, all in flight
at once, striped over the ensemble: a bookie of a three-bookie ensemble gets every third id. Such Requests
differ only in their txnId and their entry id: the header (version, operation, txnId, priority), then the
readRequest (ledgerId, entryId), in field-number order as protobuf writes them. When the ids' varints have one
length the frames have one size (``native_frames.FrameRun``) and one layout, checked as v3_add_columns checks
adds (v3_columns). The bookie then reads the ids as one strided range and answers them all with one buffer
built by columns: each answer's header and entry id are its request's, copied.

Anything else (a fencing read, a long poll, a masterKey, a requestContext, ids not evenly stepped) is not a
run: the caller parses those frames one by one, as before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import status
from bookie.proto.v3_columns import (Reader, RequestLayout, as_columns, encode_answers, ledger_entry_request, rows_alike,
                                     varint_values)
from bookie.proto.v3_hand_encoding import varint

_READ_REQUEST_TAG = b"\xa2\x06"  # field 100 (readRequest), length-delimited
_READ_RESPONSE_TAG = b"\xa2\x06"  # field 100 (readResponse), length-delimited


@dataclass
class V3ReadRun:
    """A run of plain v3 reads of one ledger at evenly stepped entry ids: ``first``, ``first + step``, ..."""
    ledger_id: int
    first: int
    step: int
    count: int
    _rows: np.ndarray  # the frames, one a row (their length fields included)
    _layout: RequestLayout

    @property
    def last(self) -> int:
        return self.first + (self.count - 1) * self.step

    def encode_answers(self, entries: np.ndarray, lac: int | None) -> bytes:
        """The framed v3 Responses (status EOK) to every read of the run, ``entries`` (the stored entries, one a
        row, in the run's order) and the ledger's LAC piggybacked: what ``v3_hand_encoding.encode_v3_read_response``
        gives each, framed, in one buffer."""
        lac_field = b"" if lac is None else b"\x28" + varint(lac)
        return encode_answers(self._rows, self._layout, _READ_RESPONSE_TAG, status.EOK,
                              [as_columns(b"\x22" + varint(entries.shape[1])), entries, as_columns(lac_field)])


def scan_read_run(block: bytes, payload_size: int, count: int) -> V3ReadRun | None:
    """The reads in ``count`` frames of ``payload_size`` bytes each, back to back in ``block``; None unless every
    one is a plain READ_ENTRY Request laid out as the first (see the module's docstring), of one ledger, at
    entry ids that step evenly upwards."""
    layout = ledger_entry_request(block, payload_size, pb.READ_ENTRY, _READ_REQUEST_TAG)
    if layout is None or layout.rest.pos != layout.rest.end:  # a flag, a masterKey, a previousLAC: one by one
        return None
    rows = rows_alike(block, payload_size, count, [layout.txn, layout.entry])
    if rows is None:
        return None
    ledger_id = Reader(layout.request_ledger, 0, len(layout.request_ledger)).varint()[0]
    ids = varint_values(rows[:, layout.entry])
    first = int(ids[0])
    step = int(ids[1] - ids[0]) if count > 1 else 1
    if first < 0 or step <= 0 or (count > 2 and not (np.diff(ids) == step).all()):
        return None
    return V3ReadRun(ledger_id, first, step, count, rows, layout)
