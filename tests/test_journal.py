"""Journal: group commit, roll, LastLogMark, deletion after checkpoint, torn and corrupt tails."""
from __future__ import annotations

import logging
import os
import struct

import pytest

from bookie.exceptions import NoEntryException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import journal
from bookie.server.last_log_mark import read_last_mark
from tests.conftest import engine_settings, flip_byte, run_then_sigkill
from tests.helpers.engine_ops import PASSWORD, payload

KEY = generate_master_key(PASSWORD)
LEDGER = LedgerId(0, 5)


def add(bookie, first: int, count: int, size: int = 100):
    digest = DigestManager(LEDGER, PASSWORD)
    blob, _ = digest.build_framed(first, first - 1, 0, [bytes([i % 251]) * size for i in range(first, first + count)])
    return bookie.add_entries(LEDGER, KEY, blob)


def test_group_commit_puts_queued_adds_in_one_fsync(make_bookie, monkeypatch):
    syncs = []
    real = os.fdatasync
    monkeypatch.setattr(journal.os, "fdatasync", lambda fd: (syncs.append(fd), real(fd)))
    bookie = make_bookie(journalFlushWhenQueueEmpty=False, journalMaxGroupWaitMSec=200)
    futures = [add(bookie, i * 10, 10) for i in range(50)]
    assert [f.result(10) for f in futures][-1][-1] == 499
    assert 1 <= len(syncs) < 10, f"{len(syncs)} fsyncs for 50 queued adds: they were not grouped"


def test_journal_rolls_and_old_journals_go_after_checkpoint(make_bookie, tmp_path):
    bookie = make_bookie(journalMaxSizeMB=1, journalMaxBackups=1)
    journal_dir = bookie.journal_dirs[0]
    first_ids = journal.list_journal_ids(journal_dir)
    for i in range(40):  # 40 x 100 KiB: several 1 MiB journals
        add(bookie, i * 100, 100, size=1024).result(10)
    ids = journal.list_journal_ids(journal_dir)
    assert len(ids) >= 4 and ids[: len(first_ids)] == first_ids
    marks = bookie.checkpoint()
    assert marks[0].log_id == ids[-1] and marks[0].offset > journal.HEADER_SIZE
    assert read_last_mark(bookie.ledger_dirs) == marks[0]
    assert journal.list_journal_ids(journal_dir) == ids[-2:]  # the mark's journal and journalMaxBackups=1 older
    add(bookie, 4000, 10).result(10)
    later = bookie.checkpoint()
    assert later[0] > marks[0], "LastLogMark did not advance"


def _journal_with_groups(tmp_path, groups: int):
    """A SIGKILLed engine whose journal holds ``groups`` acknowledged adds of 10 entries each."""
    settings = engine_settings(tmp_path)
    run_then_sigkill(settings, [["add", 0, 5, 10]] * groups)
    journal_dir = settings["journalDirectories"]
    (log_id,) = journal.list_journal_ids(journal_dir)
    path = journal.journal_path(journal_dir, log_id)
    return settings, path, group_ends(path)


def group_ends(path: str) -> list[int]:
    """Where each group of a journal file ends (after its padding record)."""
    with open(path, "rb") as f:
        data = f.read()
    ends = []
    pos = journal.HEADER_SIZE
    while True:
        (length,) = struct.unpack_from(">i", data, pos)
        if length == 0:
            break
        if length == journal.PADDING_MASK:
            (pad,) = struct.unpack_from(">i", data, pos + 4)
            pos += 8 + pad
            ends.append(pos)
        else:
            pos += 4 + length
    return ends


def _entries_present(bookie) -> list[int]:
    digest = DigestManager(LEDGER, PASSWORD)
    present = []
    for eid in range(0, 100):
        try:
            assert digest.verify(bookie.read_entry(LEDGER, eid), eid)[1].tobytes() == payload(eid)
            present.append(eid)
        except NoEntryException:
            pass
    return present


@pytest.mark.parametrize("damage", ["truncate-mid-group", "flip-byte", "garbage-length", "half-record"])
def test_torn_or_corrupt_tail_ends_replay_at_last_good_group(tmp_path, make_bookie, caplog, damage):
    settings, path, ends = _journal_with_groups(tmp_path, 5)
    # The first group is the ledger's key record + entries 0..9; groups 2..5 hold 10 entries each.
    last_start, last_end = ends[-2], ends[-1]
    with open(path, "r+b") as f:
        if damage == "truncate-mid-group":
            f.truncate(last_start + (last_end - last_start) // 2)
        elif damage == "flip-byte":
            pass  # below, once this handle is closed
        elif damage == "garbage-length":
            f.seek(last_start)
            f.write((0x7FFFFFF0).to_bytes(4, "big"))
        else:  # a record after the last group, cut short, as a crash mid-write leaves it
            f.seek(last_end)
            f.write((500).to_bytes(4, "big") + b"\1" * 100)
    if damage == "flip-byte":
        flip_byte(path, last_start + 60, 0x5A)
    with caplog.at_level(logging.WARNING):
        bookie = make_bookie()
    expected = list(range(50)) if damage == "half-record" else list(range(40))
    assert _entries_present(bookie) == expected
    assert any("replay stopped early" in r.message for r in caplog.records)


def test_clean_journal_replays_everything(tmp_path, make_bookie):
    _journal_with_groups(tmp_path, 3)
    bookie = make_bookie()
    assert bookie.replayed[0].torn is None
    assert _entries_present(bookie) == list(range(30))


def test_missing_journal_named_by_last_mark_refuses_to_start(tmp_path, make_bookie):
    settings = engine_settings(tmp_path)
    run_then_sigkill(settings, [["add", 0, 5, 10], ["checkpoint", 0, 0, 0], ["add", 0, 5, 10]])
    mark = read_last_mark([settings["ledgerDirectories"]])
    os.unlink(journal.journal_path(settings["journalDirectories"], mark.log_id))
    with pytest.raises(journal.JournalException, match="missing"):
        make_bookie()


def test_several_journal_directories_each_replay_from_their_own_mark(tmp_path, make_bookie):
    journals = f"{tmp_path}/j0,{tmp_path}/j1"
    settings = engine_settings(tmp_path, journalDirectories=journals)
    # Ledgers 4 and 5 go to journals 0 and 1 (ledger id mod 2).
    run_then_sigkill(settings, [["add", 0, 4, 5], ["add", 0, 5, 5], ["checkpoint", 0, 0, 0],
                                ["add", 0, 4, 5], ["add", 0, 5, 5]])
    ledger_dir = settings["ledgerDirectories"]
    assert {n for n in os.listdir(f"{ledger_dir}/current") if n.startswith("lastMark")} == {"lastMark.0", "lastMark.1"}
    bookie = make_bookie(journalDirectories=journals)
    assert [r.records for r in bookie.replayed if r.records] == [5, 5]  # the entries after each mark
    for lid in (4, 5):
        digest = DigestManager(LedgerId(0, lid), PASSWORD)
        assert digest.verify(bookie.read_entry(LedgerId(0, lid), 9), 9)[1].tobytes() == payload(9)
