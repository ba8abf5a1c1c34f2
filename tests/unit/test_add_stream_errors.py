"""BookieServicer.AddEntries when reading its request stream fails: the adds taken before are answered,
then the stream fails with INTERNAL naming the error (and the bookie logs it), instead of ending as if
the client had closed it. A real engine; the request stream and the RPC context are stand-ins, as no
client can make gRPC's own request iterator raise on purpose."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from bookie.server.add_request import decode_add_request
from bookie.server.request_processor import BookieServicer
from tests.helpers.engine_ops import PASSWORD
from tests.helpers.journal_files import KEY, LEDGER


class Aborted(Exception):
    def __init__(self, code, details):
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details


class Context:
    """The two calls AddEntries makes on a grpc.aio ServicerContext."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def abort(self, code, details):
        raise Aborted(code, details)


def add_request(txn_id: int, first: int):
    blob, _ = DigestManager(LEDGER, PASSWORD).build_framed(first, first - 1, 0, [b"x" * 64] * 4)
    return decode_add_request(pb.AddRequest(txnId=txn_id, ledgerId=LEDGER.ledger_id, masterKey=KEY,
                                            entries=blob).SerializeToString())


async def drive(bookie, fail: bool) -> tuple[list, Exception | None]:
    async def requests():
        yield add_request(1, 0)
        yield add_request(2, 4)
        if fail:
            raise ConnectionResetError("the transport went away")

    answered, error = [], None
    try:
        async for message in BookieServicer(bookie).AddEntries(requests(), Context()):
            answered.extend(message.responses)
    except Aborted as exc:
        error = exc
    return answered, error


@pytest.mark.parametrize("fail", [True, False])
def test_a_failed_request_stream_fails_the_rpc_after_answering_what_it_took(make_bookie, caplog, fail):
    bookie = make_bookie()
    answered, error = asyncio.run(drive(bookie, fail))
    assert [(r.txnId, r.status, r.firstEntryId, r.lastEntryId) for r in answered] == \
        [(1, status.EOK, 0, 3), (2, status.EOK, 4, 7)]
    if fail:
        assert error is not None and error.code == grpc.StatusCode.INTERNAL
        assert "ConnectionResetError: the transport went away" in error.details
        assert "reading its requests failed" in caplog.text
    else:
        assert error is None, "the control: a stream the client closes ends cleanly"
