"""Digests of entries and LAC blobs (BookKeeper's DigestManager).

| type   | proto code | digest bytes | value                              |
|--------|-----------|--------------|-------------------------------------|
| crc32  | 1         | 8            | java.util.zip.CRC32 as i64          |
| mac    | 2 (HMAC)  | 20           | HMAC-SHA1, key SHA1("mac" + pw)     |
| crc32c | 3         | 4            | Castagnoli CRC as i32 (the default) |
| dummy  | 4         | 0            | none                                |

The digest covers the entry header followed by the payload. The master key a client sends to
bookies is SHA1("ledger" + password), 20 bytes, whatever the digest type.

A reader checks a message in bulk: ids and offsets as numpy arrays (``verify_columns``, ``verify_spans``).
With a CRC digest, _MIN_MESSAGE_CHECK (16) or more entries of one size are checked by one CRC call over
header + payload + stored CRC of each (``_rows_check_out``), not two calls per entry; only if that fails
are they checked entry by entry, to name the bad ones.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import hmac
import struct
import zlib

import crc32c as _crc32c
import numpy as np

from bookie.exceptions import BKDigestMatchException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto.columnar_framing import PayloadColumn, frame_batch

_LAC_BLOB = struct.Struct(">qq")  # LAC_METADATA_LENGTH = 16
_U64 = struct.Struct(">Q")  # CRC32 value widened to a Java long
_U32 = struct.Struct(">I")
_V1_FRAME_IDS = struct.Struct(">iqq")  # frame size, ledger id, entry id
_V2_FRAME_IDS = struct.Struct(">iBqqq")  # frame size, flags, scope, ledger id, entry id


class DigestType(enum.IntEnum):
    """Values are the proto ``DigestType`` codes (also the low bits of a V2 entry's flags)."""

    CRC32 = 1
    MAC = 2
    CRC32C = 3
    DUMMY = 4

    @classmethod
    def parse(cls, value: "str | int | DigestType") -> "DigestType":
        if isinstance(value, DigestType):
            return value
        if isinstance(value, int):
            return cls(value)
        name = str(value).strip().upper()
        name = {"HMAC": "MAC"}.get(name, name)
        if name not in cls.__members__:
            allowed = ", ".join(m.lower() for m in cls.__members__)
            raise ValueError(f"unknown digest type {value!r}; allowed: {allowed}")
        return cls[name]


MAC_LENGTH = {DigestType.CRC32: 8, DigestType.MAC: 20, DigestType.CRC32C: 4, DigestType.DUMMY: 0}
_CRC = {DigestType.CRC32: zlib.crc32, DigestType.CRC32C: _crc32c.crc32c}  # the digests framed by columns
_MIN_VECTOR_FRAMING = 8  # fewer entries are framed one by one: numpy's fixed costs would outweigh it
_MIN_MESSAGE_CHECK = 16  # fewer entries of one size are checked one by one (see _rows_check_out)


def generate_master_key(password: bytes) -> bytes:
    """``DigestManager.generateMasterKey``: SHA1("ledger" + password), 20 bytes."""
    return hashlib.sha1(b"ledger" + password).digest()


def mac_key(password: bytes) -> bytes:
    """``MacDigestManager.genDigest("mac", password)``."""
    return hashlib.sha1(b"mac" + password).digest()


class DigestManager:
    """Builds and verifies the entries of one ledger."""

    def __init__(self, ledger: LedgerId, password: bytes, digest_type: DigestType | str = DigestType.CRC32C):
        self.ledger = ledger
        self.digest_type = DigestType.parse(digest_type)
        self.mac_length = MAC_LENGTH[self.digest_type]
        self.header_len = entry_format.header_len_for(ledger.scope_id)
        self._digest = self._make_digest_fn(self.digest_type, password)

    @staticmethod
    def _make_digest_fn(digest_type: DigestType, password: bytes):
        if digest_type is DigestType.CRC32C:
            crc = _crc32c.crc32c
            # Java writes the CRC as an int; the big-endian bytes are the same signed or unsigned.
            return lambda header, payload: _U32.pack(crc(payload, crc(header)))
        if digest_type is DigestType.CRC32:
            return lambda header, payload: _U64.pack(zlib.crc32(payload, zlib.crc32(header)))
        if digest_type is DigestType.MAC:
            key = mac_key(password)

            def hmac_sha1(header, payload):
                h = hmac.new(key, header, hashlib.sha1)
                h.update(payload)
                return h.digest()

            return hmac_sha1
        return lambda header, payload: b""

    # -- entries --------------------------------------------------------------------------------
    def build_entry(self, entry_id: int, lac: int, length: int, payload) -> bytes:
        """One entry: header + digest + payload. ``length`` is the ledger's length including it."""
        header = entry_format.pack_header(self.ledger, entry_id, lac, length, self.digest_type)
        return b"".join((header, self._digest(header, payload), payload))

    def build_frame(self, entry_id: int, lac: int, length: int, payload) -> bytes:
        """One entry, framed (``int32 size | entry``), in one copy."""
        header = entry_format.pack_header(self.ledger, entry_id, lac, length, self.digest_type)
        return b"".join((entry_format.FRAME.pack(self.header_len + self.mac_length + len(payload)), header,
                         self._digest(header, payload), payload))

    def build_framed(self, first_entry_id: int, lac: int, start_length: int, payloads,
                     sizes: np.ndarray | None = None, view: bool = False) -> tuple[bytes | memoryview, int]:
        """Frame consecutive entries into one buffer; returns (blob, ledger length after them). ``sizes``:
        the payloads' sizes (``columnar_framing.payload_sizes``), when the caller has them already;
        ``view``: the blob may be a read-only memoryview (``columnar_framing.frame_batch``)."""
        if self.digest_type in _CRC and isinstance(payloads, (list, PayloadColumn)) and len(payloads) >= _MIN_VECTOR_FRAMING:
            return frame_batch(self.ledger, self.digest_type, _CRC[self.digest_type], self.mac_length, first_entry_id,
                               lac, start_length, payloads, sizes, view)
        parts = []
        length = start_length
        pack_frame = entry_format.FRAME.pack
        extra = self.header_len + self.mac_length
        for i, payload in enumerate(payloads):
            length += len(payload)
            header = entry_format.pack_header(self.ledger, first_entry_id + i, lac, length, self.digest_type)
            parts += (pack_frame(extra + len(payload)), header, self._digest(header, payload), payload)
        return b"".join(parts), length

    def verify(self, entry, expected_entry_id: int | None = None) -> tuple[entry_format.EntryHeader, memoryview]:
        """Check ledger id, entry id and digest; return (header, payload view)."""
        view = memoryview(entry)
        need = self.header_len + self.mac_length
        if len(view) < need:
            raise BKDigestMatchException(f"entry of ledger {self.ledger} is {len(view)} bytes, shorter than its {need}-byte header")
        header = entry_format.parse_header(view)
        if header.ledger != self.ledger:
            raise BKDigestMatchException(f"entry belongs to ledger {header.ledger}, expected ledger {self.ledger}")
        if expected_entry_id is not None and header.entry_id != expected_entry_id:
            raise BKDigestMatchException(f"ledger {self.ledger}: got entry {header.entry_id}, expected entry {expected_entry_id}")
        if header.header_len != self.header_len:
            raise BKDigestMatchException(f"ledger {self.ledger}: entry format does not match the ledger's scope")
        head = view[: self.header_len]
        stored = view[self.header_len: need]
        payload = view[need:]
        if not hmac.compare_digest(self._digest(head, payload), stored):
            raise BKDigestMatchException(
                f"digest mismatch ({self.digest_type.name.lower()}) on entry {header.entry_id} of ledger {self.ledger}")
        return header, payload

    def verify_frames(self, blob: bytes) -> list[tuple[int, bytes | None]]:
        """(entry id, payload) of each framed entry of this ledger in ``blob``, in one pass; the payload is
        None for an entry that fails its ledger id or digest check (read it from another replica)."""
        out = []
        hl, ml = self.header_len, self.mac_length
        want_scope, want_lid = self.ledger
        digest = self._digest
        v1 = want_scope == 0
        unpack = _V1_FRAME_IDS.unpack_from if v1 else _V2_FRAME_IDS.unpack_from
        pos, end = 0, len(blob)
        while pos < end:
            if v1:
                size, lid, eid = unpack(blob, pos)
                scope = 0
            else:
                size, _, scope, lid, eid = unpack(blob, pos)
            start = pos + entry_format.FRAME_LEN
            pos = start + size
            if size < hl + ml or pos > end:
                raise BKDigestMatchException(f"ledger {self.ledger}: a framed entry is cut short")
            payload = blob[start + hl + ml: pos]
            ok = lid == want_lid and scope == want_scope and digest(blob[start: start + hl], payload) == blob[start + hl: start + hl + ml]
            out.append((eid, payload if ok else None))
        return out

    def verify_columns(self, blob: bytes, max_entry_size: int = 1 << 30):
        """Framed entries as columns, for Arrow: (entry ids, payload offsets (n+1), payload bytes, bad ids).

        No Python object per entry: ids and offsets are numpy arrays, payloads one contiguous buffer.
        Entries failing their ledger id or digest check are left out and listed in ``bad ids``.
        """
        ids, starts, ends, bad, rows = self._verify(blob, max_entry_size)
        lengths = ends - starts
        offsets = np.zeros(len(ids) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        if rows is not None and not bad:
            data = rows[:, int(starts[0]):].tobytes()  # equal sizes (row 0 starts the blob): one strided copy
        else:
            view = memoryview(blob)
            data = b"".join(view[s: e] for s, e in zip(starts.tolist(), ends.tolist()))
        return ids, offsets, data, bad

    def verify_spans(self, blob: bytes, max_entry_size: int = 1 << 30):
        """Framed entries checked as ``verify_columns`` does, the payloads left where they are:
        (entry ids, payload starts, payload ends (byte positions in ``blob``), bad ids). For a reader
        that cuts each payload out once (LedgerReader): no second copy of the message."""
        ids, starts, ends, bad, _ = self._verify(blob, max_entry_size)
        return ids, starts, ends, bad

    def digests_ok(self, blob: bytes, frames: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Per framed entry of ``blob`` at ``frames`` (ending at ``ends``), of any ledger of this digest type and
        entry layout (the caller checks each one's ledger id): does its stored digest match?"""
        return self._digests_ok(blob, memoryview(blob), frames + entry_format.FRAME_LEN, ends)

    def _verify(self, blob: bytes, max_entry_size: int):
        try:
            ids, frames, _ = entry_format.scan_batch(blob, self.ledger, max_entry_size)
        except ValueError as exc:
            raise BKDigestMatchException(f"ledger {self.ledger}: {exc}") from None
        ends = np.append(frames[1:], len(blob))
        start = frames + entry_format.FRAME_LEN
        hl, ml = self.header_len, self.mac_length
        # Entries of one size (the common case) are the rows of a matrix: no per-entry slicing.
        stride = int(ends[0] - frames[0]) if len(ids) else 0
        rows = None
        if len(ids) and stride * len(ids) == len(blob) and (np.diff(frames) == stride).all():
            rows = np.frombuffer(blob, dtype=np.uint8).reshape(len(ids), stride)
        good = self._digests_ok(blob, memoryview(blob), start, ends, rows)
        bad = ids[~good].tolist()
        if bad:
            ids, start, ends = ids[good], start[good], ends[good]
        return ids, start + hl + ml, ends, bad, rows

    def _digests_ok(self, blob: bytes, view: memoryview, start: np.ndarray, ends: np.ndarray,
                    rows: np.ndarray | None = None) -> np.ndarray:
        """Per entry: does the stored digest match? CRCs are computed as integers and compared in one go;
        ``rows``: the framed entries as a matrix, where they are all of one size."""
        n, hl, ml = len(start), self.header_len, self.mac_length
        if self.digest_type in (DigestType.CRC32C, DigestType.CRC32):
            crc = _CRC[self.digest_type]
            if rows is not None and n >= _MIN_MESSAGE_CHECK and _rows_check_out(crc, rows, hl, ml):
                return np.ones(n, dtype=bool)
            # Entry by entry: entries of mixed sizes, few of them, or a message that failed the check above.
            data = np.frombuffer(blob, dtype=np.uint8)
            stored = data[(start + hl + (ml - 4))[:, None] + np.arange(4)].copy().view(">u4").ravel()
            if rows is not None:
                at = entry_format.FRAME_LEN
                computed = np.fromiter(map(crc, rows[:, at + hl + ml:], map(crc, rows[:, at: at + hl])),
                                       dtype=np.uint32, count=n)
            else:
                computed = np.fromiter((crc(view[s + hl + ml: e], crc(view[s: s + hl]))
                                        for s, e in zip(start.tolist(), ends.tolist())), dtype=np.uint32, count=n)
            good = computed == stored
            if ml == 8:  # CRC32 is stored widened to a long: its high half must be zero
                good &= data[(start + hl)[:, None] + np.arange(4)].sum(axis=1) == 0
            return good
        digest = self._digest
        return np.fromiter((digest(view[s: s + hl], view[s + hl + ml: e]) == view[s + hl: s + hl + ml]
                            for s, e in zip(start.tolist(), ends.tolist())), dtype=bool, count=n)

    # -- LAC blobs (explicit LAC) -------------------------------------------------------------
    def build_lac(self, lac: int) -> bytes:
        head = _LAC_BLOB.pack(self.ledger.ledger_id, lac)
        return head + self._digest(head, b"")

    def verify_lac(self, blob) -> int:
        view = memoryview(blob)
        if len(view) != _LAC_BLOB.size + self.mac_length:
            raise BKDigestMatchException(f"LAC blob of ledger {self.ledger} has {len(view)} bytes")
        head = view[: _LAC_BLOB.size]
        if not hmac.compare_digest(self._digest(head, b""), view[_LAC_BLOB.size:]):
            raise BKDigestMatchException(f"digest mismatch on the LAC blob of ledger {self.ledger}")
        lid, lac = _LAC_BLOB.unpack(head)
        if lid != self.ledger.ledger_id:
            raise BKDigestMatchException(f"LAC blob belongs to ledger {lid}, expected {self.ledger}")
        return lac


# A CRC-32 / CRC-32C register run over a message followed by its own CRC (little-endian) ends at a
# constant, the residue, whatever the message; and the CRC of blocks laid end to end depends only on
# each block's CRC and length (what zlib's crc32_combine computes). So n equal-sized blocks, each an
# entry's header + payload + its stored CRC, all check out exactly when the CRC of all of them is the
# CRC of n valid blocks of that size: one call over the message instead of two per entry (a call costs
# ~0.25 µs on this project's machines, however short its input). A mismatch sends the caller back to
# entry-by-entry checks, to name the entries that fail.
def _rows_check_out(crc, rows: np.ndarray, header_len: int, mac_length: int) -> bool:
    """Do all the framed entries of ``rows`` (one per row, all of one size) carry their header and
    payload's CRC? Only CRC digests (CRC32C, CRC32 widened to 8 bytes: its high half must be zero)."""
    at = entry_format.FRAME_LEN
    digest_end = at + header_len + mac_length
    if mac_length == 8 and rows[:, at + header_len: digest_end - 4].any():
        return False
    n, payload_len = rows.shape[0], rows.shape[1] - digest_end
    blocks = np.empty((n, header_len + payload_len + 4), dtype=np.uint8)
    blocks[:, :header_len] = rows[:, at: at + header_len]
    blocks[:, header_len: header_len + payload_len] = rows[:, digest_end:]
    blocks[:, header_len + payload_len:] = rows[:, digest_end - 4: digest_end][:, ::-1]  # stored big-endian
    return crc(blocks) == _valid_blocks_crc(crc, n, blocks.shape[1])


@functools.lru_cache(maxsize=256)
def _valid_blocks_crc(crc, count: int, block_len: int) -> int:
    """The CRC of ``count`` blocks of ``block_len`` bytes that each end with their own CRC (zeros here:
    by the argument above any valid blocks of that size give the same)."""
    body = bytes(block_len - 4)
    return crc((body + struct.pack("<I", crc(body))) * count)
