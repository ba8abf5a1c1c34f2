"""The client's metrics (BookKeeperClientStats, under ``bookkeeper_client``), as BookKeeper's client exports
them. An append is counted per entry but recorded per pending operation (a run of entries acknowledged
together: one event of ``count`` entries); a read per call, as BookKeeper's PendingReadOp is one operation
for a range.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

from bookie.stats.stats_logger import OpStatsLogger, StatsLogger

CLIENT_SCOPE = "bookkeeper_client"
CREATE_OP = "LEDGER_CREATE"
DELETE_OP = "LEDGER_DELETE"
OPEN_OP = "LEDGER_OPEN"
RECOVER_OP = "LEDGER_RECOVER"
ADD_OP = "ADD_ENTRY"
READ_OP = "READ_ENTRY"
WRITE_LAC_OP = "WRITE_LAC"
READ_LAC_OP = "READ_LAC"
READ_LAST_CONFIRMED_AND_ENTRY = "READ_LAST_CONFIRMED_AND_ENTRY"

T = TypeVar("T")


class BookKeeperClientStats:
    def __init__(self, stats_logger: StatsLogger):
        """``stats_logger``: the client's scope (``bookkeeper_client``)."""
        op = stats_logger.get_op_stats_logger
        self.create_op = op(CREATE_OP)
        self.delete_op = op(DELETE_OP)
        self.open_op = op(OPEN_OP)
        self.recover_op = op(RECOVER_OP)
        self.add_op = op(ADD_OP)
        self.read_op = op(READ_OP)
        self.write_lac_op = op(WRITE_LAC_OP)
        self.read_lac_op = op(READ_LAC_OP)
        self.read_lac_and_entry_op = op(READ_LAST_CONFIRMED_AND_ENTRY)


def timed(logger: OpStatsLogger, call: Callable[[], T]) -> T:
    """``call()``, recorded in ``logger``: a successful event, or a failed one if it raises."""
    started = time.monotonic()
    try:
        result = call()
    except BaseException:
        logger.register_failed_event(time.monotonic() - started)
        raise
    logger.register_successful_event(time.monotonic() - started)
    return result
