"""Entry formats (v1 and BP-35 v2), every digest type, LAC blobs, 128-bit ids."""
from __future__ import annotations

import hashlib
import uuid
import zlib

import crc32c
import numpy as np
import pytest

from bookie.exceptions import BKDigestMatchException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto.checksum import MAC_LENGTH, DigestManager, DigestType, generate_master_key

LEDGERS = [LedgerId(0, 12345), LedgerId(0xABCD, (1 << 62) + 7)]


@pytest.mark.parametrize("digest_type", list(DigestType))
@pytest.mark.parametrize("ledger", LEDGERS, ids=["v1", "v2"])
def test_round_trip_and_flipped_byte(ledger, digest_type):
    dm = DigestManager(ledger, b"secret", digest_type)
    entry = dm.build_entry(3, 2, 100, b"payload bytes")
    header_len = entry_format.V1_HEADER_LEN if ledger.scope_id == 0 else entry_format.V2_HEADER_LEN
    assert len(entry) == header_len + MAC_LENGTH[digest_type] + len(b"payload bytes")
    assert (entry[0] >= 0x80) == (ledger.scope_id != 0)  # the first byte tells the formats apart
    header, payload = dm.verify(entry, 3)
    assert (header.ledger, header.entry_id, header.last_add_confirmed, header.length) == (ledger, 3, 2, 100)
    assert payload.tobytes() == b"payload bytes"
    if digest_type is DigestType.DUMMY:
        return  # no digest: nothing detects a payload flip
    for position in (header_len - 1, header_len + 1, len(entry) - 1):  # header, digest, payload
        damaged = bytearray(entry)
        damaged[position] ^= 0x01
        with pytest.raises(BKDigestMatchException):
            dm.verify(bytes(damaged), 3)


def test_digest_values_are_bookkeepers():
    ledger = LedgerId(0, 1)
    header = entry_format.V1_HEADER.pack(1, 0, -1, 5)
    crc_c = DigestManager(ledger, b"", DigestType.CRC32C).build_entry(0, -1, 5, b"hello")
    assert crc_c[32:36] == crc32c.crc32c(header + b"hello").to_bytes(4, "big")
    crc = DigestManager(ledger, b"", DigestType.CRC32).build_entry(0, -1, 5, b"hello")
    assert crc[32:40] == zlib.crc32(header + b"hello").to_bytes(8, "big")
    assert generate_master_key(b"pw") == hashlib.sha1(b"ledgerpw").digest()
    assert generate_master_key(b"") == hashlib.sha1(b"ledger").digest()
    assert DigestType.parse("hmac") is DigestType.MAC and DigestType.parse("crc32c") is DigestType.CRC32C
    with pytest.raises(ValueError, match="allowed: crc32, mac, crc32c, dummy"):
        DigestType.parse("md5")


def test_wrong_ledger_entry_or_password_is_refused():
    dm = DigestManager(LEDGERS[0], b"secret", DigestType.MAC)
    entry = dm.build_entry(4, 3, 10, b"x")
    with pytest.raises(BKDigestMatchException, match="expected entry 5"):
        dm.verify(entry, 5)
    with pytest.raises(BKDigestMatchException, match="expected ledger"):
        DigestManager(LedgerId(0, 1), b"secret", DigestType.MAC).verify(entry)
    with pytest.raises(BKDigestMatchException, match="digest mismatch"):
        DigestManager(LEDGERS[0], b"other", DigestType.MAC).verify(entry)


@pytest.mark.parametrize("ledger", LEDGERS, ids=["v1", "v2"])
def test_lac_blob(ledger):
    dm = DigestManager(ledger, b"pw")
    blob = dm.build_lac(41)
    assert dm.verify_lac(blob) == 41
    with pytest.raises(BKDigestMatchException):
        dm.verify_lac(blob[:-1] + bytes([blob[-1] ^ 1]))


def test_framed_batch_scan():
    ledger = LEDGERS[1]
    blob, length = DigestManager(ledger, b"pw").build_framed(10, 9, 0, [b"a", b"bb", b"ccc"])
    ids, offsets, max_lac = entry_format.scan_batch(blob, ledger, 1 << 20)
    assert ids.tolist() == [10, 11, 12] and max_lac == 9 and length == 6 and offsets[0] == 0
    with pytest.raises(ValueError, match="belongs to ledger"):
        entry_format.scan_batch(blob, LedgerId(0, 1), 1 << 20)
    with pytest.raises(ValueError, match="cut short|size"):
        entry_format.scan_batch(blob[:-1], ledger, 1 << 20)
    with pytest.raises(ValueError, match="allowed"):
        entry_format.scan_batch(blob, ledger, 40)


def test_128_bit_ids():
    lid = LedgerId.of(0x10, scope_id=0xFF)
    assert lid.qualified_name == "00000000000000ff0000000000000010"
    assert LedgerId.from_qualified_name(lid.qualified_name) == lid
    u = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
    split = LedgerId.from_uuid(u)
    assert split == LedgerId(0x123456789ABCDEF0, 0x123456789ABCDEF0)
    for bad in ("xyz", "00" * 15):
        with pytest.raises(ValueError, match="32 hex digits"):
            LedgerId.from_qualified_name(bad)
    with pytest.raises(ValueError, match="2\\^63-1"):
        LedgerId.of(-1)


@pytest.mark.parametrize("ledger", LEDGERS, ids=["v1", "v2"])
def test_equal_size_frames_scan_like_the_loop(ledger):
    """The vectorized scan of equal-size frames gives the loop's answer, and refuses what it refuses."""
    digest = DigestManager(ledger, b"pw")
    blob, _ = digest.build_framed(100, 98, 0, [bytes([i]) * 50 for i in range(20)])
    fast = entry_format.scan_batch(blob, ledger, 1 << 20)
    slow = entry_format._scan_frames(blob, ledger, 1 << 20)
    assert fast[0].tolist() == slow[0].tolist() == list(range(100, 120))
    assert fast[1].tolist() == slow[1].tolist() and fast[2] == slow[2] == 98
    with pytest.raises(ValueError, match="belongs to ledger"):
        entry_format.scan_batch(blob, LedgerId(0, 999), 1 << 20)
    damaged = bytearray(blob)
    damaged[4 + 7 if ledger.scope_id == 0 else 4 + 1 + 8 + 7] ^= 0xFF  # the low byte of entry 0's ledger id
    with pytest.raises(ValueError, match="belongs to ledger"):
        entry_format.scan_batch(bytes(damaged), ledger, 1 << 20)
    mixed = blob + digest.build_framed(120, 98, 0, [b"longer payload" * 9])[0]  # sizes differ: the loop
    assert entry_format.scan_batch(mixed, ledger, 1 << 20)[0].tolist() == list(range(100, 121))


@pytest.mark.parametrize("digest_type", list(DigestType))
@pytest.mark.parametrize("sizes", ["equal", "mixed"])
def test_verify_columns(digest_type, sizes):
    """Columns for Arrow: ids, offsets, one payload buffer; an entry failing its digest is left out."""
    ledger = LEDGERS[0]
    dm = DigestManager(ledger, b"pw", digest_type)
    payloads = [bytes([i]) * (100 if sizes == "equal" else 50 + i) for i in range(20)]
    blob, _ = dm.build_framed(7, 6, 0, payloads)
    ids, offsets, data, bad = dm.verify_columns(blob)
    assert ids.tolist() == list(range(7, 27)) and bad == []
    assert [data[offsets[k]:offsets[k + 1]] for k in range(20)] == payloads
    if digest_type is DigestType.DUMMY:
        return
    damaged = bytearray(blob)
    damaged[blob.index(bytes([5]) * 40) + 3] ^= 0x01  # a payload byte of entry 12
    ids, offsets, data, bad = dm.verify_columns(bytes(damaged))
    assert bad == [12] and 12 not in ids.tolist() and len(ids) == 19
    assert data == b"".join(p for k, p in enumerate(payloads) if k != 5)


@pytest.mark.parametrize("digest_type", list(DigestType))
@pytest.mark.parametrize("sizes", ["equal", "mixed"])
def test_verify_spans_leaves_the_payloads_in_the_blob(digest_type, sizes):
    """The same check, the payloads as byte positions in the message; a bad entry is left out."""
    dm = DigestManager(LEDGERS[0], b"pw", digest_type)
    payloads = [bytes([i]) * (100 if sizes == "equal" else 50 + i) for i in range(20)]
    blob, _ = dm.build_framed(7, 6, 0, payloads)
    ids, starts, ends, bad = dm.verify_spans(blob)
    assert ids.tolist() == list(range(7, 27)) and bad == []
    assert [blob[s:e] for s, e in zip(starts.tolist(), ends.tolist())] == payloads
    if digest_type is DigestType.DUMMY:
        return
    damaged = bytearray(blob)
    damaged[blob.index(bytes([5]) * 40) + 3] ^= 0x01  # a payload byte of entry 12
    ids, starts, ends, bad = dm.verify_spans(bytes(damaged))
    assert bad == [12] and ids.tolist() == [e for e in range(7, 27) if e != 12]
    assert [bytes(damaged[s:e]) for s, e in zip(starts.tolist(), ends.tolist())] == payloads[:5] + payloads[6:]


CRC_DIGESTS = [DigestType.CRC32C, DigestType.CRC32]


def _equal_message(dm: DigestManager, count: int, size: int, seed: int) -> np.ndarray:
    """Entries 40.. of random payloads of one size, framed; one row per entry."""
    rng = np.random.default_rng(seed)
    blob, _ = dm.build_framed(40, 39, 0, [rng.bytes(size) for _ in range(count)])
    return np.frombuffer(blob, dtype=np.uint8).reshape(count, -1)


@pytest.mark.parametrize("digest_type", CRC_DIGESTS)
@pytest.mark.parametrize("ledger", LEDGERS, ids=["v1", "v2"])
def test_a_message_of_equal_entries_checks_out_with_one_crc(ledger, digest_type):
    """The one-call check of a message (checksum._rows_check_out) accepts valid messages of any count
    and size, and refuses a flip of any byte a digest covers (header, stored digest, payload) in any entry."""
    from bookie.proto.checksum import _rows_check_out
    dm = DigestManager(ledger, b"pw", digest_type)
    crc = crc32c.crc32c if digest_type is DigestType.CRC32C else zlib.crc32
    for count, size, seed in ((16, 1, 1), (17, 100, 2), (300, 1024, 3), (64, 4093, 4)):
        rows = _equal_message(dm, count, size, seed)
        assert _rows_check_out(crc, rows, dm.header_len, dm.mac_length)
    rows = _equal_message(dm, 20, 60, 5)
    for entry in (0, 7, 19):
        for at in range(entry_format.FRAME_LEN, rows.shape[1]):
            damaged = rows.copy()
            damaged[entry, at] ^= 0x10
            assert not _rows_check_out(crc, damaged, dm.header_len, dm.mac_length), (entry, at)
    two = rows.copy()  # the same flip in two entries does not cancel out
    two[3, -1] ^= 1
    two[4, -1] ^= 1
    assert not _rows_check_out(crc, two, dm.header_len, dm.mac_length)
    ids, _, _, bad = dm.verify_spans(two.tobytes())
    assert bad == [43, 44] and len(ids) == 18


def test_a_widened_crc32_with_a_high_half_fails_the_message_check():
    dm = DigestManager(LEDGERS[0], b"pw", DigestType.CRC32)
    damaged = _equal_message(dm, 20, 50, 6).copy()
    damaged[9, entry_format.FRAME_LEN + dm.header_len] = 1  # the widened long's high half, entry 49
    ids, _, _, bad = dm.verify_spans(damaged.tobytes())
    assert bad == [49] and 49 not in ids.tolist()


@pytest.mark.parametrize("sizes", [[], [16], [20] * 3, [20] * 40, [20] * 39 + [21], [16, 40] * 20])
def test_count_frames_and_framed_rows(sizes):
    blob = entry_format.frame([bytes([k % 7]) * size for k, size in enumerate(sizes)])
    assert entry_format.count_frames(blob) == len(sizes)
    rows = entry_format.framed_rows(blob, 16)
    uniform = len(set(sizes)) == 1 and len(sizes) >= 16
    assert (rows is not None) == uniform
    if uniform:
        assert rows.shape == (len(sizes), 4 + sizes[0]) and entry_format.row_entry_ids(rows).shape == (len(sizes),)
