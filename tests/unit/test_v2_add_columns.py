"""v2 adds as columns (bookie/proto/v2_add_columns.py) give byte for byte what the one-message encoders give,
and FrameDecoder.feed_runs cuts a stream into the same frames as ``feed`` however it arrives."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.exceptions import BadRequestException
from bookie.ledger_id import LedgerId
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import entry_format, v2_add_columns
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.proto.native_frames import FrameDecoder, FrameRun, encode_frame, encode_frames

KEY = generate_master_key(b"pw")
DIGEST = DigestManager(LedgerId(0, 5), b"pw")


def bodies(first: int, count: int, size: int = 10) -> list[bytes]:
    """Entries of ledger 5 whose payloads are ``size`` words."""
    return [DIGEST.build_entry(e, e - 1, 0, e.to_bytes(4, "big") * size) for e in range(first, first + count)]


def add_payloads(entries: list[bytes], flags: int = v2.FLAG_NONE, key: bytes = KEY) -> list[bytes]:
    return [v2.encode_request(v2.ParsedAddRequest(2, flags, key, body)) for body in entries]


def run_of(payloads: list[bytes]) -> FrameRun:
    return FrameRun(encode_frames(payloads), len(payloads[0]), len(payloads))


@given(st.lists(st.sampled_from([0, 5, 40, 41]), min_size=1, max_size=60), st.integers(1, 97), st.integers(2, 9))
@settings(max_examples=200, deadline=None)
def test_feed_runs_gives_the_frames_feed_gives_however_the_stream_is_cut(sizes, chunk, min_run):
    payloads = [bytes([k % 251]) * size for k, size in enumerate(sizes)]
    stream = encode_frames(payloads)
    plain, runs = FrameDecoder(), FrameDecoder()
    expected, got = [], []
    for at in range(0, len(stream), chunk):
        expected += plain.feed(stream[at: at + chunk])
        for item in runs.feed_runs(stream[at: at + chunk], min_run):
            if isinstance(item, FrameRun):
                assert item.count >= min_run and {len(p) for p in item.payloads()} == {item.payload_size}
                got += item.payloads()
            else:
                got.append(item)
    assert got == expected == payloads and runs.pending == 0


def test_a_run_of_adds_is_its_entries_framed_as_stored():
    entries = bodies(7, 20)
    adds = v2_add_columns.scan_add_run(run_of(add_payloads(entries, v2.FLAG_RECOVERY_ADD)).block,
                                       len(add_payloads(entries)[0]), 20)
    assert (adds.version, adds.master_key, adds.ledger_id, adds.recovery) == (2, KEY, 5, True)
    assert adds.entry_ids.tolist() == list(range(7, 27))
    assert adds.framed == entry_format.frame(entries)


@pytest.mark.parametrize("payloads", [
    add_payloads(bodies(0, 4)) + add_payloads(bodies(4, 4), key=generate_master_key(b"other")),  # two keys
    add_payloads(bodies(0, 4)) + add_payloads(bodies(4, 4), v2.FLAG_RECOVERY_ADD),  # two flags
    add_payloads(bodies(0, 4)) + add_payloads([DigestManager(LedgerId(0, 6), b"pw").build_entry(
        e, -1, 0, e.to_bytes(4, "big") * 10) for e in range(4, 8)]),  # two ledgers
    [v2.encode_request(v2.ReadRequest(2, 0, 5, e)) + bytes(50) for e in range(8)],  # not adds
    [v2.encode_request(v2.ParsedAddRequest(2, 0, KEY, b"\xff" * 8 + bytes(8))) for _ in range(8)],  # ledger < 0
])
def test_frames_that_are_not_adds_of_one_ledger_key_and_flags_are_no_run(payloads):
    assert len({len(p) for p in payloads}) == 1
    assert v2_add_columns.scan_add_run(run_of(payloads).block, len(payloads[0]), len(payloads)) is None


def test_too_short_to_hold_an_entrys_ids_is_no_run():
    payloads = [v2.encode_request(v2.ParsedAddRequest(2, 0, KEY, b"x" * 15))] * 8
    assert v2_add_columns.scan_add_run(run_of(payloads).block, len(payloads[0]), 8) is None


def test_answers_of_a_run_are_each_adds_answer_framed():
    answers = v2_add_columns.encode_add_answers(2, v2.EFENCED, 5, np.arange(3, 9))
    assert answers == encode_frames([v2.encode_add_response(2, v2.EFENCED, 5, e) for e in range(3, 9)])
    rcs, ledgers, entries = v2_add_columns.decode_add_answers(answers, v2.RESPONSE_HEADERS_SIZE, 6)
    assert (set(rcs.tolist()), set(ledgers.tolist()), entries.tolist()) == ({v2.EFENCED}, {5}, list(range(3, 9)))
    read = encode_frame(v2.encode_response(v2.ReadResponse(2, v2.EOK, 5, 3))[:24])
    with pytest.raises(BadRequestException, match="not a v2 ADDENTRY answer"):
        v2_add_columns.decode_add_answers(answers[:28 * 5] + read, v2.RESPONSE_HEADERS_SIZE, 6)
    with pytest.raises(BadRequestException, match="24 bytes, got 25"):
        v2_add_columns.decode_add_answers(bytes(29 * 2), 25, 2)


@pytest.mark.parametrize("recovery", [False, True])
def test_requests_of_a_framed_batch_are_each_entrys_request_framed(recovery):
    entries = bodies(40, 12)
    head = v2.add_request_head(KEY, recovery)
    block, ids = v2_add_columns.encode_add_requests(head, entry_format.frame(entries))
    flags = v2.FLAG_RECOVERY_ADD | v2.FLAG_HIGH_PRIORITY if recovery else v2.FLAG_NONE
    assert block == encode_frames(add_payloads(entries, flags)) and ids == list(range(40, 52))
    assert v2_add_columns.encode_add_requests(head, entry_format.frame(entries + bodies(52, 1, size=11))) is None
