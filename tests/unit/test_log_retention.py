"""Log records with absolute segments and truncation bookkeeping (bookie.meta.log_metadata), what a
truncation drops (LogRetention), and the options and durations that ask for it."""
from __future__ import annotations

import json

import pytest

from bookie.cli.log_commands import parse_duration_ms
from bookie.exceptions import ConfigurationException
from bookie.ledger_id import LedgerId
from bookie.meta import log_metadata
from bookie.meta.log_metadata import Log, LogRetention, LogSegment
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions, WriteOptions

URI = "zk://127.0.0.1:2181/ledgers"


def _log(committed: list[int | None], first: int = 0) -> Log:
    return Log("events", [LogSegment(LedgerId(0, 100 + i), 10, 100, "w", i, t) for i, t in enumerate(committed)],
               first_segment=first)


def test_a_record_written_before_truncation_existed_reads_as_starting_at_segment_zero():
    old = json.dumps({"ledgers": [{"ledger": 7, "scope": 0, "entries": 3, "bytes": 30, "writer": "w", "batch": 0}],
                      "commits": {"w": 0}, "recent": [], "swept": []}).encode()
    log = Log.decode("old", old, 4)
    assert log.first_segment == 0 and log.end_segment == 1 and log.truncated == []
    assert log.segments[0].committed_ms is None and log.segment(0).ledger == LedgerId(0, 7)
    assert "committed_ms" not in json.loads(log.encode())["ledgers"][0]  # stays readable by older readers
    again = Log.decode("old", log.encode(), 5)
    assert again.segments == log.segments and again.first_segment == 0


def test_drop_first_keeps_numbers_and_records_pending_deletions():
    log = _log([1, 2, 3, 4], first=10)
    dropped = log.drop_first(2)
    assert [n for n, _ in dropped] == [10, 11]
    assert log.first_segment == 12 and log.end_segment == 14 and [n for n, _ in log.numbered()] == [12, 13]
    assert log.segment(12).ledger == LedgerId(0, 102)
    with pytest.raises(IndexError, match="segment 11 is not in log 'events' \\(segments 12..13\\)"):
        log.segment(11)
    assert log.pending_deletion() == [LedgerId(0, 100), LedgerId(0, 101)]
    log.mark_deleted({LedgerId(0, 100)})
    assert log.pending_deletion() == [LedgerId(0, 101)]
    decoded = Log.decode("events", log.encode(), 1)
    assert decoded.first_segment == 12 and decoded.truncated == log.truncated and not decoded.empty()


def test_deleted_truncations_are_remembered_up_to_a_bound_and_pending_ones_always(monkeypatch):
    monkeypatch.setattr(log_metadata, "TRUNCATED_KEPT", 2)
    log = _log([None] * 5)
    log.drop_first(5)
    log.mark_deleted({LedgerId(0, 100 + i) for i in (0, 1, 3, 4)})
    assert [(t.segment, t.deleted) for t in log.truncated] == [(2, False), (3, True), (4, True)]


def test_describe_loss_names_segments_and_ledgers():
    log = _log([None] * 4)
    log.drop_first(3)
    log.mark_deleted({LedgerId(0, 100)})
    text = log.describe_loss(1, 5)
    assert text == ("log 'events': segments 1..2 (ledgers 101, 102) were truncated away before they were read from "
                    "entry 5; the log now starts at segment 3")
    log.truncated = log.truncated[2:]  # history of segment 1 forgotten
    assert "(ledgers 102 (1 older ones no longer recorded))" in log.describe_loss(1, 0)


@pytest.mark.parametrize("retention, expected", [
    (LogRetention(before_segment=12), 2),
    (LogRetention(before_segment=5), 0),  # already below the first segment
    (LogRetention(before_segment=99), 4),
    (LogRetention(max_segments=3), 1),
    (LogRetention(max_segments=9), 0),
    (LogRetention(max_age_ms=100, now_ms=1300), 2),  # committed before 1200: 1000, 1100
    (LogRetention(max_age_ms=100, now_ms=1200), 1),  # 1100 is exactly 100 old: kept
    (LogRetention(max_segments=3, max_age_ms=100, now_ms=1300), 2),  # the larger prefix
    (LogRetention(max_segments=0, keep_last=3), 1),  # a batch's own segments are never dropped
])
def test_retention_drops_a_prefix(retention, expected):
    assert retention.drop_count(_log([1000, 1100, 1200, 1300], first=10)) == expected


def test_age_stops_at_a_segment_of_unknown_time_unless_a_fallback_knows_it():
    log = _log([1000, None, 1000])
    retention = LogRetention(max_age_ms=10, now_ms=5000)
    assert retention.drop_count(log) == 1
    assert retention.drop_count(log, lambda s: s.committed_ms or 900) == 3
    with pytest.raises(ValueError, match="needs now_ms"):
        LogRetention(max_age_ms=10).drop_count(log)


def test_stream_options():
    opts = ReadOptions.parse({"metadataServiceUri": URI, "log": "l"})
    assert opts.starting_offsets == "earliest" and opts.fail_on_data_loss
    opts = ReadOptions.parse({"metadataserviceuri": URI, "log": "l", "startingoffsets": "LATEST",
                              "failondataloss": "false"})
    assert opts.starting_offsets == "latest" and not opts.fail_on_data_loss
    opts = ReadOptions.parse({"metadataServiceUri": URI, "log": "l", "startingOffsets": '{"segment": 7, "entry": 3}'})
    assert opts.starting_offsets == (7, 3)
    for bad in ("first", '{"entry": 3}', "[1]", '{"segment": -1, "entry": 0}'):
        with pytest.raises(BookKeeperOptionException, match="option startingOffsets"):
            ReadOptions.parse({"metadataServiceUri": URI, "log": "l", "startingOffsets": bad})
    with pytest.raises(BookKeeperOptionException, match="failOnDataLoss applies to a stream of a log"):
        ReadOptions.parse({"metadataServiceUri": URI, "ledgers": "5", "failOnDataLoss": "true"})
    with pytest.raises(BookKeeperOptionException, match="must be true or false"):
        ReadOptions.parse({"metadataServiceUri": URI, "log": "l", "failOnDataLoss": "yes"})


def test_retention_write_options():
    assert WriteOptions.parse({"metadataServiceUri": URI, "log": "l"}).retention() is None
    opts = WriteOptions.parse({"metadataServiceUri": URI, "log": "l", "retentionSegments": "5", "retentionMs": "60000"})
    assert opts.retention() == LogRetention(max_segments=5, max_age_ms=60000)
    with pytest.raises(BookKeeperOptionException, match="retentionSegments=0 must be at least 1"):
        WriteOptions.parse({"metadataServiceUri": URI, "log": "l", "retentionSegments": "0"})
    with pytest.raises(BookKeeperOptionException, match="retentionMs='7d' is not an integer"):
        WriteOptions.parse({"metadataServiceUri": URI, "log": "l", "retentionMs": "7d"})


def test_durations():
    assert [parse_duration_ms(t) for t in ("500", "500ms", "30s", "15m", "2h", "7d")] == [
        500, 500, 30_000, 900_000, 7_200_000, 604_800_000]
    with pytest.raises(ConfigurationException, match="duration '7 weeks'"):
        parse_duration_ms("7 weeks")
