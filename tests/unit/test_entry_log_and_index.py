"""Entry logs (roll, ledgers map, corruption) and the index behind a tiny ledger cache."""
from __future__ import annotations

import os

import pytest

from bookie.exceptions import EntryCorruptedException
from bookie.exceptions import BKDigestMatchException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto import status
from bookie.proto.checksum import DigestManager
from bookie.proto.range_columns import RangeColumns
from bookie.server.entry_log_format import LOG_HEADER_SIZE, log_path
from bookie.server.index import index_path
from tests.helpers.disk_faults import flip_byte
from tests.helpers.engine_entries import PASSWORD, write

def test_entry_logs_roll_and_record_their_ledgers(make_bookie):
    bookie = make_bookie(entryLogSizeLimit=8 * 1024)
    a, b = LedgerId(0, 1), LedgerId(9, 2)
    for i in range(30):
        write(bookie, a, i * 4, 4)
        write(bookie, b, i * 2, 2)
    logger = bookie.storage.entry_logger
    finished = logger.log_ids()[:-1]
    assert len(finished) >= 4
    total = {a: 0, b: 0}
    for log_id in finished:
        ledgers = logger.read_ledgers_map(log_id)
        assert ledgers and set(ledgers) <= {a, b}
        for ledger, nbytes in ledgers.items():
            total[ledger] += nbytes
    assert logger.read_ledgers_map(logger.log_id) is None  # the current log is not finished yet
    # Bytes per ledger add up to what was written to the finished logs (frames of 4 + 36-byte headers).
    assert total[a] > 0 and total[b] > 0 and total[a] > total[b]


def test_index_flushes_when_the_ledger_cache_is_full(make_bookie, tmp_path):
    bookie = make_bookie(pageSize=64, pageLimit=3)  # 8 entries per page, 3 pages in memory
    ledgers = [LedgerId(0, n) for n in range(1, 5)]
    written = {lid: write(bookie, lid, 0, 40, size=20) for lid in ledgers}
    cache = bookie.storage.cache
    assert cache.pages_written > 0, "a full cache must write pages before any checkpoint"
    assert all(os.path.exists(index_path(bookie.ledger_dirs[0], lid)) for lid in ledgers)
    for lid, payloads in written.items():  # reads page index data back in from the files
        digest = DigestManager(lid, PASSWORD)
        for eid in (0, 17, 39):
            assert digest.verify(bookie.read_entry(lid, eid), eid)[1].tobytes() == payloads[eid]
    bookie.shutdown()
    again = make_bookie(pageSize=64, pageLimit=3)
    for lid, payloads in written.items():
        blob, count, _ = again.read_entries(lid, 0, 39)
        digest = DigestManager(lid, PASSWORD)
        assert [digest.verify(f)[1].tobytes() for f in entry_format.iter_frames(blob)] == payloads


def _checkpointed(make_bookie, ledger: LedgerId, count: int, entry_id: int):
    """Write ``count`` entries, checkpoint; return (bookie, entry log path, offset of ``entry_id``)."""
    bookie = make_bookie()
    write(bookie, ledger, 0, count)
    bookie.checkpoint()
    loc = bookie.storage.cache.get(ledger, entry_id)
    return bookie, log_path(bookie.ledger_dirs[0], loc >> 32), loc & 0xFFFFFFFF


@pytest.mark.parametrize("where", ["size", "ledger-id", "entry-id"])
def test_corrupt_entry_log_record_is_reported_as_corrupt_not_missing(make_bookie, where):
    ledger = LedgerId(0, 7)
    bookie, path, offset = _checkpointed(make_bookie, ledger, 10, 4)
    bookie.shutdown()
    flip_byte(path, {"size": offset - 4, "ledger-id": offset + 3, "entry-id": offset + 15}[where])
    bookie = make_bookie()
    with pytest.raises(EntryCorruptedException) as err:
        bookie.read_entry(ledger, 4)
    assert err.value.status == status.EIO
    with pytest.raises(EntryCorruptedException):
        bookie.read_entries(ledger, 0, 9)
    with pytest.raises(EntryCorruptedException):  # a window of a few ids: read record by record
        bookie.read_entries(ledger, 3, 5)
    assert bookie.read_entry(ledger, 5)  # neighbours still read


@pytest.mark.parametrize("first, last, stride, offset", [(0, 0, 0, 0), (2, 5, 0, 0), (0, 11, 3, 1), (0, 29, 0, 0),
                                                         (0, 29, 3, 2), (25, 40, 0, 0), (28, 40, 4, 1)])
def test_a_window_of_a_few_ids_reads_what_the_array_path_reads(make_bookie, first, last, stride, offset):
    """Ranges of at most SCALAR_WINDOW wanted ids take the record-by-record path, longer ones the array
    path: the same frames, counts and covered ids either way (30 entries stored, ids 0..29)."""
    ledger = LedgerId(0, 11)
    bookie = make_bookie()
    payloads = write(bookie, ledger, 0, 30)
    parts, count, covered = bookie.storage.read_framed_parts(ledger, first, last, 1 << 20, stride, offset)
    step = max(stride, 1)
    wanted = [e for e in range(first, min(last, 29) + 1) if not stride or e % step == offset]
    frames = list(entry_format.iter_frames(b"".join(parts)))
    digest = DigestManager(ledger, PASSWORD)
    assert [digest.verify(f)[1].tobytes() for f in frames] == [payloads[e] for e in wanted]
    assert count == len(wanted) and covered == last
    one = bookie.storage.read_framed_parts(ledger, first, last, 1, stride, offset)  # a budget of a byte
    assert one[1] == min(1, len(wanted)) and (not wanted or one[2] == wanted[0])


def test_flipped_payload_byte_is_caught_by_the_digest(make_bookie):
    ledger = LedgerId(0, 8)
    bookie, path, offset = _checkpointed(make_bookie, ledger, 3, 1)
    flip_byte(path, offset + 32 + 4 + 50, 0x01)  # a payload byte: header 32, crc32c 4
    with pytest.raises(BKDigestMatchException):
        DigestManager(ledger, PASSWORD).verify(bookie.read_entry(ledger, 1), 1)


def test_entry_log_cut_short_is_corrupt(make_bookie):
    ledger = LedgerId(0, 9)
    bookie, path, offset = _checkpointed(make_bookie, ledger, 5, 3)
    bookie.shutdown()
    with open(path, "r+b") as f:
        f.truncate(offset + 10)
    bookie = make_bookie()
    with pytest.raises(EntryCorruptedException):
        bookie.read_entry(ledger, 3)
    assert os.path.getsize(path) > LOG_HEADER_SIZE


@pytest.mark.parametrize("checkpointed", [False, True])
def test_records_around_the_read_ahead_come_whole_from_the_buffer_and_the_file(make_bookie, checkpointed):
    """An entry log record is read with its size and RECORD_READ_AHEAD bytes in one read, and the rest of a
    bigger one after: every size around that boundary reads back whole, from the write buffer or the file,
    the last record of the log too (a read ahead past the end of what is written)."""
    from bookie.server.entry_logger import RECORD_READ_AHEAD
    ledger = LedgerId(0, 12)
    bookie = make_bookie()
    header = 32 + 4  # v1 header and crc32c digest: the record is the payload and these
    sizes = [1, RECORD_READ_AHEAD - header - 1, RECORD_READ_AHEAD - header, RECORD_READ_AHEAD - header + 1,
             3 * RECORD_READ_AHEAD, 5]
    payloads = [write(bookie, ledger, eid, 1, size=size)[0] for eid, size in enumerate(sizes)]
    if checkpointed:
        bookie.checkpoint()
    digest = DigestManager(ledger, PASSWORD)
    for eid, payload in enumerate(payloads):
        assert digest.verify(bookie.read_entry(ledger, eid), eid)[1].tobytes() == payload
    frames = list(entry_format.iter_frames(b"".join(bookie.storage.read_framed_parts(ledger, 0, 5, 1 << 20)[0])))
    assert [digest.verify(f)[1].tobytes() for f in frames] == payloads


def test_a_big_record_cut_short_after_the_read_ahead_is_corrupt(make_bookie):
    from bookie.server.entry_logger import RECORD_READ_AHEAD
    ledger = LedgerId(0, 13)
    bookie = make_bookie()
    write(bookie, ledger, 0, 1, size=3 * RECORD_READ_AHEAD)
    bookie.checkpoint()
    loc = bookie.storage.cache.get(ledger, 0)
    path, offset = log_path(bookie.ledger_dirs[0], loc >> 32), loc & 0xFFFFFFFF
    bookie.shutdown()
    with open(path, "r+b") as f:
        f.truncate(offset + 2 * RECORD_READ_AHEAD)  # the read ahead whole, the rest of the record not
    bookie = make_bookie()
    with pytest.raises(EntryCorruptedException, match="cut short"):
        bookie.read_entry(ledger, 0)


def _columns(ranges) -> RangeColumns:
    """(ledger, first, last, stride, offset) rows as ReadEntriesOfLedgers' columns."""
    return RangeColumns.of(*zip(*[(ledger.scope_id, ledger.ledger_id, *rest) for ledger, *rest in ranges]))


def test_few_ranges_read_together_give_what_each_read_alone_gives(make_bookie):
    """LedgerStorage.read_few_ranges (a call of many small ledgers): the frames ``read_framed_parts`` reads
    for each range of at most SCALAR_WINDOW wanted ids, nothing for an unknown ledger, None for a longer
    range and for one whose record is corrupt (read alone, that one says why)."""
    from bookie.server.ledger_storage import SCALAR_WINDOW
    bookie = make_bookie()
    ledgers = [LedgerId(0, 20 + n) for n in range(6)]
    for n, ledger in enumerate(ledgers):  # interleaved in the entry log, as concurrent writers leave them
        write(bookie, ledger, 0, 3 + n)
    for n, ledger in enumerate(ledgers):
        write(bookie, ledger, 3 + n, 2)
    # ledger n holds entries 0..4+n; (range, whether it asks for at most SCALAR_WINDOW of them)
    cases = [((ledgers[0], 0, 4, 0, 0), False), ((ledgers[1], 0, 9, 3, 1), True), ((ledgers[2], 2, 5, 0, 0), True),
             ((ledgers[5], 0, 20, 0, 0), False), ((ledgers[3], 1, 1, 0, 0), True), ((ledgers[4], 0, 8, 2, 0), False),
             ((ledgers[4], 7, 30, 0, 0), True), ((ledgers[2], 0, 2, 3, 1), True), ((ledgers[0], 4, 4, 0, 0), True)]
    got = bookie.storage.read_few_ranges(_columns([r for r, _ in cases] + [(LedgerId(0, 999), 0, 2, 0, 0)]))
    assert SCALAR_WINDOW == 4 and got[-1] == []  # an unknown ledger: nothing
    for ((ledger, first, last, stride, offset), few), frames in zip(cases, got):
        if not few:
            assert frames is None
            continue
        alone, count, _ = bookie.storage.read_framed_parts(ledger, first, last, 1 << 20, stride, offset)
        assert 0 < count <= SCALAR_WINDOW and b"".join(frames) == b"".join(alone)
    bookie.checkpoint()
    loc = bookie.storage.cache.get(ledgers[3], 1)
    flip_byte(log_path(bookie.ledger_dirs[0], loc >> 32), (loc & 0xFFFFFFFF) + 15)  # its entry id
    again = bookie.storage.read_few_ranges(_columns([(ledgers[3], 1, 1, 0, 0), (ledgers[0], 0, 1, 0, 0)]))
    assert again[0] is None and len(again[1]) == 2
    with pytest.raises(EntryCorruptedException):
        bookie.storage.read_framed_parts(ledgers[3], 1, 1, 1 << 20)
