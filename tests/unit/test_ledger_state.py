"""Per-ledger state in process (master key, fence, missing ledgers and entries) and range reads.

That it survives a SIGKILL, with and without a checkpoint: tests/integration/test_ledger_state_replay.py."""
from __future__ import annotations

import pytest

from bookie.exceptions import NoEntryException, NoLedgerException, UnauthorizedAccessException
from bookie.ledger_id import LedgerId
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from tests.helpers.engine_ops import PASSWORD, payload

KEY = generate_master_key(PASSWORD)
OTHER_KEY = generate_master_key(b"not the password")
L1, L2 = LedgerId(0, 1), LedgerId(3, 99)


def test_first_key_wins_even_for_a_fence(make_bookie):
    bookie = make_bookie()
    bookie.fence_ledger(L1, KEY).result(10)  # fencing an unknown ledger creates it with that key
    with pytest.raises(UnauthorizedAccessException):
        bookie.fence_ledger(L1, OTHER_KEY)
    with pytest.raises(NoEntryException):
        bookie.read_entry(L1, -1)  # known ledger, no entries: an answer, not an error


def test_unknown_ledger_and_missing_entry_are_told_apart(make_bookie):
    bookie = make_bookie()
    with pytest.raises(NoLedgerException) as err:
        bookie.read_entry(LedgerId(0, 12345), 0)
    assert err.value.status == status.ENOLEDGER
    digest = DigestManager(L1, PASSWORD)
    bookie.add_entries(L1, KEY, digest.build_framed(0, -1, 0, [b"a", b"b"])[0]).result(10)
    with pytest.raises(NoEntryException) as err:
        bookie.read_entry(L1, 2)
    assert err.value.status == status.ENOENTRY


def test_range_read_skips_entries_striped_elsewhere(make_bookie):
    """With striping a bookie holds every other entry; a range read returns exactly those."""
    bookie = make_bookie()
    digest = DigestManager(L1, PASSWORD)
    for eid in range(0, 20, 2):
        bookie.add_entries(L1, KEY, digest.build_framed(eid, eid - 1, 0, [payload(eid)])[0]).result(10)
    blob, count, covered = bookie.read_entries(L1, 3, 15)
    from bookie.proto import entry_format
    ids = [digest.verify(frame)[0].entry_id for frame in entry_format.iter_frames(blob)]
    assert ids == [4, 6, 8, 10, 12, 14] and count == 6 and covered == 15
    blob, count, covered = bookie.read_entries(L1, 0, 19, max_bytes=1)
    assert count == 1 and covered == 0  # a byte budget still returns one entry, and says how far it got


def test_budgeted_range_reads_resume_where_they_stopped(make_bookie):
    """Back-to-back entries come out in one piece; a byte budget cuts the piece and says where."""
    from bookie.proto import entry_format
    bookie = make_bookie()
    digest = DigestManager(L1, PASSWORD)
    bookie.add_entries(L1, KEY, digest.build_framed(0, -1, 0, [payload(i) * 50 for i in range(100)])[0]).result(10)
    seen, first = [], 0
    while first <= 99:
        blob, count, covered = bookie.read_entries(L1, first, 99, max_bytes=1000)
        ids = [digest.verify(f)[0].entry_id for f in entry_format.iter_frames(blob)]
        assert count == len(ids) and ids and ids[-1] == covered and covered < 99 or covered == 99
        seen += ids
        first = covered + 1
    assert seen == list(range(100))


@pytest.mark.parametrize("stride, offset, budget", [(0, 0, 1 << 20), (3, 1, 1 << 20), (3, 2, 700), (4, 0, 1200)])
def test_range_reads_across_lookup_windows(make_bookie, monkeypatch, stride, offset, budget):
    """A range read looks the index up a window at a time: every wanted entry comes out once, in order,
    whether a message ends inside a window, at its edge or runs over several windows."""
    from bookie.proto import entry_format
    from bookie.server import ledger_storage
    monkeypatch.setattr(ledger_storage, "READ_WINDOW", 7)
    bookie = make_bookie()
    digest = DigestManager(L1, PASSWORD)
    stored = [e for e in range(200) if e % 5 != 3]  # gaps: entries striped to other bookies
    for e in stored:
        bookie.add_entries(L1, KEY, digest.build_framed(e, e - 1, 0, [payload(e)])[0]).result(10)
    wanted = [e for e in stored if not stride or e % stride == offset]
    seen, first, messages = [], 0, 0
    while first <= 230:
        blob, count, covered = bookie.read_entries(L1, first, 230, max_bytes=budget, stride=stride, offset=offset)
        ids = [digest.verify(f)[0].entry_id for f in entry_format.iter_frames(blob)]
        assert count == len(ids) and all(first <= e <= covered for e in ids)
        assert covered >= first, "a range read always makes progress"
        seen += ids
        first, messages = covered + 1, messages + 1
    assert seen == wanted
    assert messages == 1 if budget >= 1 << 20 else messages > 1


@pytest.mark.parametrize("equal_sizes", [True, False], ids=["equal-sizes", "mixed-sizes"])
def test_striped_range_read_is_the_stored_records_in_order(make_bookie, equal_sizes):
    """Every other record of a log wanted (a bookie of E=3 WQ=2 read with stride 3): with equal sizes
    one strided copy, otherwise slices; either way the blob is exactly the framed stored records."""
    from bookie.proto import entry_format
    bookie = make_bookie()
    digest = DigestManager(L1, PASSWORD)
    stored = [e for e in range(300) if e % 3 != 1]
    for e in stored:
        body = b"%06d" % e * (50 if equal_sizes else 1 + e % 7)
        bookie.add_entries(L1, KEY, digest.build_framed(e, e - 1, 0, [body])[0]).result(10)
    blob, count, covered = bookie.read_entries(L1, 0, 299, stride=3, offset=2)
    wanted = [e for e in stored if e % 3 == 2]
    records = [bookie.read_entry(L1, e) for e in wanted]
    assert blob == b"".join(entry_format.FRAME.pack(len(r)) + r for r in records)
    assert count == len(wanted) and covered == 299
