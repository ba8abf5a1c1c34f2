"""Options of ``format("bookkeeper")``: names, parsing, and one clear error for each bad input.

Spark hands options over lower-cased and as strings; they are matched case-insensitively to the
names users write (``metadataServiceUri``, ``maxEntriesPerPartition``, ...). Everything is checked on
the driver, before a task runs: at ``load()`` (``ReadOptions.parse``) the values, options that contradict
each other (named both), options that mean nothing for what is read (a log's positions for ledgers), and
options the running PySpark cannot honour (spark_versions.py: admission control needs 4.2, filter pushdown
4.1); then what a batch read refuses (``check_batch``: trigger options, Kafka's batch rules) and what a
stream refuses (``check_stream``: an end).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from bookie.exceptions import BKException
from bookie.ledger_id import LedgerId
from bookie.meta.log_metadata import LogRetention
from bookie.meta.service_uri import MetadataServiceUri
from bookie.proto.checksum import DigestType
from spark_bookkeeper import spark_versions

# Every option, with one line of meaning (docs/reference/spark_options.md is rendered from these).
READ_OPTIONS = {
    "metadataServiceUri": "the cluster, e.g. zk://zk1:2181;zk2:2181/ledgers (required)",
    "log": "read a log: its ledgers in order; adds the columns log and segment",
    "ledgers": "read these ledgers: ids or qualified names, comma separated",
    "scope": "read every ledger of this scope (0: the ledgers without a scope)",
    "password": "the ledgers' password (default empty)",
    "digest": "the digest type the ledgers must have (crc32, crc32c, mac, dummy): checked, not guessed",
    "startEntry": "the first entry id read of each ledger (default 0)",
    "endEntry": "the last entry id read of each ledger (default: its last readable entry)",
    "maxEntriesPerPartition": "entries of one fragment per partition at most: big fragments are split (default "
                              "100000)",
    "maxBytesPerPartition": "estimated bytes a partition packs of the slices one bookie serves (default "
                            "134217728, Spark's spark.sql.files.maxPartitionBytes); 1: a partition per slice",
    "openCostInBytes": "what one more slice costs a partition, in bytes (default 4096: ~11 us of the bookie's and "
                       "the task's work within the partition's one call)",
    "recover": "true: recover (fence, close) open ledgers first; default: read open ledgers up to their LAC "
               "without disturbing their writer",
    "table": "metadata instead of entries: ledgers, fragments, bookies, underreplicated; entrylogs, "
             "bookie_ledgers: what each bookie reports",
    "zkConnectTimeout": "seconds to wait for ZooKeeper (default 10)",
    "maxEntriesPerTrigger": "streaming: entries per micro-batch at most (also with Trigger.AvailableNow; PySpark 4.2+)",
    "minEntriesPerTrigger": "streaming: a micro-batch waits for this many new entries, at most maxTriggerDelay "
                            "(Kafka's minOffsetsPerTrigger; ignored by Trigger.AvailableNow; PySpark 4.2+)",
    "maxTriggerDelay": "streaming, with minEntriesPerTrigger: the longest a micro-batch waits, a Spark time string "
                       "(30s, 15m, 1h; a bare number is milliseconds; default 15m; PySpark 4.2+)",
    "maxBytesPerTrigger": "streaming: estimated payload bytes per micro-batch at most, never less than one entry "
                          "(also with Trigger.AvailableNow; PySpark 4.2+)",
    "filterPushdown": "true: filters on ledger_id (=, IN) and entry_id (comparisons) narrow what is read; needs "
                      "spark.sql.python.filterPushdown.enabled=true (PySpark 4.1+)",
    "startingOffsets": "a log: where a stream without checkpoint or a batch read starts: earliest (default), latest "
                       "(streams only) or {\"segment\": s, \"entry\": e} (Kafka's meaning)",
    "endingOffsets": "a batch read of a log: where it ends, exclusive: latest (default) or {\"segment\": s, "
                     "\"entry\": e}, as a stream's offsets",
    "startingTimestamp": "a log: start at the first segment committed at or after this time (ms since the epoch); "
                         "streams and batch reads",
    "endingTimestamp": "a batch read of a log: end before the first segment committed at or after this time (ms since "
                       "the epoch; none: the log's end)",
    "startingOffsetsByTimestampStrategy": "no segment committed at or after startingTimestamp: error (default) fails, "
                                          "naming the newest commit; latest starts at the log's end",
    "failOnDataLoss": "a log: fail (true, default) or go on from the first segment left when the segments to read "
                      "were truncated away (streams and batch reads)",
    "ledgersPerPartition": "table=ledgers / fragments: ledgers whose metadata one task reads (default 5000)",
    "bookieTimeout": "table=entrylogs / bookie_ledgers: seconds each bookie's answer is waited for at least, more "
                     "the more entries or ledgers a request covers (default 30)",
}
WRITE_OPTIONS = {
    "metadataServiceUri": "the cluster (required)",
    "log": "the log the rows are appended to (created if absent); path is the same",
    "ensembleSize": "bookies per ledger (default 3)",
    "writeQuorum": "copies of each entry (default 2)",
    "ackQuorum": "acknowledgements an entry waits for (default 2)",
    "digest": "digest type of the new ledgers: crc32c (default), crc32, mac, dummy",
    "password": "password of the new ledgers (default empty)",
    "zkConnectTimeout": "seconds to wait for ZooKeeper (default 10)",
    "writerId": "a stable writer id: a replayed batch of the same writer is committed once",
    "batchId": "with writerId (foreachBatch): the batch's id",
    "checkpointLocation": "a stream's checkpoint: its writer id is derived from it",
    "path": "the log, as save(path) gives it",
    "retentionSegments": "at each commit, truncate the log to its newest this many segments",
    "retentionMs": "at each commit, truncate away the segments committed more than this many milliseconds ago",
}
TABLES = ("ledgers", "fragments", "bookies", "underreplicated", "entrylogs", "bookie_ledgers")
EARLIEST, LATEST = "earliest", "latest"  # startingOffsets, as Kafka's source names them
Position = tuple[int, int]  # (segment, entry) in a log: a stream's offset {"segment": s, "entry": e}
# Options that place a read in a log (refused for ledgers and scopes); the ending ones are for batch reads only.
LOG_POSITION_OPTIONS = ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
                        "startingOffsetsByTimestampStrategy", "failOnDataLoss")
BATCH_ONLY_OPTIONS = ("endingOffsets", "endingTimestamp")
# Admission control of micro-batches: streaming only, and Spark hands a Python source read limits from 4.2 on.
TRIGGER_OPTIONS = ("maxEntriesPerTrigger", "minEntriesPerTrigger", "maxTriggerDelay", "maxBytesPerTrigger")
TIMESTAMP_STRATEGIES = ("error", "latest")  # Kafka's startingOffsetsByTimestampStrategy
DEFAULT_MAX_TRIGGER_DELAY = "15m"  # Kafka's maxTriggerDelay default
# Spark's time strings (JavaUtils.timeStringAsMs, which Kafka's maxTriggerDelay is parsed with): a bare number is ms.
TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
# Packing slices into partitions (partition_packing.py): Spark's spark.sql.files.maxPartitionBytes, and
# what one more slice costs a task in bytes the reader could have read meanwhile (~330 MB/s of 1 KiB
# entries). A partition asks its bookie for all its slices in one call (packed_read.py): ~11 us a 1-entry
# slice, the bookie's work and the task's (10,000 in one call: ~86 ms of the bookie's CPU, ~28 ms of the
# task's), ~4 KB, hence 4 KiB; read alone, a slice costs ~1.3 ms (its own call). Spark's 4 MiB is for
# opening a file.
MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
OPEN_COST_IN_BYTES = 4 * 1024
# table=ledgers / fragments: ledgers whose metadata one task reads (pipelined): enough to amortize a task's
# start, few enough that many ledgers spread over every core (and no task holds many rows).
LEDGERS_PER_PARTITION = 5000
# table=entrylogs / bookie_ledgers: the least a bookie's answer is waited for (bookie_tables.py scales it up with
# the work): a bookie listing a large ledger is slow, not gone.
BOOKIE_TIMEOUT = 30.0


class BookKeeperOptionException(BKException, ValueError):
    """A bad option of format("bookkeeper"): says which, and what is allowed."""


def _canonical(options, allowed: list[str], what: str) -> dict[str, str]:
    by_lower = {name.lower(): name for name in allowed}
    out = {}
    for key, value in dict(options).items():
        name = by_lower.get(key.lower())
        if name is None:
            raise BookKeeperOptionException(f"unknown {what} option {key!r}; allowed: {', '.join(allowed)}")
        out[name] = value
    return out


def _int(opts: dict, name: str, default: int | None, minimum: int | None = None) -> int | None:
    if name not in opts:
        return default
    try:
        value = int(opts[name])
    except ValueError:
        raise BookKeeperOptionException(f"option {name}={opts[name]!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise BookKeeperOptionException(f"option {name}={value} must be at least {minimum}")
    return value


def _seconds(opts: dict, name: str, default: float) -> float:
    """A positive number of seconds."""
    if name not in opts:
        return default
    try:
        value = float(opts[name])
    except ValueError:
        raise BookKeeperOptionException(f"option {name}={opts[name]!r} is not a number of seconds") from None
    if not 0 < value < math.inf:  # not NaN either
        raise BookKeeperOptionException(f"option {name}={opts[name]} must be a finite number of seconds above 0")
    return value


def _bool(opts: dict, name: str, default: bool) -> bool:
    value = opts.get(name)
    if value is None:
        return default
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise BookKeeperOptionException(f"option {name}={value!r} must be true or false")


def _uri(opts: dict) -> str:
    uri = opts.get("metadataServiceUri")
    if not uri:
        raise BookKeeperOptionException("option metadataServiceUri is missing: where is the cluster? "
                                    "e.g. .option(\"metadataServiceUri\", \"zk://127.0.0.1:2181/ledgers\")")
    try:
        MetadataServiceUri.parse(uri)
    except ValueError as exc:
        raise BookKeeperOptionException(f"option metadataServiceUri: {exc}") from None
    return uri


def _digest(opts: dict) -> DigestType | None:
    if "digest" not in opts:
        return None
    try:
        return DigestType.parse(opts["digest"])
    except ValueError as exc:
        raise BookKeeperOptionException(f"option digest: {exc}") from None


def parse_ledgers(text: str) -> list[LedgerId]:
    """``"12,13"`` or qualified names (32 hex digits), comma separated."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(LedgerId.of(int(part)) if part.isdigit() else LedgerId.from_qualified_name(part))
        except ValueError as exc:
            raise BookKeeperOptionException(f"option ledgers: {part!r} is neither a ledger id nor a qualified name ({exc})") from None
    if not out:
        raise BookKeeperOptionException("option ledgers names no ledger")
    return out


def parse_offsets(text: str, name: str = "startingOffsets") -> str | Position:
    """``earliest``, ``latest`` or ``{"segment": s, "entry": e}`` (s absolute, as the ``segment`` column); which
    keyword a read may take is checked where it is known whether the read is a stream (check_batch)."""
    if text.strip().lower() in (EARLIEST, LATEST):
        return text.strip().lower()
    try:
        d = json.loads(text)
        segment, entry = int(d["segment"]), int(d.get("entry", 0))
    except (ValueError, TypeError, KeyError):
        raise BookKeeperOptionException(f"option {name}={text!r}; allowed: earliest, latest, or JSON "
                                        '{"segment": s, "entry": e}') from None
    if segment < 0 or entry < 0:
        raise BookKeeperOptionException(f"option {name}={text!r}: segment and entry must not be negative")
    return segment, entry


def parse_starting_offsets(text: str) -> str | Position:
    return parse_offsets(text, "startingOffsets")


def parse_time_ms(text: str, name: str) -> int:
    """A Spark time string (``30s``, ``15m``, ``2h``, ``500ms``, ``1d``; a bare number is milliseconds), as Kafka
    parses ``maxTriggerDelay`` (JavaUtils.timeStringAsMs: no space before the unit)."""
    found = re.fullmatch(r"(\d+)([a-z]+)?", text.strip().lower())
    if not found or (found.group(2) or "ms") not in TIME_UNITS_MS:
        raise BookKeeperOptionException(f"option {name}={text!r} is not a duration; allowed: a number with us, ms, s, "
                                        "m, min, h or d (e.g. 30s, 15m), or a bare number of milliseconds")
    return int(int(found.group(1)) * TIME_UNITS_MS[found.group(2) or "ms"])


def _timestamp(opts: dict, name: str) -> int | None:
    if name not in opts:
        return None
    try:
        value = int(str(opts[name]).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise BookKeeperOptionException(f"option {name}={opts[name]!r} is not a time: milliseconds since the epoch, "
                                        "e.g. 1700000000000")
    return value


def _check_combinations(opts: dict) -> None:
    """Options that would contradict each other, or that mean nothing here: refused, naming both."""
    for name in LOG_POSITION_OPTIONS:
        if name in opts and "log" not in opts:
            raise BookKeeperOptionException(
                f"option {name} applies to a stream of a log or a batch read of one (option log); a read of "
                "ledgers or a scope reads each ledger from startEntry to endEntry")
    for by_time, by_offset, where in (("startingTimestamp", "startingOffsets", "starts"),
                                      ("endingTimestamp", "endingOffsets", "ends")):
        if by_time in opts and by_offset in opts:
            raise BookKeeperOptionException(f"options {by_time} and {by_offset} both say where the read {where}; "
                                            "set one of them")
    for bound in ("startEntry", "endEntry"):
        for name in ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp"):
            if bound in opts and name in opts:
                raise BookKeeperOptionException(
                    f"options {bound} and {name} cannot be combined: {name} places the read in the log (a segment "
                    f"and an entry), {bound} bounds every ledger alike. Give the position as startingOffsets/"
                    'endingOffsets {"segment": s, "entry": e}')
    if "startingOffsetsByTimestampStrategy" in opts and "startingTimestamp" not in opts:
        raise BookKeeperOptionException("option startingOffsetsByTimestampStrategy applies with startingTimestamp: "
                                        "set startingTimestamp, or leave the strategy unset")
    if "maxTriggerDelay" in opts and "minEntriesPerTrigger" not in opts:
        raise BookKeeperOptionException("option maxTriggerDelay applies with minEntriesPerTrigger (how long a "
                                        "micro-batch may wait for that many entries): set both, or neither")


def _check_pyspark(opts: dict) -> None:
    """Options the running PySpark cannot honour are refused at load(), naming the PySpark they need."""
    why = [spark_versions.needs(spark_versions.ADMISSION_CONTROL, f"option {name}")
           for name in TRIGGER_OPTIONS if name in opts]
    if _bool(opts, "filterPushdown", False):
        why.append(spark_versions.needs(spark_versions.FILTER_PUSHDOWN, "option filterPushdown"))
    why = [w for w in why if w]
    if why:
        raise BookKeeperOptionException(why[0])


@dataclass
class ReadOptions:
    uri: str
    log: str | None = None
    ledgers: list[LedgerId] | None = None
    scope: int | None = None
    password: bytes = b""
    digest: DigestType | None = None
    start_entry: int = 0
    end_entry: int | None = None
    max_entries_per_partition: int = 100_000
    max_bytes_per_partition: int = MAX_BYTES_PER_PARTITION
    open_cost_in_bytes: int = OPEN_COST_IN_BYTES
    recover: bool = False
    table: str | None = None
    zk_connect_timeout: float = 10.0
    max_entries_per_trigger: int | None = None
    min_entries_per_trigger: int | None = None  # a micro-batch waits for this many new entries ...
    max_trigger_delay_ms: int = 15 * 60 * 1000  # ... at most this long since the last one (Kafka's maxTriggerDelay)
    max_bytes_per_trigger: int | None = None  # estimated payload bytes per micro-batch at most (one entry at least)
    filter_pushdown: bool = False
    ledger_filter: set[int] | None = None  # set by pushed-down filters on ledger_id
    starting_offsets: str | Position = EARLIEST  # a log: where a stream without checkpoint, or a batch read, starts
    ending_offsets: str | Position = LATEST  # a batch read of a log: where it ends (exclusive)
    starting_timestamp: int | None = None  # a log: start at the first segment committed at/after this (ms)
    ending_timestamp: int | None = None  # a batch read of a log: end before the first committed at/after this
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: no segment at/after startingTimestamp
    fail_on_data_loss: bool = True  # a log: fail when the segments to read were truncated away
    given: frozenset[str] = field(default_factory=frozenset)  # the options the user set (canonical names)
    ledgers_per_partition: int = LEDGERS_PER_PARTITION  # table=ledgers / fragments: ledgers per task
    bookie_timeout: float = BOOKIE_TIMEOUT  # table=entrylogs / bookie_ledgers: seconds, at least, per request

    @classmethod
    def parse(cls, options) -> "ReadOptions":
        opts = _canonical(options, READ_OPTIONS, "read")
        table = opts.get("table")
        if table is not None and table not in TABLES:
            raise BookKeeperOptionException(f"option table={table!r}; allowed: {', '.join(TABLES)}")
        chosen = [n for n in ("log", "ledgers", "scope") if n in opts]
        if table is None and len(chosen) != 1:
            raise BookKeeperOptionException("say what to read with exactly one of the options log, ledgers or scope"
                                        + (f" (got {', '.join(chosen)})" if chosen else ""))
        _check_combinations(opts)
        _check_pyspark(opts)
        start = _int(opts, "startEntry", 0, 0)
        end = _int(opts, "endEntry", None, 0)
        if end is not None and end < start:
            raise BookKeeperOptionException(f"option endEntry={end} is before startEntry={start}")
        starting, ending = parse_offsets(opts.get("startingOffsets", EARLIEST)), parse_offsets(
            opts.get("endingOffsets", LATEST), "endingOffsets")
        if isinstance(starting, tuple) and isinstance(ending, tuple) and starting > ending:
            raise BookKeeperOptionException(f"option startingOffsets={opts['startingOffsets']} is after endingOffsets="
                                            f"{opts['endingOffsets']}")
        since, until = _timestamp(opts, "startingTimestamp"), _timestamp(opts, "endingTimestamp")
        if since is not None and until is not None and since > until:
            raise BookKeeperOptionException(f"option startingTimestamp={since} is after endingTimestamp={until}")
        strategy = str(opts.get("startingOffsetsByTimestampStrategy", "error")).strip().lower()
        if strategy not in TIMESTAMP_STRATEGIES:
            raise BookKeeperOptionException(f"option startingOffsetsByTimestampStrategy={strategy!r}; allowed: "
                                            f"{', '.join(TIMESTAMP_STRATEGIES)}")
        return cls(uri=_uri(opts), log=opts.get("log"),
                   ledgers=parse_ledgers(opts["ledgers"]) if "ledgers" in opts else None,
                   scope=_int(opts, "scope", None, 0), password=opts.get("password", "").encode(),
                   digest=_digest(opts), start_entry=start, end_entry=end,
                   max_entries_per_partition=_int(opts, "maxEntriesPerPartition", 100_000, 1),
                   max_bytes_per_partition=_int(opts, "maxBytesPerPartition", MAX_BYTES_PER_PARTITION, 1),
                   open_cost_in_bytes=_int(opts, "openCostInBytes", OPEN_COST_IN_BYTES, 0),
                   recover=_bool(opts, "recover", False), table=table,
                   zk_connect_timeout=float(opts.get("zkConnectTimeout", 10.0)),
                   max_entries_per_trigger=_int(opts, "maxEntriesPerTrigger", None, 1),
                   min_entries_per_trigger=_int(opts, "minEntriesPerTrigger", None, 1),
                   max_trigger_delay_ms=parse_time_ms(opts.get("maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY),
                                                      "maxTriggerDelay"),
                   max_bytes_per_trigger=_int(opts, "maxBytesPerTrigger", None, 1),
                   filter_pushdown=_bool(opts, "filterPushdown", False),
                   starting_offsets=starting, ending_offsets=ending, starting_timestamp=since,
                   ending_timestamp=until, timestamp_strategy=strategy,
                   fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
                   ledgers_per_partition=_int(opts, "ledgersPerPartition", LEDGERS_PER_PARTITION, 1),
                   bookie_timeout=_seconds(opts, "bookieTimeout", BOOKIE_TIMEOUT), given=frozenset(opts))


def check_batch(opts: ReadOptions) -> None:
    """What a batch read (spark.read) refuses: the streaming options, and Kafka's batch rules (a batch read does
    not start at latest nor end at earliest)."""
    for name in TRIGGER_OPTIONS:
        if name in opts.given:
            raise BookKeeperOptionException(f"option {name} applies to streaming reads (spark.readStream); a batch "
                                            "read takes its whole range at once")
    if opts.starting_offsets == LATEST:
        raise BookKeeperOptionException("option startingOffsets applies to streaming reads when it is latest (a batch "
                                        'read from there reads nothing); a batch read starts at earliest or '
                                        '{"segment": s, "entry": e}')
    if opts.ending_offsets == EARLIEST:
        raise BookKeeperOptionException("option endingOffsets=earliest is not allowed (it would read nothing); a batch "
                                        'read ends at latest (default) or {"segment": s, "entry": e}')


def check_stream(opts: ReadOptions) -> None:
    """What a streaming read refuses: an end (a stream has none)."""
    for name in BATCH_ONLY_OPTIONS:
        if name in opts.given:
            raise BookKeeperOptionException(f"option {name} applies to batch reads (spark.read): a stream has no end; "
                                            "Trigger.AvailableNow stops at what the log held when the query started")


@dataclass
class WriteOptions:
    uri: str
    log: str
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    digest: DigestType = DigestType.CRC32C
    password: bytes = b""
    zk_connect_timeout: float = 10.0
    writer_id: str | None = None
    batch_id: int | None = None
    checkpoint: str | None = None
    retention_segments: int | None = None  # keep at most this many segments (applied at each commit)
    retention_ms: int | None = None  # drop segments committed more than this long ago (at each commit)

    def retention(self) -> LogRetention | None:
        if self.retention_segments is None and self.retention_ms is None:
            return None
        return LogRetention(max_segments=self.retention_segments, max_age_ms=self.retention_ms)

    @classmethod
    def parse(cls, options) -> "WriteOptions":
        opts = _canonical(options, WRITE_OPTIONS, "write")
        log = opts.get("log") or opts.get("path")
        if not log:
            raise BookKeeperOptionException("option log is missing: name the log to write to, e.g. .option(\"log\", \"events\")")
        check_log_name(log)
        e = _int(opts, "ensembleSize", 3, 1)
        w = _int(opts, "writeQuorum", min(2, e), 1)
        a = _int(opts, "ackQuorum", min(2, w), 1)
        if not 0 < a <= w <= e:
            raise BookKeeperOptionException(f"quorums must satisfy 0 < ackQuorum <= writeQuorum <= ensembleSize; got "
                                        f"ensembleSize={e}, writeQuorum={w}, ackQuorum={a}")
        return cls(uri=_uri(opts), log=log, ensemble_size=e, write_quorum=w, ack_quorum=a,
                   digest=_digest(opts) or DigestType.CRC32C, password=opts.get("password", "").encode(),
                   zk_connect_timeout=float(opts.get("zkConnectTimeout", 10.0)), writer_id=opts.get("writerId"),
                   batch_id=_int(opts, "batchId", None, 0), checkpoint=opts.get("checkpointLocation"),
                   retention_segments=_int(opts, "retentionSegments", None, 1),
                   retention_ms=_int(opts, "retentionMs", None, 1))


def check_log_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or len(name) > 200:
        raise BookKeeperOptionException(f"log name {name!r} is not allowed: 1-200 characters, no '/'")
