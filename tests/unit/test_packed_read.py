"""spark_bookkeeper/packed_read.py: what a bookie's answer to a packed partition's one call gives each slice
(``sort_share``), on generated answers: entries missing, sent twice, unasked, of other ledgers, failing their
digest, split over messages; and entry_format.scan_ledgers, the frame scan of such an answer."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto.checksum import DigestManager, DigestType
from spark_bookkeeper.packed_read import expected_entries, slice_entries, sort_share
from spark_bookkeeper.read_partitions import FragmentMemberPartition, PackedPartition

PASSWORD = b"pw"
ENSEMBLE = ("a:1", "b:1", "c:1")


def _rows(lids, ids, offsets, data, owner) -> pa.RecordBatch:
    payload = pa.Array.from_buffers(pa.binary(), len(ids), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.RecordBatch.from_arrays([pa.array(lids), pa.array(ids), payload, pa.array(owner)],
                                      names=["ledger_id", "entry_id", "payload", "slice"])


def _payload(ledger: LedgerId, entry_id: int, size: int) -> bytes:
    return bytes([(ledger.ledger_id + entry_id) % 251]) * size


def _frame(ledger: LedgerId, digest: DigestType, entry_id: int, size: int, corrupt: bool = False) -> bytes:
    framed = DigestManager(ledger, PASSWORD, digest).build_frame(entry_id, entry_id - 1, 0, _payload(ledger, entry_id, size))
    return framed[:-1] + bytes([framed[-1] ^ 1]) if corrupt else framed


@st.composite
def answers(draw):
    """(slices, messages, the (slice, entry) pairs a correct answer holds, which of those were sent good)."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    uniform = draw(st.booleans())  # every entry of one size: the vectorized scan
    slices, sent = [], []
    for n in range(draw(st.integers(1, 12))):
        ledger = LedgerId(rnd.choice([0, 0, 5]), 100 + n)
        if slices and rnd.random() < 0.2:  # the id of the one before in the other scope: another ledger
            before = slices[-1].ledger
            other = LedgerId(5 if before.scope_id == 0 else 0, before.ledger_id)
            ledger = ledger if any(p.ledger == other for p in slices) else other
        digest = rnd.choice([DigestType.CRC32C, DigestType.CRC32C, DigestType.MAC, DigestType.CRC32])
        last_entry = rnd.randint(0, 9)
        striped = rnd.random() < 0.7
        member = rnd.randrange(3)
        # now and then two fragments of the ledger that this bookie serves: two slices of one ledger here
        cut = rnd.randint(0, last_entry - 1) if last_entry and rnd.random() < 0.25 else None
        for first, last in [(0, last_entry)] if cut is None else [(0, cut), (cut + 1, last_entry)]:
            p = FragmentMemberPartition(ledger, ENSEMBLE, member, first, last, write_quorum=2, digest_type=digest,
                                        services={}, striped=striped)
            slices.append(p)
            for e in range(first, last + 1):
                if striped and e % 3 != member:
                    if rnd.random() < 0.1:
                        sent.append((ledger, digest, e, False, None))  # another member's entry: not asked
                    continue
                fate = rnd.random()
                if fate < 0.15:
                    continue  # missing
                sent.append((ledger, digest, e, fate < 0.22, len(slices) - 1))  # corrupt when fate < 0.22
                if rnd.random() < 0.1:
                    sent.append((ledger, digest, e, False, len(slices) - 1))  # sent twice
    sent += [(LedgerId(0, 999), DigestType.CRC32C, 0, False, None)] * draw(st.integers(0, 2))  # never asked
    rnd.shuffle(sent)
    size = 64 if uniform else None
    blob_parts = [_frame(l, d, e, size or rnd.randint(1, 90), corrupt) for l, d, e, corrupt, _ in sent]
    cuts = sorted(rnd.sample(range(1, len(blob_parts)), min(2, max(0, len(blob_parts) - 1)))) if len(blob_parts) > 1 else []
    messages = [b"".join(blob_parts[a:b]) for a, b in zip([0, *cuts], [*cuts, len(blob_parts)])]
    good = {(i, e) for _, _, e, corrupt, i in sent if i is not None and not corrupt}
    # an entry sent once corrupt and once good is good
    return slices, messages, good


@settings(max_examples=300, deadline=None)
@given(answers())
def test_each_slice_gets_what_came_for_it_once_and_complete_slices_need_nothing_more(answer):
    slices, messages, good = answer
    share = sort_share(PackedPartition.of(slices).columns(), messages, PASSWORD, _rows)
    wanted = {i: {e for e in range(p.first, p.last + 1) if not p.striped or e % 3 == p.member}
              for i, p in enumerate(slices)}
    assert all(len(wanted[i]) == slice_entries(p) for i, p in enumerate(slices))
    assert expected_entries(PackedPartition.of(slices).columns()).tolist() == [len(wanted[i]) for i in range(len(slices))]
    came = {i: {e for j, e in good if j == i} for i in wanted}
    assert share.complete == {i for i in wanted if came[i] == wanted[i]}
    rows = pa.Table.from_batches(share.batches, schema=_rows(*([np.zeros(0, np.int64)] * 2), np.zeros(1, np.int32),
                                                              b"", np.zeros(0, np.int64)).schema) if share.batches else None
    listed = [] if rows is None else list(zip(rows.column("slice").to_pylist(), rows.column("entry_id").to_pylist()))
    assert sorted(listed) == sorted((i, e) for i in share.complete for e in wanted[i])  # each once
    if rows is not None:
        for lid, e, payload in zip(rows.column("ledger_id").to_pylist(), rows.column("entry_id").to_pylist(),
                                   rows.column("payload").to_pylist()):
            assert payload == _payload(LedgerId(0, lid), e, len(payload))
    assert set(share.partial) == {i for i in wanted if came[i] and i not in share.complete}
    for i, ahead in share.partial.items():
        assert sorted(ahead.ids.tolist()) == sorted(came[i]) and ahead.batch.num_rows == len(came[i])
        assert set(ahead.batch.column("slice").to_pylist()) == {i}


def test_an_unreadable_message_gives_nothing_and_the_rest_still_counts():
    ledger = LedgerId(0, 1)
    slices = [FragmentMemberPartition(ledger, ENSEMBLE, 0, 0, 1, write_quorum=3, digest_type=DigestType.CRC32C,
                                      services={}, striped=False)]
    good = _frame(ledger, DigestType.CRC32C, 0, 10) + _frame(ledger, DigestType.CRC32C, 1, 10)
    share = sort_share(PackedPartition.of(slices).columns(), [good[:-3], good], PASSWORD, _rows)
    assert share.complete == {0} and sum(b.num_rows for b in share.batches) == 2


@pytest.mark.parametrize("digest", [DigestType.CRC32C, DigestType.MAC])
def test_a_frame_too_short_for_its_digest_is_bad_not_read_past(digest):
    """A frame that holds a header and no digest (its size field says so) at the end of a message: the
    entry is left to the replicas; nothing is read beyond the message."""
    ledger = LedgerId(0, 3)
    slices = [FragmentMemberPartition(ledger, ENSEMBLE, 0, 0, 1, write_quorum=3, digest_type=digest, services={},
                                      striped=False)]
    header = _frame(ledger, digest, 1, 10)[4:4 + entry_format.V1_HEADER_LEN]
    cut = entry_format.FRAME.pack(len(header)) + header
    share = sort_share(PackedPartition.of(slices).columns(), [_frame(ledger, digest, 0, 10) + cut], PASSWORD, _rows)
    assert share.complete == set() and share.partial[0].ids.tolist() == [0]


@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize("scope", [0, 7])
def test_scan_ledgers_reads_any_ledgers_frames(uniform, scope):
    frames = [(LedgerId(scope, lid), e) for lid in (3, 4, 9) for e in range(5)]
    blob = b"".join(_frame(l, DigestType.CRC32C, e, 50 if uniform else 10 + e * 7) for l, e in frames)
    scopes, lids, eids, offsets = entry_format.scan_ledgers(blob, 1 << 20)
    assert list(zip(scopes.tolist(), lids.tolist(), eids.tolist())) == [(l.scope_id, l.ledger_id, e) for l, e in frames]
    assert [blob[o + 4:o + 4 + 1] for o in offsets.tolist()] == [f[4:5] for f in (_frame(l, DigestType.CRC32C, e, 1)
                                                                                 for l, e in frames)]
    with pytest.raises(ValueError, match="cut short|size"):
        entry_format.scan_ledgers(blob[:-5], 1 << 20)

