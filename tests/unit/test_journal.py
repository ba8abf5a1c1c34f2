"""Journal in process: group commit, roll, LastLogMark, deletion after checkpoint.

Replay of torn and corrupt tails, after a SIGKILL: tests/integration/test_journal_replay.py."""
from __future__ import annotations

import os

from bookie.proto.checksum import DigestManager
from bookie.server import journal
from bookie.server.last_log_mark import read_last_mark
from tests.helpers.engine_ops import PASSWORD
from tests.helpers.journal_files import KEY, LEDGER


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
