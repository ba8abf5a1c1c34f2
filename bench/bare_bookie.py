"""A gRPC servicer that acknowledges adds without storing them: the protocol's ceiling for bench/bookie_add.py.

    python bench/bare_bookie.py PORT
"""
from __future__ import annotations

import asyncio
import signal
import sys

import grpc

from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_pb2_grpc as pb_grpc


class BareServicer(pb_grpc.BookieServicer):
    async def AddEntries(self, request_iterator, context):
        async for request in request_iterator:
            yield pb.AddResponses(responses=[pb.AddResponse(txnId=request.txnId, ledgerScopeId=request.ledgerScopeId,
                                                            ledgerId=request.ledgerId)])


async def main(port: int) -> None:
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20)])
    pb_grpc.add_BookieServicer_to_server(BareServicer(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
