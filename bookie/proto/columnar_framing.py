"""Framing a batch of entries by columns: numpy fills every frame's size field, header and CRC digest at
once, instead of Python packing them entry by entry (DigestManager.build_framed's loop: ~1.2 µs per
1 KiB entry, the largest part of a writing client's CPU after gRPC).

The bytes are exactly the loop's (``int32 size | header | digest | payload`` per entry, entry_format.py);
a unit test holds the two together. The headers of a batch differ only in their entry id and ledger
length, so their CRCs come from tables (``HeaderCrcs``) and only the payloads' CRCs are computed one
call per entry, each continuing from its header's CRC.

``DigestManager.build_framed`` takes this path for a CRC digest and _MIN_VECTOR_FRAMING (8) entries or more;
fewer are framed one by one, where numpy's fixed costs would outweigh it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Callable, Iterator

import numpy as np

from bookie.ledger_id import LedgerId
from bookie.proto import entry_format

Crc = Callable[..., int]  # crc(data, value=0): crc32c.crc32c or zlib.crc32


@dataclass(frozen=True)
class PayloadColumn:
    """Payloads back to back in one buffer, payload k being ``data[offsets[k]:offsets[k + 1]]``: Arrow's
    binary layout, so a Spark writer hands a whole Arrow column to ``append_batch`` without making a
    Python object per row (``PayloadColumn.of`` checks the offsets)."""

    data: memoryview
    offsets: np.ndarray  # int64, one more than there are payloads

    @classmethod
    def of(cls, data, offsets) -> "PayloadColumn":
        view = memoryview(data).cast("B")
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or len(offsets) < 1:
            raise ValueError("payload offsets must be a 1-D array of at least one offset")
        if offsets[0] < 0 or offsets[-1] > len(view) or (np.diff(offsets) < 0).any():
            raise ValueError(f"payload offsets must rise from 0 or more to at most the buffer's {len(view)} bytes")
        return cls(view, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, piece: slice) -> "PayloadColumn":
        start, stop, step = piece.indices(len(self))
        if step != 1:
            raise ValueError("a payload column is sliced in steps of 1")
        return PayloadColumn(self.data, self.offsets[start: max(start, stop) + 1])

    def __iter__(self) -> Iterator[memoryview]:
        return map(self.data.__getitem__, map(slice, self.offsets[:-1].tolist(), self.offsets[1:].tolist()))

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def nbytes(self) -> int:
        return int(self.offsets[-1] - self.offsets[0])


def payload_sizes(payloads) -> np.ndarray:
    """Byte size of each payload of a list or a ``PayloadColumn``."""
    if isinstance(payloads, PayloadColumn):
        return payloads.sizes
    return np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))


def read_only_view(array: np.ndarray) -> memoryview:
    """A contiguous array's bytes as a flat read-only memoryview: handed on (joined, sliced, sent)
    without a ``tobytes`` copy, and safe from writes through the array."""
    array.flags.writeable = False
    return memoryview(array.reshape(-1)).cast("B")


@lru_cache(maxsize=None)
def framed_rows(v2: bool, digest_bytes: int) -> np.dtype:
    """A framed entry's bytes before its payload (``int32 size | header | digest``) as one packed record."""
    head = [("size", ">i4")] + ([("flags", "u1"), ("scope", ">i8")] if v2 else [])
    return np.dtype(head + [("lid", ">i8"), ("eid", ">i8"), ("lac", ">i8"), ("length", ">i8"),
                            ("digest", f">u{digest_bytes}")])


class HeaderCrcs:
    """CRCs of many headers of one length that differ only at ``positions``.

    A CRC is affine over GF(2) for messages of one length: crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0). So a
    header h that equals a reference r outside ``positions`` (r being zero there) has
    crc(h) = crc(r) ^ XOR over p of T[p][h[p]], with T[p][v] = crc(v at p, zeros elsewhere) ^ crc(zeros).
    The tables are 256 CRCs per position, made once per process.
    """

    def __init__(self, crc: Crc, length: int, positions: tuple[int, ...]):
        self.crc, self.positions = crc, np.array(positions)
        zero = crc(bytes(length))
        self.tables = np.zeros((len(positions), 256), dtype=np.uint32)
        message = bytearray(length)
        for i, p in enumerate(positions):
            for v in range(1, 256):
                message[p] = v
                self.tables[i, v] = crc(bytes(message)) ^ zero
            message[p] = 0
        self._rows = np.arange(len(positions))[None, :]

    def of(self, headers: np.ndarray, reference: bytes) -> np.ndarray:
        """CRC of each row of ``headers`` (n x length bytes); ``reference`` equals every row outside
        ``positions`` and is zero at them."""
        terms = self.tables[self._rows, headers[:, self.positions]]
        return np.bitwise_xor.reduce(terms, axis=1) ^ np.uint32(self.crc(reference))


@lru_cache(maxsize=None)
def header_crcs(crc: Crc, v2: bool, digest_bytes: int) -> HeaderCrcs:
    """The tables for headers of one format: their entry id and length bytes vary within a batch."""
    fields = framed_rows(v2, digest_bytes).fields
    start = entry_format.FRAME_LEN
    positions = tuple(p - start for name in ("eid", "length") for p in range(fields[name][1], fields[name][1] + 8))
    return HeaderCrcs(crc, entry_format.V2_HEADER_LEN if v2 else entry_format.V1_HEADER_LEN, positions)


def frame_batch(ledger: LedgerId, digest_code: int, crc: Crc, digest_bytes: int, first_entry_id: int, lac: int,
                start_length: int, payloads: "list | PayloadColumn", sizes: np.ndarray | None = None,
                view: bool = False) -> tuple[bytes | memoryview, int]:
    """Entries ``first_entry_id..`` framed back to back, each digest ``crc(header + payload)`` stored in
    ``digest_bytes`` big-endian bytes; returns (blob, the ledger's length through the last entry).
    ``sizes``: the payloads' ``payload_sizes``, when the caller has them already. ``view``: the blob may
    be a read-only memoryview of the framing's own buffer (no copy into bytes), for callers that only
    slice, join or send it."""
    n, v2 = len(payloads), ledger.scope_id != 0
    header_len = entry_format.V2_HEADER_LEN if v2 else entry_format.V1_HEADER_LEN
    sizes = payload_sizes(payloads) if sizes is None else sizes
    rows = np.zeros(n, dtype=framed_rows(v2, digest_bytes))
    rows["size"] = sizes + (header_len + digest_bytes)
    if v2:
        rows["flags"] = entry_format.V2_FLAG | (entry_format.ENTRY_FORMAT_V2 << 4) | (digest_code & 0x0F)
        rows["scope"] = ledger.scope_id
    rows["lid"] = ledger.ledger_id
    rows["eid"] = np.arange(first_entry_id, first_entry_id + n, dtype=np.int64)
    rows["lac"] = lac
    lengths = np.cumsum(sizes) + start_length
    rows["length"] = lengths
    width = rows.dtype.itemsize
    matrix = rows.view(np.uint8).reshape(n, width)
    start = entry_format.FRAME_LEN
    reference = entry_format.pack_header(ledger, 0, lac, 0, digest_code)
    heads = header_crcs(crc, v2, digest_bytes).of(matrix[:, start: start + header_len], reference)
    size = int(sizes[0])
    uniform = bool((sizes == size).all())  # one payload size (the common case): the frames are a matrix's rows
    crc_source = payloads
    if uniform:
        if isinstance(payloads, PayloadColumn):  # already back to back: read in place
            data = np.frombuffer(payloads.data, dtype=np.uint8)[int(payloads.offsets[0]): int(payloads.offsets[-1])]
            data = crc_source = data.reshape(n, size)  # a numpy row costs less than a memoryview slice
        else:
            data = np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(n, size)
    rows["digest"] = np.fromiter(map(crc, crc_source, heads.tolist()), dtype=np.uint64, count=n)
    if uniform:
        out = np.empty((n, width + size), dtype=np.uint8)
        out[:, :width] = matrix
        out[:, width:] = data
        if view:
            return read_only_view(out), int(lengths[-1])
        return out.tobytes(), int(lengths[-1])
    flat = matrix.tobytes()
    prefixes = map(flat.__getitem__, map(slice, range(0, n * width, width), range(width, n * width + 1, width)))
    return b"".join(chain.from_iterable(zip(prefixes, payloads))), int(lengths[-1])
