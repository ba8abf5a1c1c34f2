"""Entry format on the wire, in the journal and in entry logs (BookKeeper's DigestManager layout; the v2 header is BP-35's).

V1 (scope 0), big-endian, 32-byte header::

    ledgerId:i64 | entryId:i64 | lastAddConfirmed:i64 | length:i64 | digest[macLen] | payload

V2 (BP-35, any scope): a flags byte whose top bit is set, then the scope id, 41-byte header::

    flags:u8 | scopeId:i64 | ledgerId:i64 | entryId:i64 | lastAddConfirmed:i64 | length:i64 | digest | payload

flags = 0x80 | version << 4 | digest type; version is 2. The seed's byte offsets disagree with themselves
(8-byte flags vs digest at byte 37); we follow its size accounting ("one byte for version, 8 bytes for
the msb": V1 + 9 bytes). A V1 entry starts with a non-negative ledger id, so its first byte is < 0x80.

Many entries travel and are stored *framed*: ``int32 size | entry``, back to back. That is BookKeeper's
journal and entry-log record format, so a framed batch from a client is written to both as it is.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from bookie.ledger_id import LedgerId

V1_HEADER = struct.Struct(">qqqq")
V2_HEADER = struct.Struct(">Bqqqqq")
V1_HEADER_LEN = V1_HEADER.size  # METADATA_LENGTH = 32
V2_HEADER_LEN = V2_HEADER.size  # 41
ENTRY_FORMAT_V2 = 2
V2_FLAG = 0x80
FRAME = struct.Struct(">i")
FRAME_LEN = FRAME.size
_V1_IDS = struct.Struct(">qqq")  # ledger id, entry id, lac
_V2_IDS = struct.Struct(">qqqq")  # scope, ledger id, entry id, lac

# Negative entry ids mark metadata records in the journal (BookieImpl); never real entries.
METAENTRY_ID_LEDGER_KEY = -0x1000
METAENTRY_ID_FENCE_KEY = -0x2000
METAENTRY_ID_FORCE_LEDGER = -0x4000
METAENTRY_ID_LEDGER_EXPLICITLAC = -0x8000
INVALID_ENTRY_ID = -1


class EntryHeader(NamedTuple):
    ledger: LedgerId
    entry_id: int
    last_add_confirmed: int
    length: int
    header_len: int


def is_v2(first_byte: int) -> bool:
    return first_byte >= V2_FLAG


def header_len_for(scope_id: int) -> int:
    return V1_HEADER_LEN if scope_id == 0 else V2_HEADER_LEN


def pack_header(ledger: LedgerId, entry_id: int, lac: int, length: int, digest_code: int) -> bytes:
    """The fixed header of an entry (or of a journal meta-record) for ``ledger``'s scope."""
    if ledger.scope_id == 0:
        return V1_HEADER.pack(ledger.ledger_id, entry_id, lac, length)
    flags = V2_FLAG | (ENTRY_FORMAT_V2 << 4) | (digest_code & 0x0F)
    return V2_HEADER.pack(flags, ledger.scope_id, ledger.ledger_id, entry_id, lac, length)


def parse_header(buf, offset: int = 0) -> EntryHeader:
    """Decode the header of the entry starting at ``offset`` (raises struct.error if too short)."""
    if is_v2(buf[offset]):
        _, scope, lid, eid, lac, length = V2_HEADER.unpack_from(buf, offset)
        return EntryHeader(LedgerId(scope, lid), eid, lac, length, V2_HEADER_LEN)
    lid, eid, lac, length = V1_HEADER.unpack_from(buf, offset)
    return EntryHeader(LedgerId(0, lid), eid, lac, length, V1_HEADER_LEN)


def peek_ids(buf, offset: int) -> tuple[int, int, int, int]:
    """(scope, ledger id, entry id, lac) of the entry at ``offset``: the bookie reads only these."""
    if buf[offset] >= V2_FLAG:
        return _V2_IDS.unpack_from(buf, offset + 1)
    return (0, *_V1_IDS.unpack_from(buf, offset))


def frame(entries) -> bytes:
    """Frame entries (``int32 size | entry`` each) into one buffer."""
    parts = []
    for entry in entries:
        parts.append(FRAME.pack(len(entry)))
        parts.append(entry)
    return b"".join(parts)


def iter_frames(blob):
    """Yield a memoryview of each framed entry in ``blob``."""
    view = memoryview(blob)
    offset, end = 0, len(view)
    while offset < end:
        (size,) = FRAME.unpack_from(view, offset)
        if size < 0 or offset + FRAME_LEN + size > end:
            raise ValueError(f"bad frame at byte {offset} of {end}: size {size}")
        yield view[offset + FRAME_LEN: offset + FRAME_LEN + size]
        offset += FRAME_LEN + size


def count_frames(blob) -> int:
    """How many framed entries ``blob`` holds (ValueError as ``iter_frames``): many of one size are counted by
    ``framed_rows``, others by walking their size fields."""
    view = memoryview(blob)
    if len(view) >= FRAME_LEN:
        stride = FRAME.unpack_from(view, 0)[0] + FRAME_LEN
        if stride > FRAME_LEN and not len(view) % stride and len(view) // stride >= 16 \
                and framed_rows(blob) is not None:
            return len(view) // stride
    return sum(1 for _ in iter_frames(blob))


_V1_FRAMED = struct.Struct(">iqqq")  # size, ledger id, entry id, lac
_V2_FRAMED = struct.Struct(">iBqqqq")  # size, flags, scope, ledger id, entry id, lac
_V2_VERSION_MASK = 0xF0  # the flags byte: 0x80 | version << 4 | digest type
_V2_VERSION_BITS = V2_FLAG | (ENTRY_FORMAT_V2 << 4)
_V1_META = struct.Struct(">qq")
_V2_META = struct.Struct(">Bqqq")


def peek_meta(buf, offset: int) -> tuple[LedgerId, int, int]:
    """(ledger, entry id, offset of the body) of a journal record; meta-records carry no LAC/length."""
    if buf[offset] >= V2_FLAG:
        _, scope, lid, eid = _V2_META.unpack_from(buf, offset)
        return LedgerId(scope, lid), eid, offset + _V2_META.size
    lid, eid = _V1_META.unpack_from(buf, offset)
    return LedgerId(0, lid), eid, offset + _V1_META.size


def meta_record(ledger: LedgerId, meta_entry_id: int, body: bytes = b"") -> bytes:
    """A framed journal meta-record (master key, fence, explicit LAC)."""
    if ledger.scope_id == 0:
        head = _V1_META.pack(ledger.ledger_id, meta_entry_id)
    else:
        head = _V2_META.pack(V2_FLAG | (ENTRY_FORMAT_V2 << 4), ledger.scope_id, ledger.ledger_id, meta_entry_id)
    return FRAME.pack(len(head) + len(body)) + head + body


_V1_ROWS = np.dtype([("size", ">i4"), ("lid", ">i8"), ("eid", ">i8"), ("lac", ">i8")])
_V2_ROWS = np.dtype([("size", ">i4"), ("flags", "u1"), ("scope", ">i8"), ("lid", ">i8"), ("eid", ">i8"), ("lac", ">i8")])
_MIN_VECTOR_BATCH = 8


def framed_rows(blob, min_rows: int = 1) -> np.ndarray | None:
    """A framed batch as one row per frame (its size field included) of a 2-D uint8 array over ``blob``, if
    every entry has one size and holds its ids (16 bytes or more), and there are ``min_rows`` or more; None
    otherwise (decided by the first frame's size alone when it cannot be)."""
    view = memoryview(blob)
    if len(view) < FRAME_LEN:
        return None
    (size,) = FRAME.unpack_from(view, 0)
    stride = size + FRAME_LEN
    if size < 16 or len(view) % stride or len(view) // stride < min_rows:
        return None
    rows = np.frombuffer(blob, dtype=np.uint8).reshape(len(view) // stride, stride)
    return rows if (rows[:, :FRAME_LEN].copy().view(">i4") == size).all() else None


def row_entry_ids(rows: np.ndarray) -> np.ndarray:
    """The entry ids of ``framed_rows`` (each entry's second 8 bytes), as int64."""
    return rows[:, FRAME_LEN + 8:FRAME_LEN + 16].copy().view(">i8")[:, 0].astype(np.int64)


def scan_batch(blob, ledger: LedgerId, max_entry_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate a framed batch of one ledger's entries.

    Returns (entry ids, frame offsets, highest piggybacked LAC). Raises ValueError naming the first
    frame that is cut short, too large, or of another ledger.
    """
    uniform = _scan_uniform(blob, ledger, max_entry_size)
    return uniform if uniform is not None else _scan_frames(blob, ledger, max_entry_size)


def _uniform_rows(blob, max_entry_size: int):
    """The framed entries of ``blob`` as one strided array of their frame and header fields when every frame
    has the first frame's size and layout (None otherwise, or when too few for numpy to pay off).

    If frames of size s sit back to back, frame k starts at k*(s+4); checking that every size field
    there says s proves the framing, so the header fields are read with one strided view.
    """
    view = memoryview(blob)
    end = len(view)
    if end < FRAME_LEN + V1_HEADER_LEN:
        return None
    (size,) = FRAME.unpack_from(view, 0)
    stride = size + FRAME_LEN
    v2 = view[FRAME_LEN] >= V2_FLAG
    rows_type = _V2_ROWS if v2 else _V1_ROWS
    if size < rows_type.itemsize - FRAME_LEN or size > max_entry_size or end % stride or end // stride < _MIN_VECTOR_BATCH:
        return None
    rows = np.ndarray((end // stride,), dtype=rows_type, buffer=view, strides=(stride,))
    if not (rows["size"] == size).all():
        return None
    if v2 and not ((rows["flags"] & _V2_VERSION_MASK) == _V2_VERSION_BITS).all():
        return None
    if (rows["eid"] < 0).any():
        return None  # the loop names the first bad frame
    return rows, stride, v2


def _scan_uniform(blob, ledger: LedgerId, max_entry_size: int):
    """``scan_batch`` without a Python loop when every frame has the first frame's size (None otherwise)."""
    found = _uniform_rows(blob, max_entry_size)
    if found is None:
        return None
    rows, stride, v2 = found
    ok = (ledger.scope_id != 0 and (rows["scope"] == ledger.scope_id).all()) if v2 else ledger.scope_id == 0
    if not (ok and (rows["lid"] == ledger.ledger_id).all()):
        return None  # the loop names the first bad frame
    return rows["eid"].astype(np.int64), np.arange(0, len(rows) * stride, stride, dtype=np.int64), int(rows["lac"].max())


def scan_ledgers(blob, max_entry_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Framed entries of any ledgers (a ReadEntriesOfLedgers message): (scope ids, ledger ids, entry ids, frame
    offsets). Raises ValueError naming the first frame that is cut short or too large."""
    found = _uniform_rows(blob, max_entry_size)
    if found is not None:
        rows, stride, v2 = found
        scopes = rows["scope"].astype(np.int64) if v2 else np.zeros(len(rows), dtype=np.int64)
        if v2 and not scopes.all():
            return _scan_ledger_frames(blob, max_entry_size)  # names the V2 entry of scope 0
        return (scopes, rows["lid"].astype(np.int64), rows["eid"].astype(np.int64),
                np.arange(0, len(rows) * stride, stride, dtype=np.int64))
    return _scan_ledger_frames(blob, max_entry_size)


def _scan_ledger_frames(blob, max_entry_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    scopes, lids, eids, _, offsets = _frames(blob, max_entry_size)
    return (np.array(scopes, dtype=np.int64), np.array(lids, dtype=np.int64), np.array(eids, dtype=np.int64),
            np.array(offsets, dtype=np.int64))


def _frames(blob, max_entry_size: int) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """(scopes, ledger ids, entry ids, LACs, frame offsets) of each framed entry, one at a time; ValueError
    naming the first frame that is cut short, too large, not a V2 entry where it says it is, or of the V2
    layout with scope 0."""
    view = memoryview(blob)
    end = len(view)
    scopes: list[int] = []
    lids: list[int] = []
    eids: list[int] = []
    lacs: list[int] = []
    offsets: list[int] = []
    offset = 0
    while offset < end:
        if offset + FRAME_LEN + V1_HEADER_LEN > end:
            raise ValueError(f"frame at byte {offset} is cut short ({end - offset} bytes left)")
        if view[offset + FRAME_LEN] < V2_FLAG:
            size, lid, eid, lac = _V1_FRAMED.unpack_from(view, offset)
            scope, header = 0, V1_HEADER_LEN
        else:
            if offset + FRAME_LEN + V2_HEADER_LEN > end:
                raise ValueError(f"frame at byte {offset} is cut short ({end - offset} bytes left)")
            size, flags, scope, lid, eid, lac = _V2_FRAMED.unpack_from(view, offset)
            header = V2_HEADER_LEN
            if flags & _V2_VERSION_MASK != _V2_VERSION_BITS:
                raise ValueError(f"entry at byte {offset} has flags 0x{flags:02x}: not a V2 entry "
                                 f"(0x{_V2_VERSION_BITS:02x} | digest type)")
            if scope == 0:
                raise ValueError(f"entry at byte {offset} has the V2 (BP-35) layout with scope 0: entries of "
                                 "scope-0 ledgers use the V1 layout")
        if size < header or size > max_entry_size or offset + FRAME_LEN + size > end:
            raise ValueError(f"frame at byte {offset} has size {size} (allowed {header}..{max_entry_size}, "
                             f"{end - offset - FRAME_LEN} bytes left)")
        scopes.append(scope)
        lids.append(lid)
        eids.append(eid)
        lacs.append(lac)
        offsets.append(offset)
        offset += FRAME_LEN + size
    return scopes, lids, eids, lacs, offsets


def _scan_frames(blob, ledger: LedgerId, max_entry_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``scan_batch`` of frames of any sizes: ``_frames``, then every entry must be the ledger's, with an id."""
    scopes, lids, eids, lacs, offsets = _frames(blob, max_entry_size)
    if not eids:
        raise ValueError("empty batch: no entries")
    ids = np.array(eids, dtype=np.int64)
    bad = np.flatnonzero((np.array(lids, dtype=np.int64) != ledger.ledger_id)
                         | (np.array(scopes, dtype=np.int64) != ledger.scope_id) | (ids < 0))
    if len(bad):  # the first bad frame, named
        k = int(bad[0])
        if (scopes[k], lids[k]) != ledger:
            raise ValueError(f"entry at byte {offsets[k]} belongs to ledger {LedgerId(scopes[k], lids[k])}, not {ledger}")
        raise ValueError(f"entry at byte {offsets[k]} has negative entry id {eids[k]}")
    return ids, np.array(offsets, dtype=np.int64), max(lacs)


def frames_at(span: bytes, rel: np.ndarray, sizes: np.ndarray) -> list:
    """The framed records at ``rel`` (record starts, after the size) of ``span``, as buffers to join.

    Equal records at equal distances (a striped read of equal-sized entries: every other record of
    the log) come out with one strided numpy copy; anything else one slice per record.
    """
    n, first = len(rel), int(rel[0]) - FRAME_LEN
    frame = int(sizes[0]) + FRAME_LEN
    if n > 1 and (sizes == sizes[0]).all():
        step = int(rel[1] - rel[0])
        if step >= frame and (np.diff(rel) == step).all():
            # one opaque item per record, so numpy copies each with one memcpy
            return [np.ndarray((n,), dtype=f"V{frame}", buffer=span, offset=first, strides=(step,)).tobytes()]
    view = memoryview(span)
    return [view[r - FRAME_LEN: r + size] for r, size in zip(rel.tolist(), sizes.tolist())]


def gather_be(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian signed integers of ``width`` bytes at byte positions ``at`` of ``data``."""
    raw = data[at[:, None] + np.arange(width)]
    return raw.copy().view(f">i{width}").ravel()
