"""v3 Requests for the tests of the column codecs (bookie/proto/v3_add_columns.py, v3_read_columns.py)."""
from __future__ import annotations

from typing import Callable

from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto.native_frames import encode_frames


def v3_request(operation: int, txn: int, priority: int = 0, context: bool = False) -> pb.Request:
    """A Request's header (and a requestContext pair, with ``context``): the caller fills its operation's part."""
    r = pb.Request()
    r.header.version, r.header.operation, r.header.txnId = pb.VERSION_THREE, operation, txn
    if priority:
        r.header.priority = priority
    if context:
        r.requestContext.add(key="k", value="v")
    return r


def scan_run(scan: Callable, requests: list[pb.Request]):
    """``scan`` (a codec's ``scan_*_run``) of the requests as one run of frames; they must have one size."""
    payloads = [r.SerializeToString() for r in requests]
    assert len({len(p) for p in payloads}) == 1, "a run is of frames of one size"
    return scan(encode_frames(payloads), len(payloads[0]), len(payloads))
