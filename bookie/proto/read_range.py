"""ReadRangeResponse and ReadRangesResponse encoded by hand, on the bookie's hot read paths.

Through protobuf, a range-read message is copied three times after the entry log read (join the
framed entries, copy them into the message, serialize it), each copy into fresh multi-megabyte
buffers. Here the entries are joined straight into the wire bytes: one copy. The bytes are exactly
what ``bookkeeper_pb2.ReadRangeResponse(...).SerializeToString()`` gives (proto3: default values are
left out), so clients parse them with the generated class; a test holds the two encoders together.

The service registers ReadEntries and ReadEntriesOfLedgers with no response serializer
(``request_processor.add_to_server``), so their handlers yield these bytes as they are.
"""
from __future__ import annotations

from collections.abc import Sequence

from bookie.proto import status
from bookie.proto.v3_hand_encoding import varint

# Field numbers of ReadRangeResponse in bookkeeper.proto (ReadRangesResponse shares the first three).
_STATUS, _ENTRIES, _ENTRY_COUNT, _LAST_ENTRY_ID_COVERED, _MAX_LAC, _MESSAGE = 1, 2, 3, 4, 5, 6
_RANGES_COVERED = 4  # ReadRangesResponse
_VARINT, _LENGTH_DELIMITED = 0, 2


def _varint_field(number: int, value: int) -> bytes:
    return varint(number << 3 | _VARINT) + varint(value) if value else b""


def _bytes_header(number: int, length: int) -> bytes:
    return varint(number << 3 | _LENGTH_DELIMITED) + varint(length) if length else b""


def encode_read_range_response(entries: Sequence[bytes | memoryview], entry_count: int, last_entry_id_covered: int,
                               max_lac: int, status_code: int = status.EOK, message: str = "") -> bytes:
    """The serialized ReadRangeResponse whose ``entries`` field is the concatenation of ``entries``."""
    size = sum(len(part) for part in entries)
    text = message.encode()
    return b"".join([_varint_field(_STATUS, status_code), _bytes_header(_ENTRIES, size), *entries,
                     _varint_field(_ENTRY_COUNT, entry_count),
                     _varint_field(_LAST_ENTRY_ID_COVERED, last_entry_id_covered),
                     _varint_field(_MAX_LAC, max_lac), _bytes_header(_MESSAGE, len(text)), text])


def encode_read_ranges_response(entries: Sequence[bytes | memoryview], entry_count: int, ranges_covered: int) -> bytes:
    """The serialized ReadRangesResponse (status EOK) whose ``entries`` field is the concatenation of ``entries``."""
    return b"".join([_bytes_header(_ENTRIES, sum(len(part) for part in entries)), *entries,
                     _varint_field(_ENTRY_COUNT, entry_count), _varint_field(_RANGES_COVERED, ranges_covered)])
