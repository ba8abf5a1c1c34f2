"""Changing a ledger's metadata safely (BookKeeper's MetadataUpdateLoop).

Read, ask whether the change is still needed, transform, compare-and-set; on a version conflict
re-read and start over. A lost ZooKeeper connection leaves the write in doubt (it may have been
applied with the reply lost): that is resolved the same way, by re-reading once ZooKeeper answers
again, and the "still needed?" test then recognises a change that did land. So a writer never gives
up on a change that was applied, and never applies one twice.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from bookie.client.exceptions import BKMetadataVersionException, BKZKConnectionLossException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.metadata_store import Versioned

log = logging.getLogger(__name__)
REREAD_BACKOFF = 0.1  # seconds between re-reads while ZooKeeper is unreachable (doubled up to 1 s)


def update_ledger_metadata(store, ledger: LedgerId, versioned: Versioned[LedgerMetadata],
                           needs_update: Callable[[LedgerMetadata], bool],
                           transform: Callable[[LedgerMetadata], LedgerMetadata],
                           uncertain_for: float = 30.0) -> Versioned[LedgerMetadata]:
    """Apply ``transform`` to the ledger's metadata by CAS until ``needs_update`` says it is there.

    ``transform`` may raise to give up (for example when the ledger was closed meanwhile). Returns the
    metadata as stored after the change (or as found, if no change was needed). ``uncertain_for``
    bounds how long a lost connection is waited out before its error is raised.
    """
    while needs_update(versioned.value):
        try:
            return store.write_ledger(ledger, transform(versioned.value), versioned.version)
        except BKMetadataVersionException:
            versioned = store.read_ledger(ledger)
        except BKZKConnectionLossException as exc:
            log.warning("ledger %s: metadata update in doubt (%s); re-reading to see whether it was applied",
                        ledger, exc)
            versioned = reread(store, ledger, uncertain_for)
    return versioned


def doubt_window(conf) -> float:
    """How long a client waits out a lost ZooKeeper connection before an update in doubt fails: two
    session timeouts (kazoo reconnects meanwhile), or the connect timeout if that is longer."""
    return max(conf.zkTimeout / 1000.0 * 2, conf.zkConnectTimeout)


def reread(store, ledger: LedgerId, uncertain_for: float) -> Versioned[LedgerMetadata]:
    """The ledger's metadata, read again as soon as ZooKeeper answers (within ``uncertain_for`` s)."""
    deadline = time.monotonic() + uncertain_for
    delay = REREAD_BACKOFF
    while True:
        try:
            return store.read_ledger(ledger)
        except BKZKConnectionLossException:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)  # waiting out a reconnect: kazoo re-establishes the session meanwhile
            delay = min(1.0, delay * 2)
