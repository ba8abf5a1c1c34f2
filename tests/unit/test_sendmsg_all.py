"""bookie/util/io.sendmsg_all: buffers sent back to back on a socket whose peer reads slowly (short sends resumed
in the middle of a buffer), more buffers than one sendmsg takes (IOV_MAX)."""
from __future__ import annotations

import socket
import threading

from bookie.util.io import IOV_MAX, sendmsg_all
from tests.helpers.waiting import DEADLINE


def test_buffers_arrive_whole_and_in_order():
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # short sends: the peer reads 1 KiB at a time
    buffers = [bytes([k % 251]) * (1 + k * 37 % 5000) for k in range(IOV_MAX + 300)]
    expected = b"".join(buffers)
    got = bytearray()

    def read() -> None:
        peer.settimeout(DEADLINE)
        while len(got) < len(expected):
            got.extend(peer.recv(1024))
    reader = threading.Thread(target=read)
    reader.start()
    try:
        sendmsg_all(ours, [memoryview(b) for b in buffers[:10]] + buffers[10:])
        reader.join(DEADLINE)
        assert bytes(got) == expected
    finally:
        ours.close()
        peer.close()
