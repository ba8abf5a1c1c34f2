"""A ledger whose writer chooses the entry ids (LedgerHandleAdv)."""
from __future__ import annotations

from concurrent.futures import Future

from bookie.client.ledger_handle import LedgerHandle
from bookie.client.pending_add_op import PendingAddOp
from bookie.exceptions import BKDuplicateEntryIdException, BKIllegalOpException, BKIncorrectParameterException


class LedgerHandleAdv(LedgerHandle):
    """A ledger whose writer chooses the entry ids (LedgerHandleAdv): ``add_entry(entry_id, payload)``.

    Entries may arrive in any order; an id at or below the LAC, or already pending, is refused with
    BKDuplicateEntryIdException. Completions still come in entry order.
    """

    def append_async(self, payload: bytes) -> Future:
        raise BKIllegalOpException(f"ledger {self.ledger} was created with create_ledger_adv: use add_entry(entry_id, payload)")

    def add_entry(self, entry_id: int, payload: bytes) -> int:
        return self.add_entry_async(entry_id, payload).result()

    def add_entry_async(self, entry_id: int, payload: bytes) -> Future:
        if not isinstance(entry_id, int) or entry_id < 0:
            raise BKIncorrectParameterException(f"entry id {entry_id!r} is not a non-negative integer")
        return self._add(entry_id, [payload])

    def append_batch(self, payloads) -> Future:
        raise BKIllegalOpException(f"ledger {self.ledger} was created with create_ledger_adv: use add_entry(entry_id, payload)")

    def _next_entry_id(self, entry_id: int | None, count: int) -> int:
        if entry_id <= self.last_add_confirmed or any(op.entry_id == entry_id for op in self._pending):
            raise BKDuplicateEntryIdException(f"ledger {self.ledger}: entry {entry_id} was already added")
        self.last_add_pushed = max(self.last_add_pushed, entry_id)
        return entry_id

    def _enqueue(self, op: PendingAddOp) -> None:
        # Keep pending adds ordered by id, so completion stays in entry order.
        pending = self._pending
        if not pending or pending[-1].entry_id < op.entry_id:
            pending.append(op)
            return
        items = sorted([*pending, op], key=lambda o: o.entry_id)
        pending.clear()
        pending.extend(items)
