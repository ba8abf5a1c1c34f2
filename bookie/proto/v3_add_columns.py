"""Runs of v3 ADD_ENTRY requests and their answers as columns (numpy), not one protobuf message at a time.

A v3 client that keeps many adds of one ledger in flight (BookKeeper's Java client; this project's client
over the native protocol) sends Requests that differ only in their txnId, their entry id and their entry:
the header (version, operation, txnId, priority), then the addRequest (ledgerId, entryId, masterKey,
body, and writeFlags and flag where set), in field-number order as protobuf writes them. When entries
have one size and the ids' varints one length, such frames have one size too (``native_frames.FrameRun``)
and one layout: the first frame is walked field by field, and every other frame is checked against it
with numpy. Every byte outside the txnId, the entry id and the entry must be the first frame's; the two
varints must end where the first frame's end. The entries then come out framed as the storage keeps them
with one copy, and the answers are built the same way: each one's header is its request's, copied.

Anything else (another operation, a requestContext, writeFlags, a field out of order, ids whose varints
change length within the run) is not a run: the caller parses those frames one by one, as before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import entry_format
from bookie.proto.v3_columns import (Reader, RequestLayout, as_columns, encode_answers, fill_rows, ledger_entry_request,
                                     request_header, rows_alike, varint_columns, varint_lengths, varint_values)
from bookie.proto.v3_hand_encoding import varint

_ADD_REQUEST_TAG = b"\xaa\x06"  # field 101 (addRequest), length-delimited
_ADD_RESPONSE_TAG = b"\xaa\x06"  # field 101 (addResponse), length-delimited
_FLAG_TAG = b"\xa0\x06"  # AddRequest field 100 (flag), varint
_MIN_ENTRY = 16  # an entry starts with its ledger id and entry id


@dataclass
class V3AddRun:
    """A run of v3 adds of one ledger: what the bookie stores and how it answers."""
    ledger_id: int  # named by the entries' first 8 bytes (WriteEntryProcessorV3), the same in every one
    master_key: bytes
    recovery: bool
    framed: bytes  # the entries, framed as the storage keeps them
    count: int
    _rows: np.ndarray  # the frames, one a row (their length fields included)
    _layout: RequestLayout

    def encode_answers(self, code: int) -> bytes:
        """The framed v3 Responses to every add of the run, all with status ``code``: what
        ``v3_hand_encoding.encode_v3_add_response`` gives each, framed, in one buffer."""
        return encode_answers(self._rows, self._layout, _ADD_RESPONSE_TAG, code, [])


def _layout(block: bytes, payload_size: int) -> tuple[RequestLayout, bytes, slice, bool] | None:
    """(where the fields are, the master key, where the entry is, whether a recovery add) of the first frame,
    if it is an ADD_ENTRY Request of the shape a run can have."""
    layout = ledger_entry_request(block, payload_size, pb.ADD_ENTRY, _ADD_REQUEST_TAG)
    if layout is None:
        return None
    a, end = layout.rest, layout.rest.end
    key_len = a.expect(b"\x1a") and a.varint()
    if not key_len:
        return None
    key_at = a.pos
    a.pos += key_len[0]
    body_len = a.expect(b"\x22") and a.varint()
    if not body_len or body_len[0] < _MIN_ENTRY:
        return None
    body = slice(a.pos, a.pos + body_len[0])
    a.pos += body_len[0]
    recovery = False
    if a.pos < end:  # only the flag may follow (writeFlags, DEFERRED_SYNC among them, go one by one)
        flag = a.expect(_FLAG_TAG) and a.varint()
        if not flag or flag[0] != pb.AddRequest.RECOVERY_ADD:
            return None
        recovery = True
    if a.pos != end:
        return None
    return layout, bytes(block[key_at:key_at + key_len[0]]), body, recovery


def scan_add_run(block: bytes, payload_size: int, count: int) -> V3AddRun | None:
    """The adds in ``count`` frames of ``payload_size`` bytes each, back to back in ``block``; None unless
    every one is an ADD_ENTRY Request laid out as the first (see the module's docstring), of one ledger."""
    found = _layout(block, payload_size)
    if found is None:
        return None
    layout, key, body, recovery = found
    # Every entry's ledger id (its first 8 bytes) must be the first's; the rest of it may differ.
    rows = rows_alike(block, payload_size, count, [layout.txn, layout.entry], [slice(body.start + 8, body.stop)])
    if rows is None:
        return None
    ledger_id = int.from_bytes(block[body.start:body.start + 8], "big", signed=True)
    if ledger_id < 0:
        return None
    size = body.stop - body.start
    framed = fill_rows(count, [as_columns(entry_format.FRAME.pack(size)), rows[:, body]])
    return V3AddRun(ledger_id, key, recovery, framed.tobytes(), count, rows, layout)


# -- the client's side: a framed batch's requests, and runs of answers -----------------------------------------
def encode_add_requests(ledger_id: int, master_key: bytes, first_txn: int, framed: bytes, priority: int = 0,
                        recovery: bool = False, min_rows: int = 1) -> tuple[bytes | memoryview, list[int]] | None:
    """The framed v3 ADD_ENTRY Requests of a framed batch whose entries all have one size, txnIds from
    ``first_txn`` on, and the entries' ids: byte for byte what ``V3AddRequestEncoder`` gives each, in one
    buffer built by columns (a segment per pair of txnId and entry id varint lengths). None if the sizes
    differ, there are fewer than ``min_rows`` entries, or an id is negative."""
    rows = entry_format.framed_rows(framed, min_rows)
    if rows is None:
        return None
    count, size = len(rows), rows.shape[1] - entry_format.FRAME_LEN
    ids = entry_format.row_entry_ids(rows)
    txns = np.arange(first_txn, first_txn + count, dtype=np.int64)
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        return None
    if len(varint(first_txn)) == len(varint(first_txn + count - 1)) and len(varint(low)) == len(varint(high)):
        shape = np.full(1, len(varint(first_txn)) * 16 + len(varint(low)))  # the usual case: one segment
        cuts = [0, count]
    else:
        shape = varint_lengths(txns) * 16 + varint_lengths(ids)  # one segment per pair of varint lengths
        cuts = [0, *(np.flatnonzero(np.diff(shape)) + 1).tolist(), count]
    prefix = b"\x08" + varint(pb.VERSION_THREE) + b"\x10" + varint(pb.ADD_ENTRY) + b"\x18"
    suffix = b"\x20" + varint(priority) if priority else b""
    ledger = b"\x08" + varint(ledger_id) + b"\x10"
    key = b"\x1a" + varint(len(master_key)) + master_key + b"\x22" + varint(size)
    flag = _FLAG_TAG + varint(pb.AddRequest.RECOVERY_ADD) if recovery else b""
    segments = []
    for lo, hi in zip(cuts, cuts[1:]):
        txn_len, id_len = int(shape[lo]) // 16, int(shape[lo]) % 16
        add_len = len(ledger) + id_len + len(key) + size + len(flag)
        head = b"\x0a" + varint(len(prefix) + txn_len + len(suffix)) + prefix
        middle = suffix + _ADD_REQUEST_TAG + varint(add_len) + ledger
        payload = len(head) + txn_len + len(middle) + add_len - len(ledger)
        parts = [as_columns(entry_format.FRAME.pack(payload) + head), varint_columns(txns[lo:hi], txn_len),
                 as_columns(middle), varint_columns(ids[lo:hi], id_len), as_columns(key),
                 rows[lo:hi, entry_format.FRAME_LEN:], as_columns(flag)]
        segments.append(fill_rows(hi - lo, parts).reshape(-1))
    # One segment (the usual case) goes out as it is, without a copy: a socket takes any buffer.
    return (memoryview(segments[0]) if len(segments) == 1 else b"".join(segments)), ids.tolist()


def decode_add_answers(block: bytes, payload_size: int, count: int) -> tuple[np.ndarray, int] | None:
    """(txnIds, the status they all carry) of ``count`` framed v3 answers to adds back to back in ``block``,
    laid out alike (``encode_answers``'s shape: header, status, addResponse of status, ledger and entry id);
    None for any other run of answers (the caller parses those one by one)."""
    end = 4 + payload_size
    found = request_header(block, end, pb.ADD_ENTRY)
    if found is None:
        return None
    r, txn_at, txn_len = found
    code = r.expect(b"\x10") and r.varint()
    if not code or not r.expect(_ADD_RESPONSE_TAG):
        return None
    add = r.varint()
    if add is None or r.pos + add[0] != end:
        return None
    a = Reader(block, r.pos, end)
    if not (a.expect(b"\x08") and a.varint() == code and a.expect(b"\x10") and a.varint() and a.expect(b"\x18")):
        return None
    entry_at = a.pos
    entry = a.varint()
    if entry is None or a.pos != end:
        return None
    txns = slice(txn_at, txn_at + txn_len)
    rows = rows_alike(block, payload_size, count, [txns, slice(entry_at, entry_at + entry[1])])
    if rows is None:
        return None
    return varint_values(rows[:, txns]), code[0]
