"""A foreachBatch sink for streaming tests: what each micro-batch (and each replay of it) delivered."""
from __future__ import annotations


class Batches:
    """A foreachBatch sink that remembers each run of each batch id: (ledger_id, entry_id, payload) rows."""

    def __init__(self):
        self.runs: dict[int, list[list[tuple[int, int, bytes]]]] = {}

    def __call__(self, df, batch_id: int) -> None:
        rows = sorted((r.ledger_id, r.entry_id, bytes(r.payload)) for r in df.collect())
        self.runs.setdefault(batch_id, []).append(rows)

    def collect(self, df, checkpoint: str, available_now: bool = False):
        """Start a query writing ``df`` into this sink."""
        writer = df.writeStream.foreachBatch(self).option("checkpointLocation", checkpoint)
        return (writer.trigger(availableNow=True) if available_now else writer).start()

    def rows(self) -> list[tuple[int, int, bytes]]:
        """Every batch id's rows once (its first run), in batch order."""
        return [row for batch in sorted(self.runs) for row in self.runs[batch][0]]

    def entries(self, ledger: int) -> list[int]:
        return [e for lid, e, _ in self.rows() if lid == ledger]
