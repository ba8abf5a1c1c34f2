"""The writer's pure arithmetic: pieces that fit one add message, framing, and striping a run of
entries into what each bookie stores (bookie/client/add_batch.py). No processes."""
from __future__ import annotations

import random

import numpy as np
import pytest

from bookie.client import PayloadColumn
from bookie.client.add_batch import ADD_REQUEST_RESERVE, AddMessageLimits, frame_and_stripe
from bookie.client.conf import ClientConfiguration
from bookie.client.distribution_schedule import write_set
from bookie.exceptions import BKIncorrectParameterException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager
from bookie.proto.entry_format import FRAME, FRAME_LEN

pytestmark = pytest.mark.unit

LEDGER = LedgerId.of(7)


def write_sets(ensemble_size: int, write_quorum: int) -> list[tuple[int, ...]]:
    return [tuple(write_set(r, ensemble_size, write_quorum)) for r in range(ensemble_size)]


def stored_ids(digest: DigestManager, part: bytes) -> list[int]:
    return [entry_id for entry_id, payload in digest.verify_frames(part)]


# -- striping -----------------------------------------------------------------------------------------
def striped(digest: DigestManager, first: int, payloads: list[bytes], ensemble_size: int, write_quorum: int):
    """(parts, quorums) of entries ``first..`` as the writer frames and stripes them."""
    parts, quorums, _ = frame_and_stripe(digest, first, first - 1, 0, payloads, write_sets(ensemble_size, write_quorum))
    return parts, quorums


@pytest.mark.parametrize("size", [3, None], ids=["one size", "mixed sizes"])
def test_striping_e3_wq2_gives_each_bookie_the_entries_of_its_write_sets(size):
    digest = DigestManager(LEDGER, b"pw")
    parts, quorums = striped(digest, 0, [b"e%d" % e * (size or e + 1) for e in range(6)], 3, 2)
    assert quorums == ((0, 1), (1, 2), (2, 0))
    assert {i: stored_ids(digest, part) for i, part in parts.items()} == {
        0: [0, 2, 3, 5],
        1: [0, 1, 3, 4],
        2: [1, 2, 4, 5],
    }


def test_striping_from_an_entry_past_the_first_uses_the_write_sets_of_those_ids():
    digest = DigestManager(LEDGER, b"pw")
    parts, quorums = striped(digest, 4, [b"four", b"five"], 3, 2)
    assert quorums == ((1, 2), (2, 0))  # entry 4 -> bookies 1, 2; entry 5 -> bookies 2, 0
    assert {i: stored_ids(digest, part) for i, part in parts.items()} == {0: [5], 1: [4], 2: [4, 5]}


def test_without_striping_every_bookie_shares_one_blob_of_all_entries():
    digest = DigestManager(LEDGER, b"pw")
    parts, quorums = striped(digest, 10, [b"f0", b"f1", b"f2", b"f3"], 3, 3)
    assert list(parts) == [0, 1, 2]
    assert stored_ids(digest, parts[0]) == [10, 11, 12, 13]
    assert parts[0] is parts[1] is parts[2]  # framed once, not once per bookie
    assert quorums == ((0, 1, 2), (1, 2, 0), (2, 0, 1))


def test_a_lone_entry_goes_to_its_write_set_in_write_set_order():
    digest = DigestManager(LEDGER, b"pw")
    parts, quorums = striped(digest, 2, [b"only"], 3, 2)
    assert list(parts) == [2, 0]
    assert parts[2] is parts[0] and stored_ids(digest, parts[2]) == [2]
    assert quorums == ((2, 0),)


@pytest.mark.parametrize("ensemble_size,write_quorum", [(3, 2), (3, 3), (5, 3), (4, 2), (5, 1)])
@pytest.mark.parametrize("first,count", [(0, 1), (0, 7), (3, 2), (11, 13), (5, 40)])
@pytest.mark.parametrize("sizes", ["mixed", "one"])
def test_every_entry_is_stored_on_exactly_its_write_set(ensemble_size, write_quorum, first, count, sizes):
    digest = DigestManager(LEDGER, b"pw")
    payloads = [b"x" * (e % 5 if sizes == "mixed" else 4) for e in range(count)]
    parts, quorums = striped(digest, first, payloads, ensemble_size, write_quorum)
    holders: dict[int, list[int]] = {}
    for i, part in parts.items():
        verified = digest.verify_frames(part)
        assert all(payload == payloads[e - first] for e, payload in verified), "each entry intact"
        ids = [e for e, _ in verified]
        assert ids == sorted(ids), "a bookie's part is in entry order"
        for entry_id in ids:
            holders.setdefault(entry_id, []).append(i)
    assert sorted(holders) == list(range(first, first + count))
    for entry_id, bookies in holders.items():
        assert sorted(bookies) == sorted(write_set(entry_id, ensemble_size, write_quorum))
    assert set(quorums) == {tuple(write_set(e, ensemble_size, write_quorum)) for e in range(first, first + count)}


# -- framing ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [3, 12], ids=["one by one", "by columns"])
def test_framing_carries_the_lac_and_the_running_length(count):
    digest = DigestManager(LEDGER, b"pw")
    payloads = [b"ab", b"", b"cdef"] + [b"z"] * (count - 3)
    blob, length = digest.build_framed(5, 4, 1000, payloads)
    assert length == 1006 + count - 3
    headers = []
    offset = 0
    while offset < len(blob):
        (size,) = FRAME.unpack_from(blob, offset)
        headers.append(digest.verify(blob[offset + FRAME_LEN: offset + FRAME_LEN + size], 5 + len(headers))[0])
        offset += FRAME_LEN + size
    assert [(h.entry_id, h.last_add_confirmed, h.length) for h in headers][:3] == [(5, 4, 1002), (6, 4, 1002), (7, 4, 1006)]
    assert len(headers) == count


def test_the_limits_count_a_framed_entry_exactly():
    digest = DigestManager(LEDGER, b"pw", "hmac")
    limits = AddMessageLimits.of(ClientConfiguration(), digest)
    assert len(digest.build_frame(0, -1, 0, b"")) == limits.entry_overhead
    assert len(digest.build_frame(1, -1, 7, b"payload")) == limits.entry_overhead + 7
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


def column(payloads: list[bytes]) -> PayloadColumn:
    return PayloadColumn.of(b"".join(payloads), np.concatenate([[0], np.cumsum([len(p) for p in payloads])]))


@pytest.mark.parametrize("seed", range(20))
def test_a_payload_column_is_cut_where_its_list_is(seed):
    rng = random.Random(seed)
    budget = limits(entry_bytes=rng.randint(60, 300), max_entries=rng.randint(1, 8), overhead=10)
    payloads = [bytes(rng.randint(0, budget.max_payload)) for _ in range(rng.randint(1, 40))]
    assert budget.pieces(LEDGER, column(payloads)) == budget.pieces(LEDGER, payloads)


def test_a_payload_column_with_an_entry_too_large_is_refused():
    with pytest.raises(BKIncorrectParameterException, match="an entry of 91 bytes .* at most 90 bytes"):
        limits(entry_bytes=100, overhead=10).pieces(LEDGER, column([b"ok", bytes(91)]))
