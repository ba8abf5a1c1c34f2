"""Frames of BookKeeper's native protocol: a 4-byte big-endian length, then that many bytes (one
serialized v3 Request/Response, or a v2 binary message). Netty's LengthFieldBasedFrameDecoder on
BookKeeper's side refuses a frame longer than ``nettyMaxFrameSizeBytes``; so does this decoder.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

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


@dataclass
class FrameRun:
    """``count`` frames whose payloads are all ``payload_size`` bytes, back to back in ``block`` (their
    length fields included)."""
    block: bytes
    payload_size: int
    count: int

    def payloads(self) -> list[bytes]:
        stride = self.payload_size + FRAME_HEADER.size
        return [self.block[k + FRAME_HEADER.size: k + stride] for k in range(0, self.count * stride, stride)]

    def part(self, first: int, end: int) -> "FrameRun":
        """Frames ``first`` up to ``end`` (not included) of the run."""
        stride = self.payload_size + FRAME_HEADER.size
        return FrameRun(self.block[first * stride: end * stride], self.payload_size, end - first)


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

    def feed_runs(self, data: bytes, min_run: int) -> list[bytes | FrameRun]:
        """``feed``, except that ``min_run`` or more consecutive frames of one size come as one FrameRun (their
        length fields checked in one strided view) instead of one payload each."""
        buffer = self._buffer
        buffer += data
        out: list[bytes | FrameRun] = []
        pos, end = 0, len(buffer)
        while end - pos >= FRAME_HEADER.size:
            (length,) = FRAME_HEADER.unpack_from(buffer, pos)
            if length < 0 or length > self.max_frame_size:
                raise FrameTooLargeException(f"frame of {length} bytes (allowed 0..{self.max_frame_size})")
            stride = FRAME_HEADER.size + length
            fit = (end - pos) // stride
            if fit >= min_run and FRAME_HEADER.unpack_from(buffer, pos + stride)[0] == length:
                sizes = np.ndarray((fit,), dtype=">i4", buffer=buffer, offset=pos, strides=(stride,))
                differs = np.flatnonzero(sizes != length)
                del sizes  # the buffer is resized below: no view of it may remain
                run = int(differs[0]) if len(differs) else fit
                if run >= min_run:
                    out.append(FrameRun(bytes(buffer[pos: pos + run * stride]), length, run))
                    pos += run * stride
                    continue
            if pos + stride > end:
                break
            out.append(bytes(buffer[pos + FRAME_HEADER.size: pos + stride]))
            pos += stride
        del buffer[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes of a frame not yet complete."""
        return len(self._buffer)
