"""What the columnar codecs of v3 runs share (v3_add_columns, v3_read_columns): walking the first frame of a
run field by field, checking every other frame against it with numpy, and varints as columns.

A run is ``count`` frames of one size back to back (``native_frames.FrameRun``), each a 4-byte length and
a serialized v3 message. Frames laid out alike differ only in some varints (a txnId, an entry id) and
perhaps a body; every other byte is the first frame's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bookie.proto import entry_format
from bookie.proto.v3_hand_encoding import varint


class Reader:
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


def request_header(block: bytes, end: int, operation: int) -> tuple[Reader, int, int] | None:
    """(a reader at its end, where its txnId is, the txnId's length) of the first frame's header field, if it is
    the header of ``operation`` (version, operation, txnId, and priority where set, in that order)."""
    r = Reader(block, 4, end)
    header = r.expect(b"\x0a") and r.varint()
    if not header:
        return None
    header_end = r.pos + header[0]
    h = Reader(block, r.pos, header_end)
    version, op = (h.expect(b"\x08") and h.varint()), (h.expect(b"\x10") and h.varint())
    if not version or not op or op[0] != operation or not h.expect(b"\x18"):
        return None
    txn_at = h.pos
    txn = h.varint()
    if txn is None or (h.pos < header_end and not (h.expect(b"\x20") and h.varint())) or h.pos != header_end:
        return None
    return Reader(block, header_end, end), txn_at, txn[1]


@dataclass
class RequestLayout:
    """Where the first frame's fields are, in a Request whose operation's request starts with its ledgerId and
    entryId (AddRequest, ReadRequest)."""
    header_end: int  # the header field (tag, length, header) is row[4:header_end]
    txn: slice  # the header's txnId varint in a row
    request_ledger: bytes  # the ledgerId varint, echoed in the answers
    entry: slice  # the entryId varint in a row
    rest: Reader  # the fields after the entryId, to the frame's end


def ledger_entry_request(block: bytes, payload_size: int, operation: int, tag: bytes) -> RequestLayout | None:
    """The first frame's layout, if it is a Request of ``operation`` whose request (field ``tag``, nothing after
    it: a requestContext is no run) starts with its ledgerId and entryId."""
    end = 4 + payload_size
    found = request_header(block, end, operation)
    if found is None:
        return None
    r, txn_at, txn_len = found
    header_end = r.pos
    inner = r.expect(tag) and r.varint()
    if not inner or r.pos + inner[0] != end:
        return None
    a = Reader(block, r.pos, end)
    if not a.expect(b"\x08"):
        return None
    ledger_at = a.pos
    if a.varint() is None or not a.expect(b"\x10"):
        return None
    request_ledger = bytes(block[ledger_at:a.pos - 1])
    entry_at = a.pos
    if a.varint() is None:
        return None
    return RequestLayout(header_end, slice(txn_at, txn_at + txn_len), request_ledger, slice(entry_at, a.pos), a)


def varints_end_at(columns: np.ndarray) -> bool:
    """Whether every row of ``columns`` is one varint exactly as long as the columns."""
    return bool((columns[:, :-1] & 0x80).all() and not (columns[:, -1] & 0x80).any())


def rows_alike(block: bytes, payload_size: int, count: int, varints: list[slice],
               others: list[slice] = ()) -> np.ndarray | None:
    """The frames as rows, if every byte but those of ``varints`` and ``others`` is the first frame's and each
    of ``varints`` ends where the first frame's does; None otherwise."""
    rows = np.frombuffer(block, dtype=np.uint8, count=count * (payload_size + 4)).reshape(count, payload_size + 4)
    constant = np.ones(payload_size + 4, dtype=bool)
    for columns in (*varints, *others):
        constant[columns] = False
    if not (rows[:, constant] == rows[0, constant]).all():
        return None
    return rows if all(varints_end_at(rows[:, columns]) for columns in varints) else None


def varint_values(columns: np.ndarray) -> np.ndarray:
    """The values of varints laid out as columns, one a row (each exactly as long as the columns)."""
    columns = columns.astype(np.int64)
    values = np.zeros(len(columns), dtype=np.int64)
    for k in range(columns.shape[1]):
        values |= (columns[:, k] & 0x7F) << (7 * k)
    return values


def varint_lengths(values: np.ndarray) -> np.ndarray:
    """The length in bytes of each (non-negative) value's varint."""
    lengths = np.ones(len(values), dtype=np.int64)
    for k in range(1, 9):
        lengths += values >= (1 << (7 * k))
    return lengths


def varint_columns(values: np.ndarray, length: int) -> np.ndarray:
    """``values`` as varints of ``length`` bytes each, one a row (each value's varint must be that long)."""
    out = np.empty((len(values), length), dtype=np.uint8)
    for k in range(length):
        out[:, k] = ((values >> (7 * k)) & 0x7F) | (0x80 if k < length - 1 else 0)
    return out


def fill_rows(count: int, parts: list[np.ndarray]) -> np.ndarray:
    """``count`` rows made of ``parts`` side by side: each a row's bytes (the same in every row, 1-D) or one
    row per row (2-D)."""
    width = sum(part.shape[-1] for part in parts)
    out = np.empty((count, width), dtype=np.uint8)
    col = 0
    for part in parts:
        out[:, col:col + part.shape[-1]] = part
        col += part.shape[-1]
    return out


def as_columns(data: bytes) -> np.ndarray:
    """Bytes that every row holds at one place."""
    return np.frombuffer(data, dtype=np.uint8)


def encode_answers(rows: np.ndarray, layout: RequestLayout, tag: bytes, code: int, after_entry: list[np.ndarray]) \
        -> bytes:
    """Framed v3 Responses, one to each row's request, in one buffer: the request's header (txnId included),
    status ``code``, and the operation's response (field ``tag``): status ``code``, the request's ledgerId and
    entryId, then ``after_entry`` (the response's further fields, as byte columns)."""
    code_field = varint(code)
    entry_len = layout.entry.stop - layout.entry.start
    after_len = sum(part.shape[-1] for part in after_entry)
    inner_len = 2 + len(code_field) + len(layout.request_ledger) + 1 + entry_len + after_len
    header = rows[:, 4:layout.header_end]
    middle = b"".join((b"\x10", code_field, tag, varint(inner_len), b"\x08", code_field, b"\x10",
                       layout.request_ledger, b"\x18"))
    size = header.shape[1] + len(middle) + entry_len + after_len
    return fill_rows(len(rows), [as_columns(entry_format.FRAME.pack(size)), header, as_columns(middle),
                                 rows[:, layout.entry], *after_entry]).tobytes()
