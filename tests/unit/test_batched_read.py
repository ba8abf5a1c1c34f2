"""BatchedRangeRead (bookie/client/batched_read.py) against a fake v2 channel that answers as BookKeeper
4.17.4's bookie does (facts in the module docstring): consecutive entries from the one asked for,
within maxCount and maxSize (the first always), out of order; and the Spark read planning of
contiguous shares where WQ == E."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from bookie.client.batched_read import BatchAnswer, BatchedRangeRead
from bookie.exceptions import BKBookieHandleNotAvailableException
from bookie.ledger_id import LedgerId
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import entry_format, status
from bookie.proto.checksum import DigestManager, DigestType
from spark_bookkeeper.reader import (BALANCE_ROUNDS, MIN_SHARE_ENTRIES, LedgerSlice, contiguous_shares,
                                     slice_partitions)

LEDGER = LedgerId.of(9, 0)
DIGEST = DigestManager(LEDGER, b"pw")
HEADERS = 36  # frame length + v2 answer headers + request id: what maxSize counts besides the entries


def framed(entry_id: int) -> bytes:
    return DIGEST.build_framed(entry_id, -1, 0, [b"%08d" % entry_id])[0]


class FakeChannel:
    """Holds ``entries``; answers pending requests last first (a bookie's read threads may)."""

    def __init__(self, entries, errors=None, lose_after: int | None = None):
        self.held = {e: framed(e) for e in entries}
        self.errors = errors or {}  # entry id -> status when asked for first
        self.lose_after = lose_after  # answers before the connection drops
        self.asked: list[tuple[int, int]] = []
        self.queue: list[BatchAnswer] = []
        self.outstanding, self.bookie_id, self.max_frame_size = 0, "fake:1", 1 << 20

    def ask(self, ledger_id: int, entry_id: int, max_count: int, max_size: int) -> int:
        request_id = len(self.asked) + 1
        self.asked.append((entry_id, max_count))
        self.outstanding += 1
        if entry_id in self.errors or entry_id not in self.held:
            code = self.errors.get(entry_id, status.ENOENTRY)
            self.queue.append(BatchAnswer(request_id, code, entry_id, b""))
            return request_id
        body, e = b"", entry_id
        while e in self.held and e - entry_id < max_count and e not in self.errors:
            if body and HEADERS + len(body) + len(self.held[e]) > max_size:
                break
            body, e = body + self.held[e], e + 1
        self.queue.append(BatchAnswer(request_id, status.EOK, entry_id, body))
        return request_id

    def receive(self) -> BatchAnswer:
        if self.lose_after is not None and len(self.asked) - len(self.queue) >= self.lose_after:
            raise BKBookieHandleNotAvailableException("lost")
        self.outstanding -= 1
        return self.queue.pop()


def ids(messages) -> list[int]:
    return [entry_format.peek_ids(f, 0)[2] for m in messages for f in entry_format.iter_frames(m.entries)]


SIZE = len(framed(0))


def test_a_range_comes_in_order_by_requests_of_what_fits_answered_out_of_order():
    channel = FakeChannel(range(100))
    read = BatchedRangeRead(channel, LEDGER, 3, 90, HEADERS + 10 * SIZE)
    messages = list(read)
    assert ids(messages) == list(range(3, 91)) and read.rest is None and read.channel_reusable
    assert [m.lastEntryIdCovered for m in messages] == [12 + 10 * k for k in range(8)] + [90]
    assert channel.asked[0] == (3, 88) and all(count == 10 for _, count in channel.asked[1:-1])  # then chunks


def test_a_short_answer_is_asked_again_from_where_it_stopped():
    channel = FakeChannel(range(50))
    for e in range(20, 50):  # entries after the first answer are twice as large: 10 no longer fit
        channel.held[e] = DIGEST.build_framed(e, -1, 0, [b"%08d" % e + b"x" * (SIZE - 4)])[0]
    read = BatchedRangeRead(channel, LEDGER, 0, 49, HEADERS + 10 * SIZE)
    assert ids(list(read)) == list(range(50)) and read.rest is None
    assert (25, 5) in channel.asked  # the rest of the chunk 20..29, asked before the chunks after it


def test_an_absent_entry_leaves_the_rest_to_single_reads():
    read = BatchedRangeRead(FakeChannel([e for e in range(40) if e != 25]), LEDGER, 0, 39, HEADERS + 10 * SIZE)
    assert ids(list(read)) == list(range(25)) and read.rest == 25


def test_no_ledger_means_the_whole_range_is_absent():
    read = BatchedRangeRead(FakeChannel([], errors={0: status.ENOLEDGER}), LEDGER, 0, 9, 1 << 20)
    (message,) = list(read)
    assert (message.status, message.entryCount, message.lastEntryIdCovered, read.rest) == (status.EOK, 0, 9, None)


@pytest.mark.parametrize("why", ["EBADREQ", "lost"])
def test_a_bookie_without_batch_reads_leaves_the_whole_range_to_single_reads(why):
    channel = FakeChannel(range(10), errors={0: status.EBADREQ}) if why == "EBADREQ" else \
        FakeChannel(range(10), lose_after=0)
    read = BatchedRangeRead(channel, LEDGER, 0, 9, 1 << 20)
    assert list(read) == [] and read.rest == 0


def test_a_failing_entry_ends_the_read_with_its_status_after_what_came():
    channel = FakeChannel(range(30), errors={12: status.EIO})
    read = BatchedRangeRead(channel, LEDGER, 0, 29, HEADERS + 5 * SIZE)
    messages = list(read)
    assert ids(messages) == list(range(12)) and read.rest is None
    assert messages[-1].status == status.EIO and "entry 12" in messages[-1].message


def test_a_connection_lost_after_answers_raises():
    channel = FakeChannel(range(30), lose_after=1)
    with pytest.raises(BKBookieHandleNotAvailableException):
        list(BatchedRangeRead(channel, LEDGER, 0, 29, HEADERS + 5 * SIZE))


def test_wrong_entries_in_an_answer_are_an_error_not_data():
    channel = FakeChannel(range(10))
    channel.held[0] = framed(5)  # a bookie answering another entry than the one asked for
    (message,) = list(BatchedRangeRead(channel, LEDGER, 0, 9, 1 << 20))
    assert message.status == status.EIO and message.entryCount == 0


def test_request_encoding_matches_bookkeepers():
    payload = v2.encode_request(v2.BatchedReadRequest(2, 0, 9, 3, 1, 10, 4096))
    assert v2.decode_request(payload) == v2.BatchedReadRequest(2, 0, 9, 3, 1, 10, 4096)


# -- planning -----------------------------------------------------------------------------------------
def test_contiguous_shares_cover_the_fragment_evenly_round_robin():
    # Large enough: BALANCE_ROUNDS pieces per bookie, so the tasks come in several waves.
    shares = contiguous_shares(0, 199_999, 3, 100_000)
    assert len(shares) == 3 * BALANCE_ROUNDS and [m for m, _, _ in shares] == [0, 1, 2] * BALANCE_ROUNDS
    assert [a for _, a, _ in shares][0] == 0 and [b for _, _, b in shares][-1] == 199_999
    assert all(b + 1 == a for (_, _, b), (_, a, _) in zip(shares, shares[1:]))
    assert {b - a + 1 for _, a, b in shares} <= {16_666, 16_667}
    # Fewer rounds where pieces would drop below MIN_SHARE_ENTRIES.
    assert contiguous_shares(0, 3 * 2 * MIN_SHARE_ENTRIES - 1, 3, 100_000) == [
        (k % 3, k * MIN_SHARE_ENTRIES, (k + 1) * MIN_SHARE_ENTRIES - 1) for k in range(6)]
    shares = contiguous_shares(10, 1009, 2, 300)
    assert [m for m, _, _ in shares] == [0, 1, 0, 1]
    assert [(a, b) for _, a, b in shares] == [(10, 259), (260, 509), (510, 759), (760, 1009)]
    assert contiguous_shares(5, 6, 3, 100) == [(0, 5, 5), (1, 6, 6)]  # fewer entries than bookies


def test_slice_partitions_are_contiguous_where_wq_equals_e_and_striped_otherwise():
    ensembles = [(0, ("a", "b", "c")), (100, ("a", "d", "c"))]
    transports = SimpleNamespace(of=lambda ensemble: {b: None for b in ensemble})

    def plan(wq):
        md = SimpleNamespace(write_quorum_size=wq, digest_type=DigestType.CRC32C, fragments=lambda: [(0, 99, ensembles[0][1]), (100, -1, ensembles[1][1])])
        return [(p.member, p.first, p.last, p.striped, p.ensemble[p.member])
                for p in slice_partitions(LedgerSlice(LEDGER, md, 50, 159, None, None), transports, 1000)]

    assert plan(3) == [(0, 50, 65, False, "a"), (1, 66, 82, False, "b"), (2, 83, 99, False, "c"),
                       (0, 100, 119, False, "a"), (1, 120, 139, False, "d"), (2, 140, 159, False, "c")]
    assert plan(2) == [(m, 50, 99, True, "abc"[m]) for m in range(3)] + [(m, 100, 159, True, "adc"[m]) for m in range(3)]
