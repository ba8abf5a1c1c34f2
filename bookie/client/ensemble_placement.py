"""Choosing bookies (DefaultEnsemblePlacementPolicy): random writable bookies, never read-only ones."""
from __future__ import annotations

import random

from bookie.exceptions import BKNotEnoughBookiesException


def new_ensemble(writable: list[str], ensemble_size: int, exclude: set[str] = frozenset()) -> list[str]:
    candidates = [b for b in writable if b not in exclude]
    if len(candidates) < ensemble_size:
        raise BKNotEnoughBookiesException(
            f"need {ensemble_size} writable bookies, {len(candidates)} available ({', '.join(sorted(candidates)) or 'none'}"
            + (f"; excluded {', '.join(sorted(exclude))}" if exclude else "") + ")")
    return random.sample(candidates, ensemble_size)


def replace_bookie(writable: list[str], ensemble: list[str], failed: set[str]) -> str:
    """A writable bookie to take a failed one's place: not in the ensemble, not failed."""
    return new_ensemble(writable, 1, exclude=set(ensemble) | failed)[0]


def replace_bookies(writable: list[str], ensemble: list[str], failed: set[int], avoid: set[str]) -> list[str]:
    """``ensemble`` with the bookies at indexes ``failed`` replaced; a bookie in ``avoid`` (recently
    failed, quarantined) only if nothing else will do."""
    new = list(ensemble)
    dead = {ensemble[j] for j in failed}
    for i in sorted(failed):
        try:
            new[i] = replace_bookie(writable, new, dead | avoid)
        except BKNotEnoughBookiesException:
            new[i] = replace_bookie(writable, new, dead)
    return new
