"""Frames of BookKeeper's native protocol: a 4-byte big-endian length, then that many bytes (one
serialized v3 Request/Response, or a v2 binary message). Netty's LengthFieldBasedFrameDecoder on
BookKeeper's side refuses a frame longer than ``nettyMaxFrameSizeBytes``; so does this decoder.
"""
from __future__ import annotations

import struct

from bookie.exceptions import BKException

FRAME_HEADER = struct.Struct(">i")
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024  # nettyMaxFrameSizeBytes


class FrameTooLargeException(BKException, ValueError):
    """A frame's length field is negative or larger than the receiver takes: the connection is unusable."""


def encode_frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload)) + payload


def encode_frames(payloads: list[bytes]) -> bytes:
    """Many frames in one buffer: what queued up goes out with one write."""
    return b"".join(FRAME_HEADER.pack(len(p)) + p for p in payloads)


class FrameDecoder:
    """Cuts a byte stream into frames, whatever sizes the stream arrives in."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; returns the frames (payloads) now complete, in order."""
        buffer = self._buffer
        buffer += data
        frames, pos = [], 0
        while len(buffer) - pos >= FRAME_HEADER.size:
            (length,) = FRAME_HEADER.unpack_from(buffer, pos)
            if length < 0 or length > self.max_frame_size:
                raise FrameTooLargeException(f"frame of {length} bytes (allowed 0..{self.max_frame_size})")
            end = pos + FRAME_HEADER.size + length
            if end > len(buffer):
                break
            frames.append(bytes(buffer[pos + FRAME_HEADER.size: end]))
            pos = end
        del buffer[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes of a frame not yet complete."""
        return len(self._buffer)
