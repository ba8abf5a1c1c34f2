"""The bookie's hand-encoded ReadRangeResponse is byte for byte what protobuf makes of the same fields."""
from __future__ import annotations

import pytest

from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from bookie.proto.read_range import encode_read_range_response, encode_read_ranges_response


@pytest.mark.parametrize("parts, count, covered, max_lac, code, message", [
    ([b"abc", memoryview(b"defgh")], 2, 41, 40, status.EOK, ""),
    ([], 0, -1, -1, status.EOK, ""),  # negative int64s are ten-byte varints
    ([b"x" * 300_000], 1, 2 ** 40, 2 ** 63 - 1, status.EOK, ""),
    ([], 0, 0, 0, status.ENOLEDGER, "no ledger 7 on this bookie (é)"),
    ([b""], 0, 127, 128, status.EOK, ""),  # varint boundaries
])
def test_encoded_like_protobuf(parts, count, covered, max_lac, code, message):
    encoded = encode_read_range_response(parts, count, covered, max_lac, code, message)
    expected = pb.ReadRangeResponse(status=code, entries=b"".join(parts), entryCount=count,
                                    lastEntryIdCovered=covered, maxLAC=max_lac, message=message)
    assert encoded == expected.SerializeToString()
    assert pb.ReadRangeResponse.FromString(encoded) == expected


@pytest.mark.parametrize("parts, count, covered", [
    ([b"abc", memoryview(b"defgh")], 2, 3), ([], 0, 0), ([b"x" * 300_000], 1, 2 ** 20), ([b""], 0, 127)])
def test_ranges_answer_encoded_like_protobuf(parts, count, covered):
    encoded = encode_read_ranges_response(parts, count, covered)
    expected = pb.ReadRangesResponse(status=status.EOK, entries=b"".join(parts), entryCount=count,
                                     rangesCovered=covered)
    assert encoded == expected.SerializeToString()
