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
    _header_end: int  # the header field (tag, length, header) is row[4:_header_end]
    _request_ledger: bytes  # the addRequest's ledgerId varint, echoed in the answers
    _entry_at: int  # the addRequest's entryId varint is row[_entry_at:_entry_at + _entry_len]
    _entry_len: int

    def encode_answers(self, code: int) -> bytes:
        """The framed v3 Responses to every add of the run, all with status ``code``: what
        ``v3_hand_encoding.encode_v3_add_response`` gives each, framed, in one buffer."""
        code_field = varint(code)
        body_len = 2 + len(code_field) + len(self._request_ledger) + 1 + self._entry_len
        header = self._rows[:, 4:self._header_end]
        middle = b"".join((b"\x10", code_field, _ADD_RESPONSE_TAG, varint(body_len), b"\x08", code_field, b"\x10",
                           self._request_ledger, b"\x18"))
        size = header.shape[1] + len(middle) + self._entry_len
        out = np.empty((self.count, entry_format.FRAME_LEN + size), dtype=np.uint8)
        out[:, :4] = np.frombuffer(entry_format.FRAME.pack(size), dtype=np.uint8)
        at = 4 + header.shape[1]
        out[:, 4:at] = header
        out[:, at:at + len(middle)] = np.frombuffer(middle, dtype=np.uint8)
        out[:, at + len(middle):] = self._rows[:, self._entry_at:self._entry_at + self._entry_len]
        return out.tobytes()


class _Reader:
    """Walks one serialized message: tags, varints, length-delimited fields (None past its end)."""

    def __init__(self, data: bytes, pos: int, end: int):
        self.data, self.pos, self.end = data, pos, end

    def expect(self, tag: bytes) -> bool:
        if self.data[self.pos:self.pos + len(tag)] != tag:
            return False
        self.pos += len(tag)
        return True

    def varint(self) -> tuple[int, int] | None:
        """(value, its length in bytes), or None if it runs past the end or is longer than 9 bytes."""
        value = shift = 0
        for k in range(self.pos, min(self.end, self.pos + 9)):
            byte = self.data[k]
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                length, self.pos = k + 1 - self.pos, k + 1
                return value, length
        return None


def _add_header(block: bytes, end: int) -> tuple["_Reader", int, int] | None:
    """(a reader at its end, where its txnId is, the txnId's length) of the first frame's header field, if it is
    the header of an ADD_ENTRY (version, operation, txnId, and priority where set, in that order)."""
    r = _Reader(block, 4, end)
    header = r.expect(b"\x0a") and r.varint()
    if not header:
        return None
    header_end = r.pos + header[0]
    h = _Reader(block, r.pos, header_end)
    version, operation = (h.expect(b"\x08") and h.varint()), (h.expect(b"\x10") and h.varint())
    if not version or not operation or operation[0] != pb.ADD_ENTRY or not h.expect(b"\x18"):
        return None
    txn_at = h.pos
    txn = h.varint()
    if txn is None or (h.pos < header_end and not (h.expect(b"\x20") and h.varint())) or h.pos != header_end:
        return None
    return _Reader(block, header_end, end), txn_at, txn[1]


def _rows_alike(block: bytes, payload_size: int, count: int, varints: list[slice],
                others: list[slice] = ()) -> np.ndarray | None:
    """The frames as rows, if every byte but those of ``varints`` and ``others`` is the first frame's and each
    of ``varints`` ends where the first frame's does; None otherwise."""
    rows = np.frombuffer(block, dtype=np.uint8, count=count * (payload_size + 4)).reshape(count, payload_size + 4)
    constant = np.ones(payload_size + 4, dtype=bool)
    for columns in (*varints, *others):
        constant[columns] = False
    if not (rows[:, constant] == rows[0, constant]).all():
        return None
    return rows if all(_varints_end_at(rows[:, columns]) for columns in varints) else None


def _layout(block: bytes, payload_size: int) -> dict | None:
    """Where the first frame's fields are, if it is an ADD_ENTRY Request of the shape a run can have."""
    end = 4 + payload_size
    found = _add_header(block, end)
    if found is None or not found[0].expect(_ADD_REQUEST_TAG):
        return None
    r, txn_at, txn_len = found
    header_end = r.pos - len(_ADD_REQUEST_TAG)
    add = r.varint()
    if add is None or r.pos + add[0] != end:  # nothing after the addRequest (a requestContext: not a run)
        return None
    a = _Reader(block, r.pos, end)
    if not a.expect(b"\x08"):
        return None
    ledger_at = a.pos
    if a.varint() is None or not a.expect(b"\x10"):
        return None
    request_ledger = bytes(block[ledger_at:a.pos - 1])
    entry_at = a.pos
    entry = a.varint()
    key_len = a.expect(b"\x1a") and a.varint()
    if entry is None or not key_len:
        return None
    key_at = a.pos
    a.pos += key_len[0]
    body_len = a.expect(b"\x22") and a.varint()
    if not body_len or body_len[0] < _MIN_ENTRY:
        return None
    body_at = a.pos
    a.pos += body_len[0]
    recovery = False
    if a.pos < end:  # only the flag may follow (writeFlags, DEFERRED_SYNC among them, go one by one)
        flag = a.expect(_FLAG_TAG) and a.varint()
        if not flag or flag[0] != pb.AddRequest.RECOVERY_ADD:
            return None
        recovery = True
    if a.pos != end:
        return None
    return dict(header_end=header_end, txn_at=txn_at, txn_len=txn_len, request_ledger=request_ledger,
                entry_at=entry_at, entry_len=entry[1], key=bytes(block[key_at:key_at + key_len[0]]),
                body_at=body_at, body_len=body_len[0], recovery=recovery)


def _varints_end_at(columns: np.ndarray) -> bool:
    """Whether every row of ``columns`` is one varint exactly as long as the columns."""
    return bool((columns[:, :-1] & 0x80).all() and not (columns[:, -1] & 0x80).any())


def scan_add_run(block: bytes, payload_size: int, count: int) -> V3AddRun | None:
    """The adds in ``count`` frames of ``payload_size`` bytes each, back to back in ``block``; None unless
    every one is an ADD_ENTRY Request laid out as the first (see the module's docstring), of one ledger."""
    layout = _layout(block, payload_size)
    if layout is None:
        return None
    txn = slice(layout["txn_at"], layout["txn_at"] + layout["txn_len"])
    entry = slice(layout["entry_at"], layout["entry_at"] + layout["entry_len"])
    body = slice(layout["body_at"] + 8, layout["body_at"] + layout["body_len"])  # the entry's ledger id stays
    rows = _rows_alike(block, payload_size, count, [txn, entry], [body])
    if rows is None:
        return None
    ledger_id = int.from_bytes(block[layout["body_at"]:layout["body_at"] + 8], "big", signed=True)
    if ledger_id < 0:
        return None
    size = layout["body_len"]
    framed = np.empty((count, entry_format.FRAME_LEN + size), dtype=np.uint8)
    framed[:, :entry_format.FRAME_LEN] = np.frombuffer(entry_format.FRAME.pack(size), dtype=np.uint8)
    framed[:, entry_format.FRAME_LEN:] = rows[:, layout["body_at"]:layout["body_at"] + size]
    return V3AddRun(ledger_id, layout["key"], layout["recovery"], framed.tobytes(), count, rows,
                    layout["header_end"], layout["request_ledger"], layout["entry_at"], layout["entry_len"])


# -- the client's side: a framed batch's requests, and runs of answers -----------------------------------------
def _varint_lengths(values: np.ndarray) -> np.ndarray:
    """The length in bytes of each (non-negative) value's varint."""
    lengths = np.ones(len(values), dtype=np.int64)
    for k in range(1, 9):
        lengths += values >= (1 << (7 * k))
    return lengths


def _varint_columns(values: np.ndarray, length: int) -> np.ndarray:
    """``values`` as varints of ``length`` bytes each, one a row (each value's varint must be that long)."""
    out = np.empty((len(values), length), dtype=np.uint8)
    for k in range(length):
        out[:, k] = ((values >> (7 * k)) & 0x7F) | (0x80 if k < length - 1 else 0)
    return out


def encode_add_requests(ledger_id: int, master_key: bytes, first_txn: int, framed: bytes, priority: int = 0,
                        recovery: bool = False, min_rows: int = 1) -> tuple[bytes, list[int]] | None:
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
        shape = _varint_lengths(txns) * 16 + _varint_lengths(ids)  # one segment per pair of varint lengths
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
        parts = [np.frombuffer(entry_format.FRAME.pack(payload) + head, dtype=np.uint8),
                 _varint_columns(txns[lo:hi], txn_len), np.frombuffer(middle, dtype=np.uint8),
                 _varint_columns(ids[lo:hi], id_len), np.frombuffer(key, dtype=np.uint8),
                 rows[lo:hi, entry_format.FRAME_LEN:], np.frombuffer(flag, dtype=np.uint8)]
        out = np.empty((hi - lo, entry_format.FRAME_LEN + payload), dtype=np.uint8)
        col = 0
        for part in parts:
            out[:, col:col + part.shape[-1]] = part
            col += part.shape[-1]
        segments.append(out.tobytes())
    return b"".join(segments), ids.tolist()


def decode_add_answers(block: bytes, payload_size: int, count: int) -> tuple[list[int], int] | None:
    """(txnIds, the status they all carry) of ``count`` framed v3 answers to adds back to back in ``block``,
    laid out alike (``encode_answers``'s shape: header, status, addResponse of status, ledger and entry id);
    None for any other run of answers (the caller parses those one by one)."""
    end = 4 + payload_size
    found = _add_header(block, end)
    if found is None:
        return None
    r, txn_at, txn_len = found
    code = r.expect(b"\x10") and r.varint()
    if not code or not r.expect(_ADD_RESPONSE_TAG):
        return None
    add = r.varint()
    if add is None or r.pos + add[0] != end:
        return None
    a = _Reader(block, r.pos, end)
    if not (a.expect(b"\x08") and a.varint() == code and a.expect(b"\x10") and a.varint() and a.expect(b"\x18")):
        return None
    entry_at = a.pos
    entry = a.varint()
    if entry is None or a.pos != end:
        return None
    txns = slice(txn_at, txn_at + txn_len)
    rows = _rows_alike(block, payload_size, count, [txns, slice(entry_at, entry_at + entry[1])])
    if rows is None:
        return None
    columns = rows[:, txns].astype(np.int64)
    values = np.zeros(count, dtype=np.int64)
    for k in range(txn_len):
        values |= (columns[:, k] & 0x7F) << (7 * k)
    return values.tolist(), code[0]
