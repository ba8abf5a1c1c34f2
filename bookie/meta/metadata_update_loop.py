"""Changing metadata safely (BookKeeper's MetadataUpdateLoop), for ledger metadata and any other
versioned value kept in the metadata store (the Spark connector's logs).

Read, ask whether the change is still needed, transform, compare-and-set; on a version conflict
re-read and start over. A lost ZooKeeper connection leaves the write in doubt (it may have been
applied with the reply lost): that is resolved the same way, by re-reading once ZooKeeper answers
again, and the "still needed?" test then recognises a change that did land. So a writer never gives
up on a change that was applied, and never applies one twice.
"""
from __future__ import annotations

import logging
from typing import Callable, TypeVar

from bookie.exceptions import BKMetadataVersionException, BKZKConnectionLossException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.metadata_store import Versioned
from bookie.meta.retry import retry_on_connection_loss

log = logging.getLogger(__name__)
T = TypeVar("T")


def update_metadata(read: Callable[[], Versioned[T]], write: Callable[[T, int], Versioned[T]],
                    versioned: Versioned[T], needs_update: Callable[[T], bool], transform: Callable[[T], T],
                    uncertain_for: float, what: str) -> Versioned[T]:
    """Apply ``transform`` by compare-and-set (``write(value, expected_version)``) until ``needs_update``
    says the change is there; returns the value as stored then (or as found, if nothing was needed).

    ``transform`` may raise to give up (for example when the ledger was closed meanwhile). A lost
    connection is waited out for ``uncertain_for`` seconds, then its BKZKConnectionLossException is
    raised: the change is then in doubt.
    """
    while needs_update(versioned.value):
        try:
            return write(transform(versioned.value), versioned.version)
        except BKMetadataVersionException:
            pass  # someone else changed it first
        except BKZKConnectionLossException as exc:
            log.warning("%s: update in doubt (%s); re-reading to see whether it was applied", what, exc)
        versioned = retry_on_connection_loss(read, uncertain_for)
    return versioned


def update_ledger_metadata(store, ledger: LedgerId, versioned: Versioned[LedgerMetadata],
                           needs_update: Callable[[LedgerMetadata], bool],
                           transform: Callable[[LedgerMetadata], LedgerMetadata],
                           uncertain_for: float = 30.0) -> Versioned[LedgerMetadata]:
    """``update_metadata`` on one ledger's metadata."""
    return update_metadata(lambda: store.read_ledger(ledger),
                           lambda md, version: store.write_ledger(ledger, md, version),
                           versioned, needs_update, transform, uncertain_for, f"ledger {ledger}")


def doubt_window(conf) -> float:
    """How long a client waits out a lost ZooKeeper connection before an update in doubt fails: two
    session timeouts (kazoo reconnects meanwhile), or the connect timeout if that is longer."""
    return max(conf.zkTimeout / 1000.0 * 2, conf.zkConnectTimeout)
