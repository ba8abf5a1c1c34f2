"""Journal faults: a corrupt group in the middle of a journal, and a journal whose fsync fails.

A torn tail (nothing verified after the bad spot) was never acknowledged: replay ends there with a
warning (tests/integration/test_journal_replay.py). A corrupt group with verified groups after it held
acknowledged entries: start-up is refused, naming the file and the byte offset, unless the operator sets
skipReplayJournalInvalidRecord. A failed journal fsync stops the bookie: nothing after it is
acknowledged and the LastLogMark never passes it.
"""
from __future__ import annotations

import errno
import logging
import os
import threading

import pytest

from bookie.client.bookie_client import BookieClient
from bookie.exceptions import BKException
from bookie.exceptions import JournalException
from bookie.ledger_id import LedgerId
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from bookie.server import journal
from bookie.server.journal import LogMark
from bookie.server.last_log_mark import read_last_mark
from tests.helpers.disk_faults import flip_byte
from tests.helpers.engine_ops import PASSWORD, engine_settings, payload, run_then_sigkill
from tests.helpers.held_bookie import restart_held
from tests.helpers.journal_files import KEY, LEDGER, entries_present, group_ends, journal_with_groups
from tests.helpers.waiting import wait_for


def _file_holds(path: str, blobs: list[bytes]) -> bool:
    with open(path, "rb") as f:
        data = f.read()
    return all(blob in data for blob in blobs)


def _batch(first: int, count: int, ledger: LedgerId = LEDGER) -> bytes:
    digest = DigestManager(ledger, PASSWORD)
    return digest.build_framed(first, first - 1, 0, [payload(i) for i in range(first, first + count)])[0]


# -- item 9: a corrupt group in the middle of a journal ----------------------------------------------
@pytest.mark.parametrize("damage", ["flip-bit", "huge-length", "negative-length", "zero-length"])
def test_corrupt_group_mid_journal_refuses_to_start_naming_file_and_offset(tmp_path, make_bookie, damage):
    settings, path, ends = journal_with_groups(tmp_path, 5)
    bad = ends[0]  # group 2 (entries 10..19, acknowledged); groups 3..5 follow it
    if damage == "flip-bit":
        flip_byte(path, bad + 60, 0x04)
    else:
        length = {"huge-length": 0x7FFFFFF0, "negative-length": -5, "zero-length": 0}[damage]
        with open(path, "r+b") as f:
            f.seek(bad)
            f.write(length.to_bytes(4, "big", signed=True))
    with pytest.raises(JournalException) as refused:
        make_bookie()
    message = str(refused.value)
    assert path in message and f"byte {bad}" in message, message
    assert f"byte {ends[1]}" in message, "the message does not say where the next verified group is"
    assert "skipReplayJournalInvalidRecord" in message and "readjournal" in message, message


def test_skip_replay_journal_invalid_record_replays_the_verified_groups_after_it(tmp_path, make_bookie, caplog):
    settings, path, ends = journal_with_groups(tmp_path, 5)
    flip_byte(path, ends[0] + 60, 0x04)
    with caplog.at_level(logging.ERROR):
        bookie = make_bookie(skipReplayJournalInvalidRecord=True)
    assert entries_present(bookie) == list(range(10)) + list(range(20, 50))
    assert any(path in r.message and f"byte {ends[0]}" in r.message for r in caplog.records
               if r.levelno >= logging.ERROR), "the skipped group was not logged as an error"


def test_damaged_last_group_of_a_rolled_journal_refuses_to_start(tmp_path, make_bookie):
    """A bad end of journal N is not a tail when journal N+1 holds verified groups."""
    settings = engine_settings(tmp_path, journalMaxSizeMB=1)
    run_then_sigkill(settings, [["add", 0, 5, 8000]] * 3)  # ~400 KB each: the third rolls the journal
    ids = journal.list_journal_ids(settings["journalDirectories"])
    assert len(ids) == 2, ids
    first = journal.journal_path(settings["journalDirectories"], ids[0])
    ends = group_ends(first)
    flip_byte(first, ends[-2] + 100, 0x04)
    with pytest.raises(JournalException) as refused:
        make_bookie(journalMaxSizeMB=1)
    message = str(refused.value)
    assert first in message and f"byte {ends[-2]}" in message, message


def test_torn_tail_accepted_once_is_not_held_against_the_next_crash(tmp_path, make_bookie):
    """After a replay the bookie checkpoints (BookieImpl.start), so an old torn tail is not replayed again."""
    settings, path, ends = journal_with_groups(tmp_path, 3)
    with open(path, "r+b") as f:
        f.truncate(ends[-1] - 100)  # group 3 cut short: entries 20..29 were never acknowledged
    run_then_sigkill(settings, [["add", 0, 5, 10]] * 2)  # replays 0..19 with a warning, acknowledges 20..39
    bookie = make_bookie()
    assert entries_present(bookie) == list(range(40))


# -- hazard: a failed journal fsync ---------------------------------------------------------------
def test_failed_fsync_fails_every_later_group_and_never_moves_the_mark(make_bookie):
    bookie = make_bookie()
    bookie_journal = bookie.journals[0]
    bookie.add_entries(LEDGER, KEY, _batch(0, 5)).result(30)
    bookie.checkpoint()
    persisted = read_last_mark(bookie.ledger_dirs)
    bookie.add_entries(LEDGER, KEY, _batch(5, 5)).result(30)
    mark = bookie_journal.last_log_mark
    held, release = threading.Event(), threading.Event()
    real = bookie_journal._fdatasync

    def failing_once(fd: int) -> None:
        if held.is_set():
            return real(fd)
        held.set()
        release.wait(60)  # later groups are written and queued behind this fsync meanwhile
        raise OSError(errno.EIO, "injected bookie_journal fsync failure")

    bookie_journal._fdatasync = failing_once
    failed = bookie.add_entries(LEDGER, KEY, _batch(10, 5))
    assert held.wait(60)
    later_blobs = [_batch(15, 5), _batch(20, 5)]
    later = [bookie.add_entries(LEDGER, KEY, blob) for blob in later_blobs]
    wait_for(lambda: _file_holds(bookie_journal._channel.path, later_blobs), "the later groups to be written")
    release.set()
    for future in [failed, *later]:
        with pytest.raises(JournalException):
            future.result(30)
    assert bookie_journal.last_log_mark == mark, "the LastLogMark moved past a group whose fsync failed"
    with pytest.raises(JournalException):
        bookie.add_entries(LEDGER, KEY, _batch(25, 5)).result(30)
    assert bookie.journal_failure is not None
    bookie.shutdown()
    assert read_last_mark(bookie.ledger_dirs) == persisted, "shutdown after a bookie_journal failure checkpointed"


def _answer(send) -> str:
    """The bookie's answer to an add (a status name), or how it could not be sent or answered."""
    try:
        return status.name_of(send().result(60).status)
    except BKException as exc:
        return f"no answer: {exc}"


def test_bookie_whose_journal_fsync_fails_acknowledges_nothing_more_and_exits(cluster, tmp_path):
    c = cluster(1)
    b = c.bookies[0]
    hold = restart_held(c, 0, tmp_path / "control", "fsync")  # c.stop() still stops it by PID
    client = BookieClient(b.bookie_id, timeout=30, address=b.grpc_address)
    try:
        for eid in range(5):
            assert _answer(lambda: client.add(LEDGER, KEY, _batch(eid, 1))) == "EOK"
        hold.arm()
        blobs = [_batch(eid, 1) for eid in (5, 6, 7)]
        held = client.add(LEDGER, KEY, blobs[0])
        hold.wait_holding("the journal fsync to be held")
        queued = [client.add(LEDGER, KEY, blob) for blob in blobs[1:]]
        log_id = journal.list_journal_ids(b.journal_dir)[-1]
        journal_file = journal.journal_path(b.journal_dir, log_id)
        wait_for(lambda: _file_holds(journal_file, blobs), "entries 6 and 7 to be written behind the held fsync")
        hold.release()  # the held fsync fails
        answers = [_answer(lambda f=f: f) for f in [held, *queued]]
        assert "EOK" not in answers, f"adds in or after the failed group were acknowledged: {answers}"
        assert _answer(lambda: client.add(LEDGER, KEY, _batch(8, 1))) != "EOK"
        assert b.proc.wait(timeout=60) != 0, "the bookie exited with code 0 after a journal failure"
        with open(b.log_path, errors="replace") as f:
            assert "injected journal fsync failure" in f.read()
        with open(journal_file, "rb") as f:
            failed_group = f.read().find(blobs[0])
        assert read_last_mark([b.ledger_dir]) <= LogMark(log_id, failed_group), "the mark passed the failed group"
    finally:
        client.close()
    b.proc = None
    c.start_bookie(0)  # the normal code: replay from the mark
    client = BookieClient(b.bookie_id, timeout=30, address=b.grpc_address)
    try:
        digest = DigestManager(LEDGER, PASSWORD)
        for eid in range(5):
            response = client.read_entry(LEDGER, eid)
            assert response.status == status.EOK, status.name_of(response.status)
            assert digest.verify(response.body, eid)[1].tobytes() == payload(eid)
    finally:
        client.close()


# -- records an older bookie journaled before the checks at the door --------------------------------
def test_replay_drops_records_that_could_stop_a_checkpoint(tmp_path, make_bookie, caplog):
    """A journal written before explicit LAC blobs, master keys and entry ids were checked may hold
    records no index can take; replay drops them with an error, and the bookie checkpoints and
    restarts with everything else."""
    from bookie.proto import entry_format
    from bookie.server import ServerConfiguration
    from bookie.server.bookie import _key_record

    settings = engine_settings(tmp_path)
    make_bookie().shutdown()  # a formatted bookie (cookies), cleanly stopped
    older = journal.Journal(settings["journalDirectories"], ServerConfiguration(settings))
    older.start()  # a newer journal file, as the older bookie left it
    bad_lac, bad_key, far = LedgerId(0, 777777), LedgerId(0, 888888), LedgerId(0, 999999)
    records = [_key_record(LEDGER, KEY), _batch(0, 5),
               _key_record(bad_lac, KEY),
               entry_format.meta_record(bad_lac, entry_format.METAENTRY_ID_LEDGER_EXPLICITLAC,
                                        entry_format.FRAME.pack(2000) + os.urandom(2000)),
               _key_record(bad_key, b"k" * 5000),
               _key_record(far, KEY), _batch(2 ** 62, 1, far)]
    done = [threading.Event() for _ in records]
    for record, event in zip(records, done):
        older.log(record, lambda error, e=event: e.set())
    assert all(event.wait(60) for event in done)
    older.shutdown()  # no checkpoint: everything is replayed from the journal
    with caplog.at_level(logging.ERROR):
        bookie = make_bookie()
    assert entries_present(bookie) == list(range(5))
    bookie.checkpoint()
    assert bookie.storage.descriptor(bad_key) is None
    with pytest.raises(Exception, match="no explicit LAC"):
        bookie.explicit_lac(bad_lac)
    dropped = " ".join(r.message for r in caplog.records if r.levelno >= logging.ERROR)
    assert "777777" in dropped and "888888" in dropped and "999999" in dropped
