"""Packing read slices into partitions by bytes per bookie (spark_bookkeeper/partition_packing.py), on
generated plans; and how the reader sizes and packs the slices of a plan (reader.pack_partitions)."""
from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerState
from bookie.proto.checksum import DigestType
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions
from spark_bookkeeper.partition_packing import Piece, pack
from spark_bookkeeper.packed_read import slice_entries
from spark_bookkeeper.read_partitions import FragmentMemberPartition, PackedPartition
from spark_bookkeeper.reader import (DEFAULT_ENTRY_BYTES, HEAD_BYTES, HEAD_ENTRIES, HEAD_LEDGERS, LedgerSlice,
                                     pack_partitions, slice_partitions, split_head)

pieces = st.lists(st.builds(Piece, st.sampled_from("abcde"), st.integers(0, 5000),
                            st.one_of(st.none(), st.integers(0, 6))), max_size=120)
limits = st.tuples(st.integers(1, 20_000), st.integers(0, 3000))


@settings(max_examples=300, deadline=None)
@given(pieces, limits)
def test_every_piece_in_exactly_one_partition_of_its_bookie_within_the_bytes(plan, limits):
    max_bytes, open_cost = limits
    parts = pack(plan, max_bytes, open_cost)
    assert sorted(i for part in parts for i in part) == list(range(len(plan)))
    for part in parts:
        assert part == sorted(part) and part  # plan order within a partition, no empty one
        assert len({plan[i].bookie for i in part}) == 1
        assert len(part) == 1 or sum(plan[i].bytes + open_cost for i in part) <= max_bytes
        keys = [plan[i].apart for i in part if plan[i].apart is not None]
        assert len(keys) == len(set(keys))  # pieces kept apart stay apart
    assert pack(list(plan), max_bytes, open_cost) == parts  # deterministic


@settings(max_examples=100, deadline=None)
@given(pieces)
def test_first_fit_decreasing_uses_no_more_partitions_than_needed_where_pieces_are_free(plan):
    # Nothing kept apart, plenty of room: one partition per bookie.
    plan = [Piece(p.bookie, p.bytes) for p in plan]
    parts = pack(plan, 10**9, 10)
    assert len(parts) == len({p.bookie for p in plan})


def test_partitions_alternate_over_bookies():
    plan = [Piece("a", 60), Piece("a", 60), Piece("a", 60), Piece("b", 60), Piece("b", 60)]
    assert pack(plan, 100, 0) == [[0], [3], [1], [4], [2]]
    assert pack(plan, 1000, 0) == [[0, 1, 2], [3, 4]]
    assert pack([], 100, 0) == []


def test_a_piece_bigger_than_a_partition_is_alone():
    assert pack([Piece("a", 500), Piece("a", 5), Piece("a", 5)], 100, 10) == [[0], [1, 2]]


def _metadata(entries: int, length: int, closed: bool, ensemble=("a", "b", "c"), wq=3):
    return SimpleNamespace(ensemble_size=len(ensemble), write_quorum_size=wq, digest_type=DigestType.CRC32C,
                           last_entry_id=entries - 1 if closed else -1, length=length,
                           state=LedgerState.CLOSED if closed else LedgerState.OPEN,
                           is_closed=closed, fragments=lambda: [(0, entries - 1 if closed else -1, ensemble)])


def _opts(**options):
    return ReadOptions.parse({"metadataServiceUri": "zk://127.0.0.1:2181/ledgers", "ledgers": "1", **options})


TRANSPORTS = SimpleNamespace(of=lambda ensemble: {b: None for b in ensemble})


def test_many_small_ledgers_pack_into_few_partitions_per_bookie():
    # Issue 31's case: 2,000 ledgers of 3 x 1 KiB entries, E = WQ = 3: 6,000 slices of one entry.
    slices = [LedgerSlice(LedgerId.of(n), _metadata(3, 3 * 1024, True), 0, 2, None, None) for n in range(2000)]
    parts = pack_partitions(slices, TRANSPORTS, _opts())
    # 128 MiB / (1 KiB + 8 KiB) = 14,563 slices a partition: one per bookie (2,000 slices each).
    assert len(parts) == 3 and all(isinstance(p, PackedPartition) for p in parts)
    assert [p.bookie for p in parts] == ["a", "b", "c"]
    read = sorted((s.ledger.ledger_id, e) for p in parts for s in p.slices for e in range(s.first, s.last + 1))
    assert read == [(n, e) for n in range(2000) for e in range(3)]  # every entry exactly once
    # Each slice costs openCostInBytes: a smaller max or a bigger open cost gives more partitions.
    # 128 MiB / (1 KiB + 512 KiB) = 255 slices a partition: 8 per bookie, the bookies alternating.
    bigger = pack_partitions(slices, TRANSPORTS, _opts(openCostInBytes=str(512 * 1024)))
    assert len(bigger) == 24 and [p.bookie for p in bigger] == ["a", "b", "c"] * 8
    assert len(pack_partitions(slices, TRANSPORTS, _opts(openCostInBytes=str(1024 * 1024)))) == 3 * 16
    assert len(pack_partitions(slices, TRANSPORTS, _opts(maxBytesPerPartition="1"))) == 6000


slice_plans = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**63 - 1), st.integers(0, 50), st.integers(0, 9),
                                 st.sampled_from([("a", "b", "c"), ("b", "c", "d"), ("a",)]), st.integers(1, 3),
                                 st.sampled_from(list(DigestType)), st.booleans(), st.sampled_from([None, "app-log"]),
                                 st.one_of(st.none(), st.integers(0, 10**6))), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(slice_plans)
def test_a_packed_partition_travels_as_columns_and_comes_back_equal(plan):
    import pickle
    slices = [FragmentMemberPartition(LedgerId(scope, lid), ensemble, first % len(ensemble), first, first + span,
                                      write_quorum=min(wq, len(ensemble)), digest_type=digest,
                                      services={b: None for b in ensemble}, striped=striped, log=log, segment=segment)
              for scope, lid, first, span, ensemble, wq, digest, striped, log, segment in plan]
    back = pickle.loads(pickle.dumps(PackedPartition.of(slices)))
    assert isinstance(back, PackedPartition) and back.slices == tuple(slices)
    # One of each (ensemble, write quorum, digest, striped, log) travels, not one per slice.
    kinds = {(p.ensemble, p.write_quorum, p.digest_type, p.striped, p.log) for p in slices}
    assert len(PackedPartition.of(slices).__reduce__()[1][0]) == len(kinds)


def test_a_big_ledgers_slices_stay_apart():
    # 4 rounds of 3 contiguous pieces (reader.contiguous_shares): never packed together, however small.
    md = _metadata(200_000, 200_000, True)
    parts = pack_partitions([LedgerSlice(LedgerId.of(1), md, 0, 199_999, None, None)], TRANSPORTS, _opts())
    assert [len(p.slices) for p in parts] == [1] * 12


def test_open_ledgers_are_estimated_from_the_closed_ones():
    closed = LedgerSlice(LedgerId.of(1), _metadata(10, 10 * 5000, True), 0, 9, None, None)
    open_ = LedgerSlice(LedgerId.of(2), _metadata(0, 0, False), 0, 199, None, None)
    # 66-67 entries a slice x 5000 bytes (the closed ledger's average): over 300 KB, so apart from the closed one
    # (at DEFAULT_ENTRY_BYTES they would share partitions).
    parts = pack_partitions([closed, open_], TRANSPORTS, _opts(maxBytesPerPartition="300000", openCostInBytes="0"))
    assert sorted(len(p.slices) for p in parts) == [1] * 6
    # Without a closed ledger, an open one counts DEFAULT_ENTRY_BYTES per entry: two of 99 entries, 33 a slice.
    opened = [LedgerSlice(LedgerId.of(n), _metadata(0, 0, False), 0, 98, None, None) for n in (2, 3)]
    for max_entries, count in ((40, 6), (70, 3)):
        parts = pack_partitions(opened, TRANSPORTS, _opts(maxBytesPerPartition=str(max_entries * DEFAULT_ENTRY_BYTES),
                                                          openCostInBytes="0"))
        assert len(parts) == count


def _ranges(slices: list[LedgerSlice]) -> list[tuple[int, int, int]]:
    return [(sl.ledger.ledger_id, sl.first, sl.last) for sl in slices]


def test_a_striped_read_has_a_head_of_its_first_entries():
    """reader.split_head: the first HEAD_ENTRIES entries of a read that starts striped (WQ < E), cut from its
    first ledgers; none where every bookie holds every entry, or where one entry is over maxBytesPerPartition."""
    striped = [LedgerSlice(LedgerId.of(n), _metadata(3000, 3000 * 1024, True, wq=2), 0, 2999, None, None)
               for n in (1, 2)]
    head, rest = split_head(striped, _opts())
    assert _ranges(head) == [(1, 0, HEAD_ENTRIES - 1)]
    assert _ranges(rest) == [(1, HEAD_ENTRIES, 2999), (2, 0, 2999)]
    whole = [LedgerSlice(LedgerId.of(1), _metadata(3000, 3000 * 1024, True, wq=3), 0, 2999, None, None)]
    assert split_head(whole, _opts()) == ([], whole)  # its first partition holds entries 0.. in order already
    assert split_head(striped, _opts(maxBytesPerPartition="1")) == ([], striped)  # a partition per slice
    assert split_head([], _opts()) == ([], [])


def test_a_head_spans_the_first_ledgers_within_its_entries_ledgers_and_bytes():
    small = [LedgerSlice(LedgerId.of(n), _metadata(5, 5 * 100, True, wq=2), 0, 4, None, None) for n in range(20)]
    head, rest = split_head(small, _opts())
    assert _ranges(head) == [(n, 0, 4) for n in range(HEAD_LEDGERS)]  # whole ledgers, HEAD_LEDGERS of them
    assert _ranges(rest) == [(n, 0, 4) for n in range(HEAD_LEDGERS, 20)]
    big = [LedgerSlice(LedgerId.of(1), _metadata(1000, 1000 * 1024 * 1024, True, wq=2), 10, 999, None, None)]
    head, rest = split_head(big, _opts())  # 1 MiB entries: HEAD_BYTES of them, from the read's first entry on
    end = 10 + HEAD_BYTES // 2**20
    assert _ranges(head) == [(1, 10, end - 1)] and _ranges(rest) == [(1, end, 999)]


def test_the_head_travels_with_the_first_partition():
    striped = LedgerSlice(LedgerId.of(1), _metadata(30, 30 * 1024, True, wq=2), 0, 29, None, None)
    head = (tuple(slice_partitions(striped, TRANSPORTS, 1000)),)
    first = PackedPartition([], ()).with_head(head)
    back = pickle.loads(pickle.dumps(first))
    assert back.head == head and back.slices == head[0] and len(back) == 0
    assert back.services() == {"a": None, "b": None, "c": None}


@pytest.mark.parametrize("first,last,members", [(0, 9, 3), (5, 17, 4), (7, 7, 3), (0, 0, 1)])
def test_slice_entries_counts_a_stripe(first, last, members):
    md = _metadata(last + 1, 0, True, ensemble=tuple("abcd"[:members]), wq=1)
    for p in slice_partitions(LedgerSlice(LedgerId.of(1), md, first, last, None, None), TRANSPORTS, 1000):
        assert slice_entries(p) == sum(1 for e in range(p.first, p.last + 1) if members == 1 or e % members == p.member)


@pytest.mark.parametrize("options,message", [
    ({"maxBytesPerPartition": "0"}, "option maxBytesPerPartition=0 must be at least 1"),
    ({"maxBytesPerPartition": "128m"}, "option maxBytesPerPartition='128m' is not an integer"),
    ({"openCostInBytes": "-1"}, "option openCostInBytes=-1 must be at least 0"),
])
def test_bad_packing_options(options, message):
    with pytest.raises(BookKeeperOptionException, match=message):
        _opts(**options)


@settings(deadline=None)  # the first batch made imports pandas (pyarrow's lazy pandas shim): ~0.5 s once
@given(st.lists(st.integers(0, 30), max_size=60), st.integers(1, 40))
def test_coalesced_batches_keep_every_row_in_order_and_are_big_enough(sizes, rows):
    import pyarrow as pa

    from spark_bookkeeper.reader import coalesced
    start, batches = 0, []
    for n in sizes:
        batches.append(pa.RecordBatch.from_pydict({"x": list(range(start, start + n))},
                                                  schema=pa.schema([("x", pa.int64())])))
        start += n
    out = list(coalesced(iter(batches), rows))
    assert [v for b in out for v in b.column(0).to_pylist()] == list(range(start))
    assert all(b.num_rows >= rows for b in out[:-1])  # only the last may be short
