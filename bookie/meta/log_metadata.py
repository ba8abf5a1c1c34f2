"""A log's metadata record: a named, ordered list of ledgers (segments) in one znode, changed only by
compare-and-set (the Spark connector writes logs; ``bk shell truncatelog`` truncates them).

``<ledgers root>/logs/<name>`` holds JSON::

    {"first_segment": 3,
     "ledgers": [{"ledger": 12, "scope": 0, "entries": 100, "bytes": 102400,
                  "writer": "9f1c...", "batch": 3, "committed_ms": 1700000000000}, ...],
     "commits": {"<writer id>": <last committed batch id>},
     "recent": ["<commit attempt id>", ...],
     "swept": [[<scope>, <ledger>], ...],
     "truncated": [{"segment": 2, "scope": 0, "ledger": 11, "deleted": true}, ...]}

Segment numbers are absolute, as Kafka's offsets are: ``ledgers[i]`` is segment ``first_segment + i``,
and truncation raises ``first_segment`` (Kafka's log start offset) instead of renumbering what stays,
so a stream's offset ``{"segment": s, "entry": e}`` and the ``segment`` column keep their meaning. A
record without ``first_segment`` (written before truncation existed) starts at 0, and a segment
without ``committed_ms`` has no commit time (age-based truncation, and reads placed by time
(``startingTimestamp``, spark_bookkeeper/log_offsets.py), then ask its ledger's ctime). Only records
written before commit times existed lack it: every commit stamps its segments.

``truncated`` lists dropped segments: those whose ledger is not yet known deleted (a deletion that
failed is retried by the next truncation or retention-at-commit) and the last ``TRUNCATED_KEPT``
deleted ones, so a stream that lost data can name the ledgers. The other fields belong to the
connector's commit protocol (``spark_bookkeeper.log``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from bookie.exceptions import BKException, BKZKConnectionLossException
from bookie.ledger_id import LedgerId
from bookie.meta.metadata_store import MetadataStore, Versioned
from bookie.meta.metadata_update_loop import update_metadata
from bookie.meta.retry import retry_on_connection_loss

LOGS_NODE = "logs"
COMMIT_RESOLVE_SECONDS = 60.0  # how long an update in doubt keeps trying to read the log back
TRUNCATED_KEPT = 1000  # deleted segments remembered for data-loss messages (~60 bytes each)


class LogNotFoundException(BKException, LookupError):
    pass


class LogUnavailableException(BKException, RuntimeError):
    """ZooKeeper did not answer a read of the log in time ("could not read", not "no such log")."""


@dataclass
class LogSegment:
    ledger: LedgerId
    entries: int
    bytes: int
    writer: str
    batch: int
    committed_ms: int | None = None  # when its batch's commit was applied; None in records older than retention

    def to_json(self) -> dict:
        d = {"ledger": self.ledger.ledger_id, "scope": self.ledger.scope_id, "entries": self.entries,
             "bytes": self.bytes, "writer": self.writer, "batch": self.batch}
        if self.committed_ms is not None:
            d["committed_ms"] = self.committed_ms
        return d

    @classmethod
    def from_json(cls, d: dict) -> "LogSegment":
        return cls(LedgerId(d.get("scope", 0), d["ledger"]), d["entries"], d["bytes"], d["writer"], d["batch"],
                   d.get("committed_ms"))


@dataclass
class TruncatedSegment:
    segment: int  # absolute segment number it had
    ledger: LedgerId
    deleted: bool = False

    def to_json(self) -> dict:
        return {"segment": self.segment, "scope": self.ledger.scope_id, "ledger": self.ledger.ledger_id,
                "deleted": self.deleted}

    @classmethod
    def from_json(cls, d: dict) -> "TruncatedSegment":
        return cls(d["segment"], LedgerId(d.get("scope", 0), d["ledger"]), d.get("deleted", False))


@dataclass
class Log:
    name: str
    segments: list[LogSegment] = field(default_factory=list)
    commits: dict[str, int] = field(default_factory=dict)
    recent: list[str] = field(default_factory=list)
    swept: list[LedgerId] = field(default_factory=list)
    first_segment: int = 0
    truncated: list[TruncatedSegment] = field(default_factory=list)
    version: int = -1  # znode version; -1 = not created yet

    def encode(self) -> bytes:
        return json.dumps({"ledgers": [s.to_json() for s in self.segments], "commits": self.commits,
                           "recent": self.recent, "swept": [list(lid) for lid in self.swept],
                           "first_segment": self.first_segment,
                           "truncated": [t.to_json() for t in self.truncated]}, sort_keys=True).encode()

    @classmethod
    def decode(cls, name: str, data: bytes, version: int) -> "Log":
        d = json.loads(data)
        return cls(name, [LogSegment.from_json(s) for s in d["ledgers"]], d.get("commits", {}), d.get("recent", []),
                   [LedgerId(*lid) for lid in d.get("swept", [])], d.get("first_segment", 0),
                   [TruncatedSegment.from_json(t) for t in d.get("truncated", [])], version)

    def ledgers(self) -> set[LedgerId]:
        return {s.ledger for s in self.segments}

    @property
    def end_segment(self) -> int:
        """The number the next committed segment gets."""
        return self.first_segment + len(self.segments)

    def segment(self, number: int) -> LogSegment:
        """Segment by absolute number (IndexError when truncated away or not written yet)."""
        if not self.first_segment <= number < self.end_segment:
            raise IndexError(f"segment {number} is not in log {self.name!r} (segments {self.first_segment}.."
                             f"{self.end_segment - 1})")
        return self.segments[number - self.first_segment]

    def numbered(self) -> list[tuple[int, LogSegment]]:
        return list(enumerate(self.segments, self.first_segment))

    def pending_deletion(self) -> list[LedgerId]:
        """Ledgers of truncated segments not yet known deleted."""
        return [t.ledger for t in self.truncated if not t.deleted]

    def drop_first(self, count: int) -> list[tuple[int, LogSegment]]:
        """Remove the first ``count`` segments, record them as truncated (deletion pending); returns them."""
        dropped = self.numbered()[:count]
        self.segments = self.segments[count:]
        self.first_segment += len(dropped)
        self.truncated = self.truncated + [TruncatedSegment(n, s.ledger) for n, s in dropped]
        return dropped

    def mark_deleted(self, ledgers: set[LedgerId]) -> None:
        """Record ``ledgers`` (of truncated segments) as deleted, keeping the last TRUNCATED_KEPT of those."""
        for t in self.truncated:
            if t.ledger in ledgers:
                t.deleted = True
        deleted = [t.segment for t in self.truncated if t.deleted]
        oldest_kept = deleted[-TRUNCATED_KEPT] if len(deleted) > TRUNCATED_KEPT else -1  # numbers are unique
        self.truncated = [t for t in self.truncated if not t.deleted or t.segment >= oldest_kept]

    def lost(self, first: int, last: int) -> list[TruncatedSegment]:
        """What is recorded of truncated segments ``first``..``last``."""
        return [t for t in self.truncated if first <= t.segment <= last]

    def describe_loss(self, segment: int, entry: int) -> str:
        """What a reader positioned at ``entry`` of ``segment`` (below ``first_segment``) lost."""
        last = self.first_segment - 1
        recorded = self.lost(segment, last)
        ledgers = ", ".join(str(t.ledger) for t in recorded) or "none recorded"
        if 0 < len(recorded) < last - segment + 1:
            ledgers += f" ({last - segment + 1 - len(recorded)} older ones no longer recorded)"
        at = f" from entry {entry}" if entry else ""
        return (f"log {self.name!r}: segments {segment}..{last} (ledgers {ledgers}) were truncated away before they "
                f"were read{at}; the log now starts at segment {self.first_segment}")

    def empty(self) -> bool:
        """Nothing a user wrote: only a sweep's bookkeeping."""
        return not (self.segments or self.commits or self.recent or self.swept or self.truncated
                    or self.first_segment)


@dataclass(frozen=True)
class LogRetention:
    """Which first segments a truncation drops (Kafka's log start offset, ``retention.ms``; the count
    limit is Pulsar's ledger-count retention). Only a prefix is ever dropped; each limit given adds to it."""
    before_segment: int | None = None  # drop the segments numbered below this
    max_segments: int | None = None  # keep at most this many, the newest
    max_age_ms: int | None = None  # drop the segments committed more than this long before ``now_ms``
    now_ms: int | None = None
    keep_last: int = 0  # never drop the last this many (a batch retention is applied with)

    def drop_count(self, log: Log, time_of: Callable[[LogSegment], int | None] | None = None) -> int:
        """How many first segments of ``log`` to drop; ``time_of`` gives a segment's commit time (default
        ``committed_ms``); a segment whose time is unknown (None) is kept, and so is everything after it."""
        n = len(log.segments)
        count = 0
        if self.before_segment is not None:
            count = max(count, min(n, self.before_segment - log.first_segment))
        if self.max_segments is not None:
            count = max(count, n - self.max_segments)
        if self.max_age_ms is not None:
            if self.now_ms is None:
                raise ValueError("LogRetention with max_age_ms needs now_ms")
            cutoff = self.now_ms - self.max_age_ms
            time_of = time_of or (lambda s: s.committed_ms)
            old = 0
            for s in log.segments[:n - self.keep_last]:
                committed = time_of(s)
                if committed is None or committed >= cutoff:
                    break
                old += 1
            count = max(count, old)
        return max(0, min(count, n - self.keep_last))


def log_path(store: MetadataStore, name: str) -> str:
    """The log's znode, for messages."""
    return f"{store.root}/{log_node(name)}"


def log_node(name: str) -> str:
    return f"{LOGS_NODE}/{name}"


def read_log(store: MetadataStore, name: str, missing_ok: bool = False) -> Log:
    found = store.read_node(log_node(name))
    if found is None:
        if missing_ok:
            return Log(name)
        raise LogNotFoundException(f"log {name!r} does not exist at {log_path(store, name)}")
    return Log.decode(name, found.value, found.version)


def _read_versioned(store: MetadataStore, name: str) -> Versioned[Log]:
    log = read_log(store, name, missing_ok=True)
    return Versioned(log, log.version)


def read_log_retrying(store: MetadataStore, name: str, seconds: float | None = None) -> Log:
    """``read_log`` (missing = empty) through a lost connection; LogUnavailableException after ``seconds``."""
    try:
        return retry_on_connection_loss(lambda: read_log(store, name, missing_ok=True),
                                        COMMIT_RESOLVE_SECONDS if seconds is None else seconds)
    except BKZKConnectionLossException as exc:
        raise LogUnavailableException(f"log {name!r} could not be read from ZooKeeper ({exc})") from None


def list_logs(store: MetadataStore) -> list[str]:
    return store.node_children(LOGS_NODE)


def write_log(store: MetadataStore, log: Log, version: int) -> Versioned[Log]:
    """Compare-and-set ``log`` at ``version`` (create when it did not exist: version -1)."""
    written = store.write_node(log_node(log.name), log.encode(), None if version < 0 else version)
    log.version = written.version
    return Versioned(log, written.version)


def update_log(store: MetadataStore, name: str, needs_update: Callable[[Log], bool],
               transform: Callable[[Log], Log], write=write_log) -> Log:
    """One MetadataUpdateLoop over the log (bookie.meta.metadata_update_loop)."""
    log = read_log_retrying(store, name)
    return update_metadata(lambda: _read_versioned(store, name), lambda log, version: write(store, log, version),
                           Versioned(log, log.version), needs_update, transform, COMMIT_RESOLVE_SECONDS,
                           f"log {name!r}").value
