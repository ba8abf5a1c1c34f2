"""LedgerReader._stream_from puts each verified entry of a bookie's range-read messages at its place:
whole runs (every entry, or every stride-th) in one slice, anything else entry by entry; entries that
fail their digest, or fall outside the range asked, are left out."""
from __future__ import annotations

import types

import pytest

from bookie.client.ledger_entry import LedgerEntry
from bookie.client.ledger_reader import LedgerReader
from bookie.ledger_id import LedgerId
from bookie.proto import status
from bookie.proto.checksum import DigestManager

LEDGER = LedgerId.of(77)
DIGEST = DigestManager(LEDGER, b"pw")


def payload(e: int) -> bytes:
    return b"entry-%d-" % e + bytes(e % 13)


def framed(ids, digest=DIGEST) -> bytes:
    return b"".join(digest.build_framed(e, e - 1, 0, [payload(e)])[0] for e in ids)


def reader_of(*blobs) -> LedgerReader:
    messages = [types.SimpleNamespace(status=status.EOK, entries=blob, message="") for blob in blobs]
    client = types.SimpleNamespace(read_entries=lambda *a, **k: iter(messages))
    bk = types.SimpleNamespace(conf=types.SimpleNamespace(readBatchBytes=1 << 20, readTimeout=1.0),
                               bookie_client=lambda bookie: client)
    return LedgerReader(bk, LEDGER, DIGEST)


def stream(reader, first, last, base, size, stride=0, offset=0):
    result = [None] * size
    assert reader._stream_from("b", first, last, stride, offset, result, base) is None
    return result


def expected(ids, base, size):
    out = [None] * size
    for e in ids:
        out[e - base] = LedgerEntry(LEDGER.ledger_id, e, payload(e))
    return out


@pytest.mark.parametrize("equal_sizes", [True, False])
def test_a_contiguous_run(equal_sizes):
    ids = range(10, 60)
    blob = framed(ids) if not equal_sizes else b"".join(
        DIGEST.build_framed(e, e - 1, 0, [b"%06d" % e])[0] for e in ids)
    result = stream(reader_of(blob), 10, 59, 5, 60)
    want = expected(ids, 5, 60) if not equal_sizes else [None] * 5 + [
        LedgerEntry(LEDGER.ledger_id, e, b"%06d" % e) for e in ids] + [None] * 5
    assert result == want
    assert all(type(e) is LedgerEntry for e in result if e is not None)


def test_a_stride_in_two_messages():
    ids = list(range(1, 40, 3))
    result = stream(reader_of(framed(ids[:6]), framed(ids[6:])), 0, 39, 0, 40, stride=3, offset=1)
    assert result == expected(ids, 0, 40)


def test_entries_outside_the_range_are_left_out():
    result = stream(reader_of(framed(range(0, 20))), 5, 14, 5, 10)
    assert result == expected(range(5, 15), 5, 10)


def test_a_bad_digest_leaves_only_that_entry_out():
    blob = bytearray(framed(range(0, 12)))
    blob[-1] ^= 0xFF  # the last entry's payload
    result = stream(reader_of(bytes(blob)), 0, 11, 0, 12)
    assert result == expected(range(0, 11), 0, 12)


def test_a_frame_of_another_ledger_is_checked_entry_by_entry():
    other = DigestManager(LedgerId.of(78), b"pw")
    blob = framed(range(0, 4)) + framed([4], other) + framed(range(5, 8))
    result = stream(reader_of(blob), 0, 7, 0, 8)
    assert result == expected([0, 1, 2, 3, 5, 6, 7], 0, 8)


def test_ids_that_are_not_one_run_go_entry_by_entry():
    ids = [0, 1, 2, 5, 6, 9]
    assert stream(reader_of(framed(ids)), 0, 9, 0, 10) == expected(ids, 0, 10)
