"""Framing of BookKeeper's native protocol: lengths, split and coalesced reads, refusals."""
from __future__ import annotations

import pytest

from bookie.proto.native_frames import FrameDecoder, FrameTooLargeException, encode_frame, encode_frames


def test_frames_survive_any_split_of_the_stream():
    payloads = [b"", b"a", b"hello" * 100, bytes(range(256))]
    stream = encode_frames(payloads)
    for step in (1, 3, 7, len(stream)):
        decoder = FrameDecoder()
        out = []
        for i in range(0, len(stream), step):
            out += decoder.feed(stream[i: i + step])
        assert out == payloads and decoder.pending == 0


def test_a_frame_longer_than_the_limit_or_negative_is_refused():
    with pytest.raises(FrameTooLargeException, match="allowed 0..10"):
        FrameDecoder(max_frame_size=10).feed(encode_frame(bytes(11)))
    with pytest.raises(FrameTooLargeException):
        FrameDecoder().feed(b"\xff\xff\xff\xff")


def test_an_incomplete_frame_waits_for_the_rest():
    decoder = FrameDecoder()
    assert decoder.feed(encode_frame(b"abcdef")[:5]) == [] and decoder.pending == 5
    assert decoder.feed(b"bcdef") == [b"abcdef"]
