"""One bookie id replaced by another in every ledger's ensembles (BookKeeper's
UpdateLedgerOp.updateBookieIdInLedgers, behind ``bk shell updateledgers`` and ``updateBookieInLedger``).

The ledgers of every scope are listed, and their metadata read ``max_outstanding_reads`` at a time (the reads
of a batch pipelined). Each ledger whose ensembles name the old id is changed through the metadata update
loop (MetadataUpdateLoop): the change is applied to a fresh copy and written by compare-and-set, and after a
conflict (a writer closing the ledger, a replication worker replacing another bookie) read again and applied
again, so no concurrent change is lost, and one that landed before a lost reply is recognised. At most
``rate`` metadata writes a second (BookKeeper's RateLimiter), ``limit`` ledgers at most. A ledger deleted
meanwhile is passed over; any other failure stops the update (BKMetaStoreException), saying how far it got.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import islice
from typing import Callable, Iterator, TypeVar

from bookie.exceptions import BKException, BKMetaStoreException, BKNoSuchLedgerExistsOnMetadataServerException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.metadata_store import MetadataStore, Versioned
from bookie.meta.metadata_update_loop import update_ledger_metadata
from bookie.server.scan_and_compare_garbage_collector import RateLimiter

T = TypeVar("T")


@dataclass
class UpdateProgress:
    """BookKeeper's counts: ledgers issued (looked at) and updated (their metadata no longer names the old id,
    where it did)."""
    issued: int = 0
    updated: int = 0


def names_bookie(metadata: LedgerMetadata, bookie: str) -> bool:
    return any(bookie in ensemble for _, ensemble in metadata.ensembles)


def replace_bookie(metadata: LedgerMetadata, old: str, new: str) -> LedgerMetadata:
    """The metadata with ``old`` replaced by ``new`` in every ensemble (UpdateLedgerOp.replaceBookieInEnsembles)."""
    return replace(metadata, ensembles=tuple((first, tuple(new if b == old else b for b in ensemble))
                                             for first, ensemble in metadata.ensembles))


def update_bookie_id_in_ledgers(store: MetadataStore, old: str, new: str, rate: int, max_outstanding_reads: int,
                                limit: int | None = None,
                                on_updated: Callable[[LedgerId, UpdateProgress], None] | None = None
                                ) -> UpdateProgress:
    """Replace ``old`` by ``new`` in the ensembles of every ledger (the first ``limit`` listed); ``on_updated``
    is called after each ledger updated. A failed update (but for a ledger deleted meanwhile) raises
    BKMetaStoreException, naming the ledger and the counts so far."""
    limiter = RateLimiter(rate)
    progress = UpdateProgress()
    ledgers = store.iterate_ledgers(None)
    for batch in _batches(ledgers if limit is None else islice(ledgers, limit), max_outstanding_reads):
        for ledger, versioned in store.read_ledgers(batch):
            progress.issued += 1
            try:
                updated = versioned is not None and _update(store, ledger, versioned, old, new, limiter)
            except BKException as exc:
                raise BKMetaStoreException(f"failed to update the metadata of ledger {ledger}, replacing {old} with "
                                           f"{new} (issued={progress.issued} updated={progress.updated} so far): "
                                           f"{exc}") from exc
            if updated:
                progress.updated += 1
                if on_updated is not None:
                    on_updated(ledger, progress)
    return progress


def _update(store: MetadataStore, ledger: LedgerId, versioned: Versioned[LedgerMetadata], old: str, new: str,
            limiter: RateLimiter) -> bool:
    """Whether the ledger named ``old`` and now names ``new`` instead (False: it never named it, or it was
    deleted meanwhile)."""
    if not names_bookie(versioned.value, old):
        return False

    def transform(metadata: LedgerMetadata) -> LedgerMetadata:
        limiter.acquire()  # each write, a retry's too, as MetadataUpdateLoop's throttler
        return replace_bookie(metadata, old, new)

    try:
        update_ledger_metadata(store, ledger, versioned, lambda metadata: names_bookie(metadata, old), transform)
    except BKNoSuchLedgerExistsOnMetadataServerException:
        return False
    return True


def _batches(items: Iterator[T], size: int) -> Iterator[list[T]]:
    while batch := list(islice(items, size)):
        yield batch
