"""Framing by columns (bookie/proto/columnar_framing.py) gives the very bytes of framing entry by entry,
for both entry formats, both CRC digests, one or many payload sizes; the header CRC tables agree with
the CRC itself."""
from __future__ import annotations

import random
import zlib

import crc32c
import numpy as np
import pytest

from bookie.ledger_id import LedgerId
from bookie.proto import checksum
from bookie.proto.checksum import DigestManager
from bookie.proto.columnar_framing import HeaderCrcs, PayloadColumn

pytestmark = pytest.mark.unit


def one_by_one(digest: DigestManager, first: int, lac: int, length: int, payloads) -> tuple[bytes, int]:
    frames = []
    for k, payload in enumerate(payloads):
        length += len(payload)
        frames.append(digest.build_frame(first + k, lac, length, payload))
    return b"".join(frames), length


def framed_as_view(digest: DigestManager, *args) -> tuple[bytes, int]:
    """``build_framed(..., view=True)``: a read-only view where it frames by columns; its bytes."""
    blob, length = digest.build_framed(*args, view=True)
    if isinstance(blob, memoryview):
        assert blob.readonly and blob.ndim == 1 and blob.itemsize == 1 and len(blob) == blob.nbytes
    return bytes(blob), length


def payload_sets(rng: random.Random, count: int) -> dict[str, list]:
    mixed = [rng.randbytes(rng.choice([0, 1, 37, 1024])) for _ in range(count)]
    return {"mixed": mixed, "one size": [rng.randbytes(1024) for _ in range(count)], "empty": [b""] * count,
            "bytearray": [bytearray(p) for p in mixed], "memoryview": [memoryview(p) for p in mixed]}


@pytest.mark.parametrize("ledger", [LedgerId(0, 5), LedgerId(0, 2**62), LedgerId(7, 99), LedgerId(-3, 1)],
                         ids=["v1", "v1 large id", "v2", "v2 negative scope"])
@pytest.mark.parametrize("digest_type", ["crc32c", "crc32"])
@pytest.mark.parametrize("first,lac,start", [(0, -1, 0), (17, 12, 1000), (2**40, 2**40 - 1, 2**50)])
def test_the_bytes_are_those_of_framing_entry_by_entry(ledger, digest_type, first, lac, start):
    digest = DigestManager(ledger, b"pw", digest_type)
    rng = random.Random(f"{ledger}{digest_type}{first}")
    for count in (checksum._MIN_VECTOR_FRAMING, 300):
        for name, payloads in payload_sets(rng, count).items():
            expected = one_by_one(digest, first, lac, start, payloads)
            assert digest.build_framed(first, lac, start, payloads) == expected, name
            assert framed_as_view(digest, first, lac, start, payloads) == expected, name


def test_mac_digests_and_short_batches_are_framed_one_by_one_alike():
    payloads = [b"a", b"bc"] * 10
    for digest in (DigestManager(LedgerId(0, 3), b"pw", "mac"), DigestManager(LedgerId(0, 3), b"pw", "dummy")):
        assert digest.build_framed(4, 3, 10, payloads) == one_by_one(digest, 4, 3, 10, payloads)
    digest = DigestManager(LedgerId(0, 3), b"pw")
    assert digest.build_framed(4, 3, 10, payloads[:3]) == one_by_one(digest, 4, 3, 10, payloads[:3])


@pytest.mark.parametrize("crc", [crc32c.crc32c, zlib.crc32], ids=["crc32c", "crc32"])
def test_header_crc_tables_agree_with_the_crc(crc):
    rng = np.random.default_rng(1)
    length, positions = 32, (3, 8, 9, 31)
    reference = bytearray(rng.integers(0, 256, length, dtype=np.uint8).tobytes())
    for p in positions:
        reference[p] = 0
    headers = np.repeat(np.frombuffer(bytes(reference), dtype=np.uint8)[None, :], 500, axis=0)
    headers[:, list(positions)] = rng.integers(0, 256, (500, len(positions)), dtype=np.uint8)
    crcs = HeaderCrcs(crc, length, positions).of(headers, bytes(reference))
    assert crcs.tolist() == [crc(row.tobytes()) for row in headers]


# -- payloads as one buffer and its offsets --------------------------------------------------------------
def column_of(payloads: list[bytes], lead: bytes = b"") -> PayloadColumn:
    """``payloads`` back to back after ``lead`` (as in an Arrow array sliced past its first rows)."""
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in payloads])]) + len(lead)
    return PayloadColumn.of(lead + b"".join(payloads), offsets)


@pytest.mark.parametrize("ledger", [LedgerId(0, 5), LedgerId(7, 99)], ids=["v1", "v2"])
@pytest.mark.parametrize("digest_type", ["crc32c", "crc32", "mac"])
def test_a_payload_column_frames_as_its_list_does(ledger, digest_type):
    digest = DigestManager(ledger, b"pw", digest_type)
    rng = random.Random(f"{ledger}{digest_type}")
    for count in (3, checksum._MIN_VECTOR_FRAMING, 300):
        for name, payloads in payload_sets(rng, count).items():
            payloads = [bytes(p) for p in payloads]
            column = column_of(payloads, lead=b"skipped")
            assert [bytes(p) for p in column] == payloads
            expected = one_by_one(digest, 9, 8, 77, payloads)
            assert digest.build_framed(9, 8, 77, column) == expected, name
            assert framed_as_view(digest, 9, 8, 77, column) == expected, name


def test_a_payload_column_slices_and_sizes_like_a_list():
    payloads = [b"a", b"", b"bcd", b"ef", b"g"]
    column = column_of(payloads, lead=b"xy")
    for piece in (slice(0, 5), slice(1, 3), slice(2, 2), slice(4, 9), slice(3, 1)):
        part = column[piece]
        assert [bytes(p) for p in part] == payloads[piece] and len(part) == len(payloads[piece])
        assert part.nbytes == sum(map(len, payloads[piece])) and part.sizes.tolist() == list(map(len, payloads[piece]))


@pytest.mark.parametrize("offsets,message", [
    ([[0, 1]], "1-D"), ([], "at least one"), ([-1, 2], "rise from 0"), ([0, 3, 2], "rise from 0"), ([0, 9], "at most the buffer's 4 bytes"),
])
def test_bad_payload_offsets_are_refused(offsets, message):
    with pytest.raises(ValueError, match=message):
        PayloadColumn.of(b"abcd", np.array(offsets, dtype=np.int64))
