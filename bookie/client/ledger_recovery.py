"""Opening a ledger with recovery (LedgerOpenOp + LedgerRecoveryOp, ReadLastConfirmedOp).

1. Metadata OPEN -> IN_RECOVERY (CAS): the old writer's ensemble changes now fail.
2. Fence every bookie of the last ensemble and read its last entry; accept the answers only under
   quorum coverage. LAC = max(piggybacked LACs, first entry of the last fragment - 1).
3. Read on from LAC+1 until an entry is known missing (WQ-AQ+1 bookies of its write set say so);
   any other failure aborts recovery — a ledger is never truncated because a bookie could not answer.
   The reads go to the ensembles recorded in the metadata store, never to a replacement chosen by
   step 4: a replacement has none of the old entries, and its "nothing here" would end the ledger early.
4. Re-add each entry found with RECOVERY_ADD to its write quorum (bookie failures change the
   ensemble in memory), in add messages no larger than a bookie takes.
5. CAS IN_RECOVERY -> CLOSED with the last entry, length and the fragments step 4 started, applied to
   the metadata as read afresh, never a stale copy over it (a replicator may have replaced a bookie of
   an earlier fragment meanwhile). If another client closed it first, its metadata is the answer: both
   recoveries end with the same last entry.
"""
from __future__ import annotations

import logging

from bookie.client.ledger_handle import LedgerHandle
from bookie.client.ledger_reader import LedgerReader
from bookie.exceptions import BKException, BKLedgerRecoveryException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.meta.metadata_store import Versioned
from bookie.meta.metadata_update_loop import doubt_window, update_ledger_metadata
from bookie.proto.checksum import DigestManager, generate_master_key

log = logging.getLogger(__name__)
SCAN_BATCH = 1000


def recover(bk, ledger: LedgerId, versioned: Versioned[LedgerMetadata], password: bytes) -> Versioned[LedgerMetadata]:
    """Recover and close ``ledger``; returns its CLOSED metadata."""
    versioned = _mark_in_recovery(bk, ledger, versioned)
    if versioned.value.is_closed:
        return versioned
    md = versioned.value
    digest = DigestManager(ledger, password, md.digest_type)
    reader = LedgerReader(bk, ledger, digest)
    fenced = reader.read_last_confirmed(md, fence=True, master_key=generate_master_key(password))
    lac = max(fenced.lac, md.ensembles[-1][0] - 1)
    length = _length_at(reader, md, lac)
    handle = LedgerHandle(bk, ledger, versioned, password, recovery=True, last_add_confirmed=lac, length=length)
    try:
        next_id = lac + 1
        while True:
            # ``md``, not ``handle.metadata``: the handle's in-memory ensemble changes name bookies that
            # never had these entries.
            payloads, at_end = reader.recovery_scan(md, next_id, SCAN_BATCH)
            if payloads:
                try:
                    handle.append_batch(payloads)
                except BKException:
                    if handle.error is None:
                        raise
                    break  # re-replication failed: reported below, with what the ledger needs
            next_id += len(payloads)
            if at_end:
                break
        handle.drain()
        error = handle.error
        if error is not None:
            raise BKLedgerRecoveryException(
                f"recovery of ledger {ledger} could not re-replicate the entries after {lac}: {error}. "
                f"The ledger stays IN_RECOVERY; entries 0..{lac} can be read with recovery=False meanwhile, "
                "and opening it again recovers it once enough bookies are writable")
    finally:
        handle.close()
    log.info("ledger %s recovered: last entry %d (fence LAC %d, %d entries re-added)", ledger,
             handle.last_add_confirmed, fenced.lac, handle.last_add_confirmed - lac)
    return _close_recovered(bk, ledger, versioned, handle.recovery_ensembles, handle.last_add_confirmed,
                            handle.confirmed_length)


def _mark_in_recovery(bk, ledger: LedgerId, versioned: Versioned[LedgerMetadata]) -> Versioned[LedgerMetadata]:
    """OPEN -> IN_RECOVERY (a ledger found IN_RECOVERY or CLOSED is left as it is)."""
    return update_ledger_metadata(bk.store, ledger, versioned, lambda md: md.state is LedgerState.OPEN,
                                  lambda md: md.with_state(LedgerState.IN_RECOVERY), doubt_window(bk.conf))


def _length_at(reader: LedgerReader, md: LedgerMetadata, lac: int) -> int:
    """The ledger's length through entry ``lac``, from that entry's header."""
    if lac < 0:
        return 0
    try:
        return reader.read_verified(md, lac)[0].length
    except BKException as exc:
        raise BKLedgerRecoveryException(f"recovery of ledger {reader.ledger}: cannot read entry {lac} "
                                            f"(its LAC): {exc}") from None


def _close_recovered(bk, ledger: LedgerId, versioned: Versioned[LedgerMetadata], from_recovery: dict[int, tuple[str, ...]],
                     last_entry: int, length: int) -> Versioned[LedgerMetadata]:
    """IN_RECOVERY -> CLOSED, applying only this recovery's own change to the fresh metadata: the state,
    last entry and length, and the fragments it started (``from_recovery``). Earlier fragments stay as
    the fresh copy has them: a replicator may have replaced a lost bookie of one meanwhile. A ledger
    closed meanwhile by another recovery keeps that recovery's answer (both found the same last entry)."""
    def close(md: LedgerMetadata) -> LedgerMetadata:
        try:
            recovered = md.with_recovery_ensembles(from_recovery)
        except ValueError as exc:
            raise BKLedgerRecoveryException(f"recovery of ledger {ledger} cannot close it: {exc}") from None
        return recovered.with_state(LedgerState.CLOSED, last_entry, length)

    versioned = update_ledger_metadata(bk.store, ledger, versioned, lambda md: not md.is_closed, close,
                                       doubt_window(bk.conf))
    if versioned.value.last_entry_id != last_entry:
        log.warning("ledger %s was closed by another recovery at entry %d (this one found %d)",
                    ledger, versioned.value.last_entry_id, last_entry)
    return versioned
