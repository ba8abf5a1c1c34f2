"""The writer's pure arithmetic: pieces that fit one add message, framing, and striping a run of
entries into what each bookie stores (bookie/client/add_batch.py). No processes."""
from __future__ import annotations

import pytest

from bookie.client.add_batch import ADD_REQUEST_RESERVE, AddMessageLimits, frame_entries, stripe
from bookie.client.conf import ClientConfiguration
from bookie.client.distribution_schedule import write_set
from bookie.exceptions import BKIncorrectParameterException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager
from bookie.proto.entry_format import FRAME_LEN

pytestmark = pytest.mark.unit

LEDGER = LedgerId.of(7)


def write_sets(ensemble_size: int, write_quorum: int) -> list[tuple[int, ...]]:
    return [tuple(write_set(r, ensemble_size, write_quorum)) for r in range(ensemble_size)]


def stored_ids(digest: DigestManager, part: bytes) -> list[int]:
    return [entry_id for entry_id, payload in digest.verify_frames(part)]


# -- striping -----------------------------------------------------------------------------------------
def test_striping_e3_wq2_gives_each_bookie_the_entries_of_its_write_sets():
    digest = DigestManager(LEDGER, b"pw")
    frames, _ = frame_entries(digest, 0, -1, 0, [b"e%d" % e for e in range(6)])
    parts, quorums = stripe(0, frames, write_sets(3, 2))
    assert quorums == ((0, 1), (1, 2), (2, 0))
    assert {i: stored_ids(digest, part) for i, part in parts.items()} == {
        0: [0, 2, 3, 5],
        1: [0, 1, 3, 4],
        2: [1, 2, 4, 5],
    }


def test_striping_from_an_entry_past_the_first_uses_the_write_sets_of_those_ids():
    digest = DigestManager(LEDGER, b"pw")
    frames, _ = frame_entries(digest, 4, 3, 100, [b"four", b"five"])
    parts, quorums = stripe(4, frames, write_sets(3, 2))
    assert quorums == ((1, 2), (2, 0))  # entry 4 -> bookies 1, 2; entry 5 -> bookies 2, 0
    assert {i: stored_ids(digest, part) for i, part in parts.items()} == {0: [5], 1: [4], 2: [4, 5]}


def test_without_striping_every_bookie_shares_one_blob_of_all_entries():
    frames = [b"f0", b"f1", b"f2", b"f3"]
    parts, quorums = stripe(10, frames, write_sets(3, 3))
    assert list(parts) == [0, 1, 2]
    assert parts[0] == b"f0f1f2f3"
    assert parts[0] is parts[1] is parts[2]  # joined once, not once per bookie
    assert quorums == ((0, 1, 2), (1, 2, 0), (2, 0, 1))


def test_a_lone_entry_goes_to_its_write_set_in_write_set_order():
    parts, quorums = stripe(2, [b"only"], write_sets(3, 2))
    assert list(parts) == [2, 0]
    assert parts == {2: b"only", 0: b"only"}
    assert quorums == ((2, 0),)


@pytest.mark.parametrize("ensemble_size,write_quorum", [(3, 2), (3, 3), (5, 3), (4, 2), (5, 1)])
@pytest.mark.parametrize("first,count", [(0, 1), (0, 7), (3, 2), (11, 13)])
def test_every_entry_is_stored_on_exactly_its_write_set(ensemble_size, write_quorum, first, count):
    digest = DigestManager(LEDGER, b"pw")
    frames, _ = frame_entries(digest, first, first - 1, 0, [b"x" * (e % 5) for e in range(count)])
    parts, quorums = stripe(first, frames, write_sets(ensemble_size, write_quorum))
    holders: dict[int, list[int]] = {}
    for i, part in parts.items():
        ids = stored_ids(digest, part)
        assert ids == sorted(ids), "a bookie's part is in entry order"
        for entry_id in ids:
            holders.setdefault(entry_id, []).append(i)
    assert sorted(holders) == list(range(first, first + count))
    for entry_id, bookies in holders.items():
        assert sorted(bookies) == sorted(write_set(entry_id, ensemble_size, write_quorum))
    assert set(quorums) == {tuple(write_set(e, ensemble_size, write_quorum)) for e in range(first, first + count)}


# -- framing ------------------------------------------------------------------------------------------
def test_framing_carries_the_lac_and_the_running_length():
    digest = DigestManager(LEDGER, b"pw")
    frames, length = frame_entries(digest, 5, 4, 1000, [b"ab", b"", b"cdef"])
    assert length == 1006
    headers = [digest.verify(frame[FRAME_LEN:], 5 + k)[0] for k, frame in enumerate(frames)]
    assert [(h.entry_id, h.last_add_confirmed, h.length) for h in headers] == [(5, 4, 1002), (6, 4, 1002), (7, 4, 1006)]


def test_the_limits_count_a_framed_entry_exactly():
    digest = DigestManager(LEDGER, b"pw", "hmac")
    limits = AddMessageLimits.of(ClientConfiguration(), digest)
    frames, _ = frame_entries(digest, 0, -1, 0, [b"", b"payload"])
    assert [len(f) for f in frames] == [limits.entry_overhead, limits.entry_overhead + 7]
    assert limits.entry_bytes == ClientConfiguration().nettyMaxFrameSizeBytes - ADD_REQUEST_RESERVE
    assert limits.max_payload + limits.entry_overhead == limits.entry_bytes


# -- pieces of one add message ------------------------------------------------------------------------
def limits(entry_bytes: int = 1 << 20, max_entries: int = 1024, overhead: int = 10) -> AddMessageLimits:
    return AddMessageLimits(entry_bytes + ADD_REQUEST_RESERVE, max_entries, overhead)


def test_pieces_are_cut_at_max_batch_entries():
    assert limits(max_entries=3).pieces(LEDGER, [b"p"] * 7) == [0, 3, 6, 7]
    assert limits(max_entries=3).pieces(LEDGER, [b"p"] * 6) == [0, 3, 6]
    assert limits(max_entries=1).pieces(LEDGER, [b"p"] * 2) == [0, 1, 2]


def test_pieces_are_cut_at_the_message_byte_budget():
    budget = limits(entry_bytes=100, overhead=10)  # a 40-byte payload costs 50: two fill a message exactly
    assert budget.pieces(LEDGER, [bytes(40)] * 5) == [0, 2, 4, 5]
    assert budget.pieces(LEDGER, [bytes(41), bytes(40)]) == [0, 1, 2]  # 51 + 50 > 100
    assert budget.pieces(LEDGER, [bytes(90)]) == [0, 1]  # the largest payload alone fills a message
    assert budget.max_payload == 90


def test_a_lone_payload_is_one_piece():
    assert limits().pieces(LEDGER, [b"x"]) == [0, 1]


def test_an_entry_larger_than_one_add_message_is_refused():
    budget = limits(entry_bytes=100, overhead=10)
    with pytest.raises(BKIncorrectParameterException, match="an entry of 91 bytes .* at most 90 bytes.*nettyMaxFrameSizeBytes"):
        budget.pieces(LEDGER, [b"ok", bytes(91)])


@pytest.mark.parametrize("bad", ["text", None, 12, [b"a"]])
def test_a_payload_that_is_not_bytes_is_refused(bad):
    with pytest.raises(BKIncorrectParameterException, match="a payload is bytes"):
        limits().pieces(LEDGER, [b"ok", bad])


def test_bytes_like_payloads_are_taken():
    assert limits(entry_bytes=100, overhead=10).pieces(LEDGER, [bytearray(40), memoryview(bytes(40)), b"z"]) == [0, 2, 3]
