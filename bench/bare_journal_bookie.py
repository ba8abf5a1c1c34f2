"""A gRPC servicer that only journals: each add's framed entries are appended to one file, fsynced with
whatever else arrived meanwhile (group commit), then acknowledged. The ceiling bench/bare_pipeline.py
measures the client against: no entry log, no index, no checks.

    python bench/bare_journal_bookie.py PORT JOURNAL_FILE
"""
from __future__ import annotations

import asyncio
import os
import queue
import signal
import sys
import threading

import grpc

from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_pb2_grpc as pb_grpc

_END = object()


class JournalOnlyServicer(pb_grpc.BookieServicer):
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._journal, name="bare-journal", daemon=True).start()

    def _journal(self) -> None:
        """Group commit: write everything queued with one writev, one fdatasync, then acknowledge it all."""
        while True:
            group = [self.queue.get()]
            while True:
                try:
                    group.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            os.writev(self.fd, [data for data, _ in group])
            os.fdatasync(self.fd)
            for _, done in group:
                done()

    async def AddEntries(self, request_iterator, context):
        loop = asyncio.get_running_loop()
        acks: asyncio.Queue = asyncio.Queue()

        async def read() -> None:
            async for request in request_iterator:
                response = pb.AddResponse(txnId=request.txnId, ledgerScopeId=request.ledgerScopeId,
                                          ledgerId=request.ledgerId)
                self.queue.put((request.entries, lambda r=response: loop.call_soon_threadsafe(acks.put_nowait, r)))
            acks.put_nowait(_END)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                ready = [await acks.get()]
                while not acks.empty():  # acks ready together share one message, as the bookie's
                    ready.append(acks.get_nowait())
                ended = ready[-1] is _END
                if ended:
                    ready.pop()
                if ready:
                    yield pb.AddResponses(responses=ready)
                if ended:
                    return
        finally:
            reader.cancel()


async def main(port: int, path: str) -> None:
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20)])
    pb_grpc.add_BookieServicer_to_server(JournalOnlyServicer(path), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
