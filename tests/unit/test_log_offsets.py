"""Offsets by time, batch offset ranges, admission control and lag (issue items 3-6), without a cluster: the
options (contradictions, bad values, what the running PySpark cannot honour), positions in a log record
(spark_bookkeeper/log_offsets.py), a micro-batch's end and Kafka's delayBatch (stream readers on a log record
in memory), the sharing of a bytes budget among tailed ledgers, and ``stream_lag``."""
from __future__ import annotations

import pytest

from bookie.ledger_id import LedgerId
from bookie.meta.log_metadata import Log, LogSegment, TruncatedSegment
from spark_bookkeeper import spark_versions
from spark_bookkeeper.ledger_stream_reader import share
from spark_bookkeeper.log_offsets import (LogDataLossException, advance, batch_range, entries_between,
                                          progress_offset, segment_at, starting_position, stream_lag)
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions, check_batch, check_stream, parse_time_ms
from spark_bookkeeper.spark_versions import ReadAllAvailable, ReadMaxRows
from spark_bookkeeper.stream_reader import UNBOUNDED_ROWS, LogStreamReader

URI = "zk://127.0.0.1:2181/ledgers"


@pytest.fixture(autouse=True)
def newest_pyspark(monkeypatch):
    """These tests test parsing and planning, not the running PySpark: they see PySpark 4.3 (the tests of the
    refusals by version pin their own)."""
    monkeypatch.setattr(spark_versions, "PYSPARK_VERSION", (4, 3))


def _parse(**options) -> ReadOptions:
    return ReadOptions.parse({"metadataServiceUri": URI, **options})


def _log(*segments: tuple[int, int, int | None], first: int = 0) -> Log:
    """A log whose segments are (entries, bytes, committed_ms), numbered from ``first``."""
    return Log("events", [LogSegment(LedgerId(0, 100 + n), entries, size, "w", n, committed)
                          for n, (entries, size, committed) in enumerate(segments)], first_segment=first)


def _time_of(segment: LogSegment) -> int | None:
    return segment.committed_ms


# -- options ----------------------------------------------------------------------------------------
def test_log_position_options_parse():
    opts = _parse(log="l", startingOffsets='{"segment": 2, "entry": 5}', endingOffsets='{"segment": 4}')
    assert opts.starting_offsets == (2, 5) and opts.ending_offsets == (4, 0)
    opts = _parse(log="l", startingTimestamp="1700000000000", endingTimestamp=" 1700000005000 ",
                  startingOffsetsByTimestampStrategy="LATEST")
    assert (opts.starting_timestamp, opts.ending_timestamp, opts.timestamp_strategy) == (
        1700000000000, 1700000005000, "latest")
    assert _parse(log="l").ending_offsets == "latest" and _parse(log="l").timestamp_strategy == "error"


@pytest.mark.parametrize("options, message", [
    ({"startingTimestamp": "1", "startingOffsets": "earliest"},
     "options startingTimestamp and startingOffsets both say where the read starts"),
    ({"endingTimestamp": "1", "endingOffsets": "latest"},
     "options endingTimestamp and endingOffsets both say where the read ends"),
    ({"startEntry": "3", "startingOffsets": '{"segment": 1}'},
     "options startEntry and startingOffsets cannot be combined"),
    ({"endEntry": "3", "endingTimestamp": "5"}, "options endEntry and endingTimestamp cannot be combined"),
    ({"startingOffsetsByTimestampStrategy": "latest"},
     "startingOffsetsByTimestampStrategy applies with startingTimestamp"),
    ({"maxTriggerDelay": "1s"}, "option maxTriggerDelay applies with minEntriesPerTrigger"),
    ({"startingTimestamp": "yesterday"}, "option startingTimestamp='yesterday' is not a time: milliseconds since"),
    ({"endingTimestamp": "-5"}, "option endingTimestamp='-5' is not a time"),
    ({"startingTimestamp": "10", "endingTimestamp": "9"}, "option startingTimestamp=10 is after endingTimestamp=9"),
    ({"startingOffsets": '{"segment": 3, "entry": 1}', "endingOffsets": '{"segment": 3}'},
     "is after endingOffsets"),
    ({"endingOffsets": "end"}, "option endingOffsets='end'; allowed: earliest, latest, or JSON"),
    ({"startingOffsetsByTimestampStrategy": "earliest", "startingTimestamp": "1"},
     "option startingOffsetsByTimestampStrategy='earliest'; allowed: error, latest"),
    ({"minEntriesPerTrigger": "0"}, "option minEntriesPerTrigger=0 must be at least 1"),
    ({"maxBytesPerTrigger": "1k"}, "option maxBytesPerTrigger='1k' is not an integer"),
    ({"minEntriesPerTrigger": "5", "maxTriggerDelay": "5 min"}, "option maxTriggerDelay='5 min' is not a duration"),
])
def test_contradictions_and_bad_values_are_refused_naming_them(options, message):
    with pytest.raises(BookKeeperOptionException, match=message):
        _parse(log="l", **options)


@pytest.mark.parametrize("name, value", [("startingTimestamp", "1"), ("endingOffsets", "latest"),
                                         ("startingOffsetsByTimestampStrategy", "latest"), ("endingTimestamp", "1")])
def test_log_positions_are_refused_for_ledgers_and_scopes(name, value):
    for selection in ({"ledgers": "5"}, {"scope": "0"}):
        with pytest.raises(BookKeeperOptionException, match=f"option {name} applies to a stream of a log or a batch "
                                                            "read of one"):
            _parse(**selection, **{name: value})


def test_durations_are_spark_time_strings():
    assert [parse_time_ms(t, "maxTriggerDelay") for t in ("250", "250ms", "30s", "15m", "2min", "1h", "1d", "1500us")] \
        == [250, 250, 30_000, 900_000, 120_000, 3_600_000, 86_400_000, 1]
    assert _parse(log="l", minEntriesPerTrigger="10").max_trigger_delay_ms == 900_000  # Kafka's 15m
    assert _parse(log="l", minEntriesPerTrigger="10", maxTriggerDelay="30S").max_trigger_delay_ms == 30_000
    for bad in ("", "-1s", "1w", "1.5s", "s"):
        with pytest.raises(BookKeeperOptionException, match="is not a duration"):
            parse_time_ms(bad, "maxTriggerDelay")


def test_batch_and_stream_each_refuse_what_is_not_theirs():
    check_batch(_parse(log="l", startingOffsets='{"segment": 1}', endingTimestamp="5", failOnDataLoss="false"))
    for name in ("maxEntriesPerTrigger", "minEntriesPerTrigger", "maxBytesPerTrigger"):
        with pytest.raises(BookKeeperOptionException, match=f"option {name} applies to streaming reads"):
            check_batch(_parse(log="l", **{name: "10"}))
    with pytest.raises(BookKeeperOptionException, match="option startingOffsets applies to streaming reads when it is"):
        check_batch(_parse(log="l", startingOffsets="latest"))
    with pytest.raises(BookKeeperOptionException, match="option endingOffsets=earliest is not allowed"):
        check_batch(_parse(log="l", endingOffsets="earliest"))
    check_stream(_parse(log="l", startingTimestamp="5", minEntriesPerTrigger="3", maxTriggerDelay="1s"))
    for name in ("endingOffsets", "endingTimestamp"):
        with pytest.raises(BookKeeperOptionException, match=f"option {name} applies to batch reads"):
            check_stream(_parse(log="l", **{name: "latest" if name == "endingOffsets" else "5"}))


@pytest.mark.parametrize("version", [(4, 0), (4, 1)])
@pytest.mark.parametrize("name, value", [("maxEntriesPerTrigger", "5"), ("minEntriesPerTrigger", "5"),
                                         ("maxBytesPerTrigger", "5")])
def test_admission_control_needs_pyspark_4_2(monkeypatch, version, name, value):
    monkeypatch.setattr(spark_versions, "PYSPARK_VERSION", version)
    with pytest.raises(BookKeeperOptionException, match=f"option {name} needs PySpark 4.2 or newer"):
        _parse(log="l", **{name: value})
    _parse(log="l", startingTimestamp="5", endingOffsets='{"segment": 2}')  # positions work everywhere


def test_filter_pushdown_needs_pyspark_4_1(monkeypatch):
    monkeypatch.setattr(spark_versions, "PYSPARK_VERSION", (4, 0))
    with pytest.raises(BookKeeperOptionException, match="option filterPushdown needs PySpark 4.1 or newer"):
        _parse(ledgers="5", filterPushdown="true")
    assert not _parse(ledgers="5", filterPushdown="false").filter_pushdown
    monkeypatch.setattr(spark_versions, "PYSPARK_VERSION", (4, 1))
    assert _parse(ledgers="5", filterPushdown="true").filter_pushdown


# -- positions in a log -----------------------------------------------------------------------------
def test_a_time_selects_the_first_segment_committed_at_or_after_it():
    log = _log((10, 100, None), (10, 100, 1000), (10, 100, 1000), (10, 100, 2000), first=4)
    assert [segment_at(log, ms, _time_of) for ms in (0, 1000, 1001, 2000, 2001)] == [5, 5, 7, 7, None]
    assert segment_at(log, 0, lambda s: s.committed_ms if s.committed_ms is not None else 0) == 4  # a ctime of 0
    assert starting_position(log, _parse(log="l", startingTimestamp="1500"), _time_of) == (7, 0)
    latest = _parse(log="l", startingTimestamp="2001", startingOffsetsByTimestampStrategy="latest")
    assert starting_position(log, latest, _time_of) == (8, 0)
    with pytest.raises(BookKeeperOptionException, match=r"log 'events': no segment was committed at or after "
                       r"startingTimestamp=2001 \(1970-01-01T00:00:02.001\+00:00\); its newest commit was at 2000"):
        starting_position(log, _parse(log="l", startingTimestamp="2001"), _time_of)
    with pytest.raises(BookKeeperOptionException, match="it has no segments"):
        starting_position(_log(), _parse(log="l", startingTimestamp="1"), _time_of)


def test_batch_ranges_by_time_and_by_offset():
    log = _log((10, 100, 1000), (20, 200, 2000), (30, 300, 3000))
    assert batch_range(log, _parse(log="l"), _time_of) == [(0, 0, None), (1, 0, None), (2, 0, None)]
    assert batch_range(log, _parse(log="l", startingTimestamp="2000"), _time_of) == [(1, 0, None), (2, 0, None)]
    assert batch_range(log, _parse(log="l", endingTimestamp="3000"), _time_of) == [(0, 0, None), (1, 0, None)]
    between = _parse(log="l", startingTimestamp="1500", endingTimestamp="2500")
    assert batch_range(log, between, _time_of) == [(1, 0, None)]
    assert batch_range(log, _parse(log="l", endingTimestamp="9999"), _time_of) == [(0, 0, None), (1, 0, None),
                                                                                    (2, 0, None)]
    ranged = _parse(log="l", startingOffsets='{"segment": 0, "entry": 7}', endingOffsets='{"segment": 2, "entry": 4}')
    assert batch_range(log, ranged, _time_of) == [(0, 7, None), (1, 0, None), (2, 0, 3)]
    same = _parse(log="l", startingOffsets='{"segment": 1, "entry": 3}', endingOffsets='{"segment": 1, "entry": 3}')
    assert batch_range(log, same, _time_of) == []
    at_end = _parse(log="l", startingOffsets='{"segment": 3, "entry": 0}')
    assert batch_range(log, at_end, _time_of) == []
    with pytest.raises(BookKeeperOptionException, match=r'option endingOffsets=\{"segment": 3, "entry": 1\} is past '
                                                        r"the end of log 'events': its next segment will be 3"):
        batch_range(log, _parse(log="l", endingOffsets='{"segment": 3, "entry": 1}'), _time_of)
    with pytest.raises(BookKeeperOptionException, match="segment 1 of log 'events' has 20 entries; entry 21 is past"):
        batch_range(log, _parse(log="l", startingOffsets='{"segment": 1, "entry": 21}'), _time_of)


def test_a_batch_start_on_truncated_segments_fails_or_starts_at_the_first_left():
    log = _log((10, 100, 1000), (20, 200, 2000), first=5)
    log.truncated = [TruncatedSegment(3, LedgerId(0, 7), True), TruncatedSegment(4, LedgerId(0, 8), True)]
    with pytest.raises(LogDataLossException, match=r"segments 3..4 \(ledgers 7, 8\) were truncated away .* Set option "
                                                   "failOnDataLoss=false to read from segment 5"):
        batch_range(log, _parse(log="l", startingOffsets='{"segment": 3, "entry": 2}'), _time_of)
    lossy = _parse(log="l", startingOffsets='{"segment": 3, "entry": 2}', failOnDataLoss="false")
    assert batch_range(log, lossy, _time_of) == [(5, 0, None), (6, 0, None)]
    gone = _parse(log="l", endingOffsets='{"segment": 4, "entry": 0}', failOnDataLoss="false")
    assert batch_range(log, gone, _time_of) == []


def test_a_micro_batch_ends_at_its_budgets_but_takes_one_entry_at_least():
    log = _log((10, 1000, 1), (10, 100, 2), (5, 50, 3))  # 100, 10 and 10 bytes an entry
    end = (3, 0)
    assert advance(log, (0, 0), end) == end
    assert advance(log, (0, 4), end, max_entries=6) == (1, 0)
    assert advance(log, (0, 4), end, max_entries=7) == (1, 1)
    assert advance(log, (0, 0), end, max_bytes=250) == (0, 2)
    assert advance(log, (0, 9), end, max_bytes=150) == (1, 5)  # 100 bytes of segment 0, then 5 of 10 bytes
    assert advance(log, (0, 0), end, max_bytes=1) == (0, 1)  # one entry over the budget: still one
    assert advance(log, (0, 1), end, max_bytes=1) == (0, 2)
    assert advance(log, (1, 5), end, max_entries=100, max_bytes=80) == (2, 3)
    assert advance(log, (2, 5), end, max_entries=3) == (3, 0)  # at the end already: nothing to take
    assert entries_between(log, (0, 4), end) == 6 + 10 + 5
    assert entries_between(log, (1, 2), (2, 3)) == 8 + 3


# -- micro-batches of a log stream (a record in memory) ----------------------------------------------
def _stream(log: Log, **options) -> LogStreamReader:
    reader = LogStreamReader(_parse(log="events", **options), None)
    reader._log = lambda: log
    return reader


def test_read_limits_and_the_old_api():
    log = _log((10, 100, 1), (10, 100, 2))
    plain = _stream(log)
    assert plain.getDefaultReadLimit() == ReadAllAvailable()
    assert plain.latestOffset() == {"segment": 2, "entry": 0}  # PySpark < 4.2: no start, no limit
    assert plain.latestOffset({"segment": 0, "entry": 3}, ReadAllAvailable()) == {"segment": 2, "entry": 0}
    capped = _stream(log, maxEntriesPerTrigger="12", maxBytesPerTrigger="50")
    assert capped.getDefaultReadLimit() == ReadMaxRows(12)
    assert capped.latestOffset({"segment": 0, "entry": 0}, ReadMaxRows(12)) == {"segment": 0, "entry": 5}
    assert capped.latestOffset({"segment": 0, "entry": 0}, ReadAllAvailable()) == {"segment": 2, "entry": 0}  # Once
    by_bytes = _stream(log, maxBytesPerTrigger="100")  # 10 bytes an entry
    assert by_bytes.getDefaultReadLimit() == ReadMaxRows(UNBOUNDED_ROWS)
    assert by_bytes.latestOffset({"segment": 0, "entry": 8}, ReadMaxRows(UNBOUNDED_ROWS)) == {"segment": 1, "entry": 8}
    assert by_bytes.reportLatestOffset() == {"segment": 2, "entry": 0}


def test_min_entries_hold_a_micro_batch_back_as_kafkas_delay_batch():
    log = _log((10, 100, 1))
    reader = _stream(log, minEntriesPerTrigger="15", maxTriggerDelay="1h")
    limit = reader.getDefaultReadLimit()
    start = {"segment": 0, "entry": 0}
    assert reader.latestOffset(start, limit) == {"segment": 1, "entry": 0}  # the first trigger always goes (Kafka)
    assert reader.last_trigger_ms > 0
    assert reader.latestOffset(start, limit) is start  # 10 new entries < 15, within the hour: held back
    log.segments.append(LogSegment(LedgerId(0, 200), 5, 50, "w", 1, 2))
    assert reader.latestOffset(start, limit) == {"segment": 2, "entry": 0}  # 15 entries: through
    assert reader.reportLatestOffset() == {"segment": 2, "entry": 0}
    assert reader.latestOffset({"segment": 1, "entry": 0}, limit) == {"segment": 1, "entry": 0}  # 5 < 15
    reader.last_trigger_ms -= 3_600_000  # the hour has passed since the last trigger
    assert reader.latestOffset({"segment": 1, "entry": 0}, limit) == {"segment": 2, "entry": 0}


def test_available_now_ignores_the_minimum_and_stops_at_its_target():
    log = _log((10, 100, 1))
    reader = _stream(log, minEntriesPerTrigger="1000", maxEntriesPerTrigger="4")
    reader.last_trigger_ms = 10 ** 15  # as if a batch had just been let through
    reader.prepareForTriggerAvailableNow()
    log.segments.append(LogSegment(LedgerId(0, 200), 5, 50, "w", 1, 2))  # after the start: not read
    limit = reader.getDefaultReadLimit()
    assert reader.latestOffset({"segment": 0, "entry": 0}, limit) == {"segment": 0, "entry": 4}
    assert reader.latestOffset({"segment": 0, "entry": 8}, limit) == {"segment": 1, "entry": 0}
    assert reader.latestOffset({"segment": 1, "entry": 0}, limit) == {"segment": 1, "entry": 0}  # done: it ends
    assert reader.reportLatestOffset() == {"segment": 2, "entry": 0}  # the lag shows what came after


def test_without_a_start_a_log_stream_judges_where_it_is_known_to_be():
    """PySpark before 4.2 calls latestOffset() alone: the offset last planned or committed stands for its start."""
    log = _log((10, 100, 1), (10, 100, 2), first=5)
    log.truncated = [TruncatedSegment(3, LedgerId(0, 7), True), TruncatedSegment(4, LedgerId(0, 8), True)]
    reader = _stream(log)
    assert reader.latestOffset() == {"segment": 7, "entry": 0}  # nothing known yet: the end
    reader.commit({"segment": 3, "entry": 2})
    with pytest.raises(LogDataLossException, match=r"segments 3..4 \(ledgers 7, 8\) were truncated away"):
        reader.latestOffset()
    lossy = _stream(log, failOnDataLoss="false")
    lossy.commit({"segment": 3, "entry": 2})
    assert lossy.latestOffset() == {"segment": 7, "entry": 0}


def test_without_a_start_a_ledger_stream_never_goes_back_and_names_what_a_deletion_lost():
    from types import SimpleNamespace

    from bookie.exceptions import BKNoSuchLedgerExistsException
    from spark_bookkeeper.ledger_stream_reader import LedgerStreamReader
    reader = LedgerStreamReader(_parse(ledgers="12,13"), None)
    ends = {"12": 30, "13": 10}
    reader._ends = lambda positions=None: (dict(ends), {})
    assert reader.initialOffset() == {"ledgers": {"12": 0, "13": 0}}
    assert reader.latestOffset() == {"ledgers": {"12": 30, "13": 10}}
    reader.commit({"ledgers": {"12": 30, "13": 10}})
    ends["13"] = 8  # a bookie slow to answer: a LAC lower than one seen before
    assert reader.latestOffset() == {"ledgers": {"12": 30, "13": 10}}  # not back: entries 8, 9 are not read twice
    del reader._ends

    def deleted(lid, **_):
        raise BKNoSuchLedgerExistsException(f"ledger {lid} does not exist")
    reader._bk = lambda: SimpleNamespace(open_ledger=deleted)
    with pytest.raises(BKNoSuchLedgerExistsException,
                       match="ledger 12 was deleted while this stream tailed it; entries from 30 on were not read"):
        reader.latestOffset()


# -- ledger streams: a bytes budget shared ----------------------------------------------------------
def test_a_bytes_budget_is_shared_among_ledgers_one_entry_at_least():
    assert share({"12": 100, "13": 100}, None, 1000, {"12": 10.0, "13": 10.0}) == {"12": 50, "13": 50}
    assert share({"12": 100, "13": 100}, 40, 1000, {"12": 10.0, "13": 10.0}) == {"12": 20, "13": 20}
    assert share({"12": 100, "13": 3}, None, 1000, {"12": 10.0, "13": 10.0}) == {"12": 97, "13": 3}
    assert share({"12": 100, "13": 100}, None, 1000, {"12": 100.0, "13": 10.0}) == {"12": 5, "13": 50}
    assert share({"12": 5, "13": 5}, None, 1, {"12": 64.0, "13": 64.0}) == {"12": 1, "13": 0}
    taken = share({str(i): 50 for i in range(7)}, None, 3000, {str(i): 7.0 * (i + 1) for i in range(7)})
    assert sum(n * 7.0 * (int(k) + 1) for k, n in taken.items()) <= 3000 and all(taken.values())


# -- lag ----------------------------------------------------------------------------------------------
def test_stream_lag_of_ledgers_from_offsets_alone():
    progress = {"endOffset": '{"ledgers": {"12": 100, "13": 40}}', "latestOffset": {"ledgers": {"12": 250, "13": 40,
                                                                                                "14": 7}}}
    assert stream_lag(progress) == 150 + 0 + 7
    assert stream_lag({"endOffset": '{"ledgers": {"12": 1}}', "latestOffset": "null"}) is None  # PySpark < 4.2
    # PySpark < 4.2 reports str() of the offsets it parsed, and no latestOffset for a Python source
    assert stream_lag({"endOffset": "{'ledgers': {'12': 1}}", "latestOffset": "None"}) is None
    assert progress_offset("{'segment': 2, 'entry': 0}") == progress_offset('{"segment": 2, "entry": 0}') == {
        "segment": 2, "entry": 0}
    assert stream_lag({"endOffset": None, "latestOffset": '{"ledgers": {"12": 1}}'}) is None
    with pytest.raises(ValueError, match="pass uri= and log="):
        stream_lag({"endOffset": '{"segment": 1, "entry": 0}', "latestOffset": '{"segment": 3, "entry": 0}'})


def test_a_ledger_stream_holds_back_shares_bytes_and_reports_its_ends():
    from types import SimpleNamespace

    from spark_bookkeeper.ledger_stream_reader import LedgerStreamReader
    reader = LedgerStreamReader(_parse(ledgers="12,13", minEntriesPerTrigger="50", maxTriggerDelay="1h",
                                       maxBytesPerTrigger="200"), None)
    ends = {"12": 30, "13": 10}
    closed = SimpleNamespace(is_closed=True, last_entry_id=29, length=300)  # 10 bytes an entry
    open_ = SimpleNamespace(is_closed=False, last_entry_id=-1, length=0)  # counts as the closed one's 10
    reader._ends = lambda positions=None: (dict(ends), {"12": closed, "13": open_})
    start, limit = {"ledgers": {"12": 0, "13": 0}}, reader.getDefaultReadLimit()
    assert reader.latestOffset() == {"ledgers": {"12": 30, "13": 10}}  # PySpark < 4.2: the ends, no limits
    assert reader.latestOffset(start, limit) == {"ledgers": {"12": 10, "13": 10}}  # first trigger; 200 bytes shared
    assert reader.latestOffset(start, limit) is start  # 40 < 50 new entries: held back
    ends["13"] = 20
    assert reader.latestOffset(start, limit) == {"ledgers": {"12": 10, "13": 10}}
    assert reader.reportLatestOffset() == {"ledgers": {"12": 30, "13": 20}}
    reader.prepareForTriggerAvailableNow()  # the target: the ends now; the minimum no longer applies
    ends["12"] = 1000
    assert reader.latestOffset({"ledgers": {"12": 25, "13": 20}}, limit) == {"ledgers": {"12": 30, "13": 20}}
    assert reader.reportLatestOffset() == {"ledgers": {"12": 1000, "13": 20}}
