"""The Spark sink hands Arrow's payload buffers to append_batch as they lie (spark_bookkeeper/writer.py):
binary and string columns, sliced ones included, give exactly their rows' bytes; nulls are refused."""
from __future__ import annotations

import pyarrow as pa
import pytest

from bookie.client import PayloadColumn
from spark_bookkeeper.writer import payload_bytes, payloads_of

pytestmark = pytest.mark.unit

ROWS = [b"ab", b"", b"cde", b"f", b"\x00" * 9]


@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()])
@pytest.mark.parametrize("offset,length", [(0, 15), (3, 9), (14, 1), (7, 0)])
def test_arrow_payloads_are_read_in_place(arrow_type, offset, length):
    values = ROWS * 3 if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) \
        else [r.decode() for r in ROWS] * 3
    array = pa.array(values, type=arrow_type).slice(offset, length)
    payloads = payloads_of(pa.RecordBatch.from_arrays([array], names=["payload"]))
    expected = (ROWS * 3)[offset: offset + length]
    assert isinstance(payloads, PayloadColumn)
    assert [bytes(p) for p in payloads] == expected and payload_bytes(payloads) == sum(map(len, expected))


def test_null_payloads_are_refused():
    with pytest.raises(ValueError, match="payload has 1 null values"):
        payloads_of(pa.RecordBatch.from_arrays([pa.array([b"a", None])], names=["payload"]))
