"""Metadata tables: ``.option("table", "ledgers" | "fragments" | "bookies" | "underreplicated")``, one row
per ledger / fragment / bookie / under-replicated ledger, computed on the driver from ZooKeeper (and
GetBookieInfo for bookies; LedgerUnderreplicationManager's znodes for under-replicated ledgers)."""
from __future__ import annotations

import datetime as dt

from pyspark.sql.datasource import DataSourceReader, InputPartition

from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from spark_bookkeeper import connections
from spark_bookkeeper.options import ReadOptions

SCHEMAS = {
    "ledgers": ("scope_id long, ledger_id long, state string, ensemble_size int, write_quorum int, ack_quorum int, "
                "last_entry_id long, length long, digest string, ctime timestamp, fragments int, "
                "bookies array<string>, custom_metadata map<string,binary>"),
    "fragments": ("scope_id long, ledger_id long, fragment int, first_entry_id long, last_entry_id long, "
                  "ensemble array<string>, state string"),
    "bookies": "bookie_id string, state string, total_disk long, free_disk long",
    "underreplicated": ("scope_id long, ledger_id long, missing_replicas array<string>, state string, reason string, "
                        "marked_at timestamp, state_since timestamp, worker string"),
}
MARKED = "marked"  # an under-replicated ledger no worker has described yet (no state node)


def _timestamp(ms: int) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc) if ms >= 0 else None


def underreplicated_rows(store) -> list[tuple]:
    """Each marked ledger as AutoRecovery records it: missing replicas and when marked (the urL record),
    state and reason (the state node), the worker holding its lock."""
    manager = LedgerUnderreplicationManager(store)
    out = []
    for marked in manager.list_underreplicated():
        state = manager.get_state(marked.ledger)
        out.append((marked.ledger.scope_id, marked.ledger.ledger_id, list(marked.replicas),
                    state.state if state is not None else MARKED, state.reason if state is not None else "",
                    _timestamp(marked.ctime), _timestamp(state.mtime) if state is not None else None,
                    manager.lock_holder(marked.ledger)))
    return out


def rows(opts: ReadOptions) -> list[tuple]:
    bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
    if opts.table == "underreplicated":
        return underreplicated_rows(bk.store)
    if opts.table == "bookies":
        out = []
        for state, bookies in (("rw", bk.writable_bookies()), ("ro", bk.readonly_bookies())):
            for bookie in bookies:
                try:
                    info = bk.bookie_client(bookie).bookie_info()
                    out.append((bookie, state, info.totalDiskCapacity, info.freeDiskSpace))
                except Exception:  # registered but not answering
                    out.append((bookie, "unavailable", None, None))
        return out
    build = LEDGER_ROWS[opts.table]
    return [row for ledger, md in bk.store.ledgers_with_metadata(opts.scope) for row in build(ledger, md)]


def ledger_rows(ledger, md) -> list[tuple]:
    """The ``ledgers`` row of one ledger (a list of one, like ``fragment_rows``)."""
    bookies = sorted({b for _, ens in md.ensembles for b in ens})
    return [(ledger.scope_id, ledger.ledger_id, md.state.name, md.ensemble_size, md.write_quorum_size,
             md.ack_quorum_size, md.last_entry_id, md.length, md.digest_type.name.lower(), _timestamp(md.ctime),
             len(md.ensembles), bookies, dict(md.custom_metadata))]


def fragment_rows(ledger, md) -> list[tuple]:
    """The ``fragments`` rows of one ledger: one per ensemble it had."""
    return [(ledger.scope_id, ledger.ledger_id, i, first, last, list(ensemble), md.state.name)
            for i, (first, last, ensemble) in enumerate(md.fragments())]


# The tables built from each ledger's metadata alone: table → its rows of one ledger.
LEDGER_ROWS = {"ledgers": ledger_rows, "fragments": fragment_rows}


class TableReader(DataSourceReader):
    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def partitions(self):
        return [InputPartition(rows(self.opts))]

    def read(self, partition):
        yield from partition.value
