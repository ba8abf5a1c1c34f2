"""Logs: a named, ordered list of ledgers kept in ZooKeeper, changed only by compare-and-set.

``<ledgers root>/logs/<name>`` holds JSON::

    {"ledgers": [{"ledger": 12, "scope": 0, "entries": 100, "bytes": 102400,
                  "writer": "9f1c...", "batch": 3}, ...],
     "commits": {"<writer id>": <last committed batch id>}}

A batch's ledgers are appended in ONE znode ``setData`` with the expected version, together with
the writer's batch id, so a replayed batch (same writer, batch id not above the last committed) adds
nothing, and concurrent writers never lose each other's ledgers (the loser re-reads and retries).
An overwrite swaps the whole list in the same way. The ledger ``segment`` of a read is its position
in ``ledgers``. One znode holds about 8,000 ledgers (ZooKeeper's 1 MB node limit).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from bookie.ledger_id import LedgerId
from bookie.meta.zk_metadata_store import ZKMetadataStore

LOGS_NODE = "logs"


class LogNotFoundError(LookupError):
    pass


@dataclass
class LogSegment:
    ledger: LedgerId
    entries: int
    bytes: int
    writer: str
    batch: int

    def to_json(self) -> dict:
        return {"ledger": self.ledger.ledger_id, "scope": self.ledger.scope_id, "entries": self.entries,
                "bytes": self.bytes, "writer": self.writer, "batch": self.batch}

    @classmethod
    def from_json(cls, d: dict) -> "LogSegment":
        return cls(LedgerId(d.get("scope", 0), d["ledger"]), d["entries"], d["bytes"], d["writer"], d["batch"])


@dataclass
class Log:
    name: str
    segments: list[LogSegment] = field(default_factory=list)
    commits: dict[str, int] = field(default_factory=dict)
    version: int = -1  # znode version; -1 = not created yet

    def encode(self) -> bytes:
        return json.dumps({"ledgers": [s.to_json() for s in self.segments], "commits": self.commits},
                          sort_keys=True).encode()


def log_path(store: ZKMetadataStore, name: str) -> str:
    return f"{store.root}/{LOGS_NODE}/{name}"


def read_log(store: ZKMetadataStore, name: str, missing_ok: bool = False) -> Log:
    try:
        data, stat = store.zk.get(log_path(store, name))
    except NoNodeError:
        if missing_ok:
            return Log(name)
        raise LogNotFoundError(f"log {name!r} does not exist at {log_path(store, name)}") from None
    d = json.loads(data)
    return Log(name, [LogSegment.from_json(s) for s in d["ledgers"]], d.get("commits", {}), stat.version)


def list_logs(store: ZKMetadataStore) -> list[str]:
    try:
        return sorted(store.zk.get_children(f"{store.root}/{LOGS_NODE}"))
    except NoNodeError:
        return []


def commit_batch(store: ZKMetadataStore, name: str, writer: str, batch: int, segments: list[LogSegment],
                 overwrite: bool = False) -> tuple[bool, list[LogSegment]]:
    """Add (or with ``overwrite`` put in place of all) ``segments`` as ``writer``'s batch ``batch``.

    Returns (applied, replaced segments). Not applied when that batch was committed before.
    """
    while True:
        log = read_log(store, name, missing_ok=True)
        if log.commits.get(writer, -1) >= batch:
            return False, []
        replaced = log.segments if overwrite else []
        log.segments = list(segments) if overwrite else log.segments + list(segments)
        log.commits[writer] = batch
        path = log_path(store, name)
        try:
            if log.version < 0:
                store.zk.create(path, log.encode(), makepath=True)
            else:
                store.zk.set(path, log.encode(), version=log.version)
            return True, replaced
        except (BadVersionError, NodeExistsError):
            continue  # another writer got there first: re-read and try again
