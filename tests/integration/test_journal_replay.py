"""Journal replay after a SIGKILL: torn and corrupt tails, a missing journal, several journal directories."""
from __future__ import annotations

import logging
import os

import pytest

from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager
from bookie.server import journal
from bookie.server.last_log_mark import read_last_mark
from tests.helpers.disk_faults import flip_byte
from tests.helpers.engine_ops import PASSWORD, engine_settings, payload, run_then_sigkill
from tests.helpers.journal_files import entries_present, journal_with_groups


@pytest.mark.parametrize("damage", ["truncate-mid-group", "flip-byte", "garbage-length", "half-record"])
def test_torn_or_corrupt_tail_ends_replay_at_last_good_group(tmp_path, make_bookie, caplog, damage):
    settings, path, ends = journal_with_groups(tmp_path, 5)
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
    assert entries_present(bookie) == expected
    assert any("replay stopped early" in r.message for r in caplog.records)


def test_clean_journal_replays_everything(tmp_path, make_bookie):
    journal_with_groups(tmp_path, 3)
    bookie = make_bookie()
    assert bookie.replayed[0].torn is None
    assert entries_present(bookie) == list(range(30))


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
