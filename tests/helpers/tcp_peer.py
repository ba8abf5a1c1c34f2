"""A tiny TCP peer for the multi-host tests, run on a host of ``bookie.testing.netns``.

``serve ADDRESS PORT``: an echo server (a thread per connection) until killed.
``send ADDRESS PORT SIZE TIMEOUT``: connect, send SIZE patterned bytes while reading them echoed back, print one
JSON line: ``{"received", "intact", "elapsed"}`` (seconds from connected to the last byte back), or
``{"error", "errno", "elapsed"}`` (seconds from the start) when connecting or a read fails.
"""
from __future__ import annotations

import json
import socket
import sys
import threading
import time

PATTERN = bytes(range(256))


def payload(size: int) -> bytes:
    return (PATTERN * (size // len(PATTERN) + 1))[:size]


def serve(address: str, port: int) -> None:
    server = socket.create_server((address, port))
    while True:
        conn, _ = server.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)


def send(address: str, port: int, size: int, timeout: float) -> dict:
    start = time.monotonic()
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            connected = time.monotonic()
            data = payload(size)
            threading.Thread(target=sock.sendall, args=(data,), daemon=True).start()
            received = bytearray()
            while len(received) < size and (chunk := sock.recv(65536)):
                received += chunk
            return {"received": len(received), "intact": bytes(received) == data,
                    "elapsed": time.monotonic() - connected}
    except OSError as exc:
        return {"error": type(exc).__name__, "errno": exc.errno, "elapsed": time.monotonic() - start}


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        print(json.dumps(send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))), flush=True)
