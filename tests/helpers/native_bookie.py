"""A storage engine served by the native protocol server (bookie/server/native_server.py) in this process,
on a free 127.0.0.1 port, its event loop in a thread: what the native-protocol tests talk to."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Iterator

from bookie.proto.checksum import generate_master_key
from bookie.server.native_server import BookieNettyServer
from tests.helpers.waiting import DEADLINE

KEY = generate_master_key(b"pw")
MAX_FRAME = 1 << 20


@contextlib.contextmanager
def served_natively(bookie) -> Iterator[BookieNettyServer]:
    """The running server (its ``port``); stopped, with its loop, on leaving."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="native-server", daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(BookieNettyServer(bookie, host="127.0.0.1", max_frame_size=MAX_FRAME).start(),
                                              loop).result(DEADLINE)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(DEADLINE)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(DEADLINE)
        loop.close()
