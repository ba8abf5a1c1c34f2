"""A writer's per-bookie outboxes and in-flight add batches (kafka-python's RecordAccumulator).

Every pending add joins the outbox of each bookie that stores part of it. A bookie's outbox goes out
as a batch (one add message) as soon as fewer than ``maxInflightBatchesPerBookie`` batches are in
flight to it, so a lone append travels alone (low latency) and a busy writer's entries pile up into
large batches. A bookie that failed keeps its outbox until the ensemble change replaces it.

Not thread-safe: the ledger handle's lock guards it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from bookie.client.conf import ClientConfiguration
from bookie.client.pending_add_op import PendingAddOp


@dataclass(eq=False)
class InflightBatch:
    """Pending adds sent to bookie ``index`` (``bookie``) in one add message at ``sent`` (monotonic)."""
    index: int
    bookie: str
    ops: list[PendingAddOp]
    sent: float

    def payload(self) -> bytes:
        """The add message's entries: this bookie's part of every op."""
        return b"".join(self.parts())

    def parts(self) -> list[bytes]:
        """This bookie's part of every op, in order: what the transport joins as it encodes the message
        (one copy instead of two)."""
        index = self.index
        return [op.parts[index] for op in self.ops]

    def describe(self) -> str:
        return f"{self.ops[0].entry_id}..{self.ops[-1].last_id}"


class BookieOutboxes:
    def __init__(self, ensemble_size: int, conf: ClientConfiguration, message_bytes: int):
        self.max_inflight = conf.maxInflightBatchesPerBookie
        self.max_batch_entries = conf.maxBatchEntries
        self.max_batch_bytes = conf.maxBatchBytes
        self.message_bytes = message_bytes  # room for framed entries in one add message
        self._outbox: list[list[PendingAddOp]] = [[] for _ in range(ensemble_size)]
        self._inflight: list[list[InflightBatch]] = [[] for _ in range(ensemble_size)]
        self.failed: set[int] = set()  # indexes whose bookie failed and waits to be replaced

    def add(self, op: PendingAddOp) -> None:
        for i in op.write_set:
            self._outbox[i].append(op)

    def has_sendable(self) -> bool:
        """Whether some bookie with entries waiting has room for another batch."""
        limit = self.max_inflight
        return any(box and len(inflight) < limit for box, inflight in zip(self._outbox, self._inflight))

    def has_room(self) -> bool:
        """Whether some bookie that has not failed may take another batch now."""
        limit, failed = self.max_inflight, self.failed
        for i, inflight in enumerate(self._inflight):
            if len(inflight) < limit and i not in failed:
                return True
        return False

    def take_sendable(self, ensemble: list[str]) -> list[InflightBatch]:
        """Batches that may go out now, counted as in flight from now on."""
        batches = []
        for i, outbox in enumerate(self._outbox):
            while outbox and i not in self.failed and len(self._inflight[i]) < self.max_inflight:
                count, entries, size = 0, 0, 0
                while count < len(outbox) and entries < self.max_batch_entries and size < self.max_batch_bytes:
                    part = len(outbox[count].parts[i])
                    if count and size + part > self.message_bytes:
                        break  # one more would not fit in one add message (every op alone does)
                    size += part
                    entries += outbox[count].count
                    count += 1
                batch = InflightBatch(i, ensemble[i], outbox[:count], time.monotonic())
                del outbox[:count]
                self._inflight[i].append(batch)
                batches.append(batch)
        return batches

    def retire(self, batch: InflightBatch, ensemble: list[str]) -> bool:
        """Forget an in-flight batch; False if it is stale (its bookie was replaced meanwhile)."""
        inflight = self._inflight[batch.index]
        if batch not in inflight:
            return False
        inflight.remove(batch)
        return ensemble[batch.index] == batch.bookie

    def unanswered(self, index: int) -> int:
        """Entries bookie ``index`` has not answered yet: waiting to be sent to it, or sent and in flight."""
        return sum(op.count for op in self._outbox[index]) + \
            sum(op.count for batch in self._inflight[index] for op in batch.ops)

    def timed_out(self, now: float, timeout: float) -> list[InflightBatch]:
        """Batches in flight for longer than ``timeout`` seconds."""
        return [b for inflight in self._inflight for b in inflight if now - b.sent > timeout]

    def bookie_failed(self, index: int, pending) -> None:
        """Hold bookie ``index``'s adds for its replacement: every op of ``pending`` it has not acknowledged."""
        self.failed.add(index)
        self._outbox[index] = [op for op in pending if op.awaits(index)]

    def bookie_replaced(self, index: int, pending) -> None:
        """Bookie ``index`` was replaced: answers of the old one are ignored, the new one gets what it lacks."""
        self.failed.discard(index)
        self._inflight[index] = []
        self._outbox[index] = [op for op in pending if op.awaits(index)]

    def clear(self) -> None:
        """Nothing more is sent (the handle failed); batches in flight are answered and ignored."""
        for outbox in self._outbox:
            outbox.clear()
