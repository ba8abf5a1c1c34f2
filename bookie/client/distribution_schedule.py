"""Round-robin striping (RoundRobinDistributionSchedule) and the quorum coverage rule.

The write set of entry e in an ensemble of E bookies with write quorum WQ is the bookies at indexes
``(e + i) mod E`` for ``i < WQ``. An entry is acknowledged once AQ bookies of its write set have it.

Coverage (RRQuorumCoverageSet): a set of bookie answers *covers* the ensemble when every possible
write set has fewer than AQ bookies that did not answer. Then no acknowledged entry can be hiding
on the bookies that stayed silent: any entry acked by AQ bookies has at least one answering bookie
among them.
"""
from __future__ import annotations


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Indexes (into the ensemble) of the bookies that store ``entry_id``."""
    return [(entry_id + i) % ensemble_size for i in range(write_quorum)]


def stores(bookie_index: int, entry_id, ensemble_size: int, write_quorum: int):
    """Whether the bookie at ``bookie_index`` is in the write set of ``entry_id`` (elementwise for a numpy
    array of entry ids: a mask)."""
    return (bookie_index - entry_id) % ensemble_size < write_quorum


def stored_count(bookie_index: int, first: int, last: int, ensemble_size: int, write_quorum: int) -> int:
    """How many of the entries ``first..last`` the bookie at ``bookie_index`` stores: every ``ensemble_size``
    consecutive entries it stores ``write_quorum`` (without walking the range)."""
    cycles, rest = divmod(max(0, last - first + 1), ensemble_size)
    return cycles * write_quorum + sum(1 for e in range(first, first + rest)
                                       if stores(bookie_index, e, ensemble_size, write_quorum))


def is_covered(known: set[int], ensemble_size: int, write_quorum: int, ack_quorum: int) -> bool:
    """Whether the bookie indexes in ``known`` (answered: entry, no entry, or no ledger) cover every write set."""
    for first in range(ensemble_size):
        unknown = sum(1 for i in write_set(first, ensemble_size, write_quorum) if i not in known)
        if unknown >= ack_quorum:
            return False
    return True


def missing_quorum(write_quorum: int, ack_quorum: int) -> int:
    """How many bookies of a write set must say "no such entry" before the entry is known missing."""
    return write_quorum - ack_quorum + 1
