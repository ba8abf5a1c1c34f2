"""Which streaming query a ``foreachBatch`` function runs in, on Spark Connect (``foreach_batch_writer``'s
default writer id is the query's id).

On a classic session the query's id is a local property of the thread that calls the function
(``sql.streaming.queryId``). On Spark Connect (4.3) the function runs in a Python process of the server's
(``pyspark.sql.connect.streaming.worker.foreach_batch_worker``, one per query run) on a session cloned for the
batch: neither that session's settings, nor its active queries, nor the tasks' local properties, nor the
environment name the query. The session that *started* the query lists it among its active queries, though,
and the worker makes that session the active one while it unpickles the function. ``StartingSession`` is
captured by the function's closure and notes that session when it is unpickled there; ``query_id`` then
takes the one query active on it. A session running several queries at once is ambiguous: the function then
asks for ``writer_id=`` rather than guess (a wrong id would make replays look new, or new batches replays).
The id, once found, is kept for the run (the worker lives as long as the query's run).
"""
from __future__ import annotations

import os

CONNECT_WORKER_URL = "SPARK_CONNECT_LOCAL_URL"  # set by the server for its foreachBatch worker


class AmbiguousQuery(Exception):
    """The starting session runs no query, or more than one: which is this function's cannot be told."""


class StartingSession:
    """The Connect session that started the query, noted when the function is unpickled in the server's
    foreachBatch worker (None anywhere else: pickling keeps nothing of the client's)."""

    def __init__(self) -> None:
        self.session = None
        self.query: str | None = None

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.query = None
        self.session = None
        if CONNECT_WORKER_URL in os.environ:  # unpickled by the foreachBatch worker: its active session started us
            from pyspark.sql.connect.session import SparkSession
            self.session = SparkSession.getActiveSession()

    def query_id(self) -> str | None:
        """The id of the one query active on the starting session (None when not on a Connect worker);
        AmbiguousQuery when it runs none or several."""
        if self.query is None and self.session is not None:
            active = [str(q.id) for q in self.session.streams.active]
            if len(active) != 1:
                raise AmbiguousQuery(f"the session that started this query runs {len(active)} streaming queries "
                                     f"({', '.join(active) or 'none'}): which one runs this function cannot be told")
            self.query = active[0]
        return self.query
