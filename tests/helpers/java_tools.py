"""What the tests check the Java tools' output against (bookie/testing/realbk.py runs the tools)."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerState
from bookie.util.processes import stop_process
from tests.helpers.waiting import wait_for

WRITER_ADDS_PER_S = 5000  # a writer stopped mid-write is rate-limited (ClientConfiguration throttle) to this
WRITER_ADD_TIMEOUT_S = 600  # and its adds in flight (addEntryTimeoutSec) outlive the stop


def summary_of(entries: list[bytes]) -> str:
    """realbk's ``read --format summary`` sha256: each entry's 4-byte big-endian length, then its bytes."""
    digest = hashlib.sha256()
    for e in entries:
        digest.update(struct.pack(">i", len(e)))
        digest.update(e)
    return digest.hexdigest()


def java_ledger(cluster, count: int, ensemble: int = 3, write_quorum: int = 2, ack_quorum: int = 2,
                entry_size: int = 100) -> int:
    """A closed ledger of ``count`` entries written by BookKeeper's own client (realbk ``client write``)."""
    return int(cluster.client("write", str(count), "--ensemble", str(ensemble), "--write-quorum", str(write_quorum),
                              "--ack-quorum", str(ack_quorum), "--entry-size", str(entry_size)).stdout.split()[-1])


def swap_first_members(store, ledger: int) -> tuple[str, ...]:
    """Rewrite a one-fragment ledger's metadata by CAS so its first two members trade places: each then lacks
    the entries of the other's place (E3 WQ2: index 0 holds ids 0, 2 mod 3, index 1 ids 0, 1 mod 3). Returns
    the ensemble as it was written."""
    versioned = store.read_ledger(LedgerId(0, ledger))
    (first, ensemble), = versioned.value.ensembles
    swapped = (ensemble[1], ensemble[0], *ensemble[2:])
    store.write_ledger(LedgerId(0, ledger), dataclasses.replace(versioned.value, ensembles=((first, swapped),)),
                       versioned.version)
    return tuple(ensemble)


def ledger_being_written(bk, known: set, min_lac: int) -> int:
    """The id of the ledger a spawned Java writer creates (the one not in ``known``), once ``min_lac``
    of its entries are acknowledged (read without recovery: the writer is not fenced)."""
    new: list = []
    wait_for(lambda: new.extend(lid.ledger_id for lid in bk.list_ledgers() if lid not in known) or new,
             what="the Java writer's ledger")
    wait_for(lambda: bk.open_ledger(new[0], recovery=False).last_add_confirmed >= min_lac,
             what=f"{min_lac} entries acknowledged")
    return new[0]


@dataclass
class StoppedWriter:
    """A Java writer SIGSTOPped mid-write: its ledger, OPEN, and the LAC its bookies report meanwhile."""

    ledger: int
    lac: int  # read just after the stop

    def check_read_up_to_lac(self, bk, entry_ids: list[int]) -> int:
        """``entry_ids``, read while the writer is stopped, are exactly 0..L for a LAC L the bookies reported
        meanwhile: at least the LAC at the stop, at most the LAC now (what the writer sent just before the
        stop may still have been arriving). Returns L."""
        now = bk.open_ledger(self.ledger, recovery=False).last_add_confirmed
        last = entry_ids[-1] if entry_ids else -1
        assert entry_ids == list(range(last + 1)), "not each entry 0..L exactly once"
        assert self.lac <= last <= now, f"read up to entry {last}; LAC at the stop {self.lac}, now {now}"
        return last


@contextmanager
def java_writer_stopped_mid_write(java_cluster, bk, n: int, size: int, min_lac: int = 1000) -> Iterator[StoppedWriter]:
    """Spawn ``bin/client write`` of ``n`` entries of ``size`` bytes, SIGSTOP it once ``min_lac`` entries
    are acknowledged and yield while it is stopped, its ledger provably OPEN (the writer closes it last)
    and not all acknowledged (``n`` well above ``min_lac``: the writer is rate-limited);
    then SIGCONT it and check that it exits 0 (every add acknowledged: never fenced) having closed the
    ledger itself at entry n - 1. The writer's process group is SIGKILLed if anything fails."""
    known = set(bk.list_ledgers())
    # --throttle: at most WRITER_ADDS_PER_S, so n entries take n / WRITER_ADDS_PER_S seconds on any machine
    # and the writer cannot finish before the stop; --add-timeout: its adds in flight outlive the stop
    # (the Java client's default of 5 s would fail them into an ensemble change with no spare bookie).
    writer = java_cluster.spawn("client", "write", java_cluster.metadata_service_uri, str(n), "--entry-size", str(size),
                                "--throttle", str(WRITER_ADDS_PER_S), "--add-timeout", str(WRITER_ADD_TIMEOUT_S))
    try:
        ledger = ledger_being_written(bk, known, min_lac)
        os.killpg(writer.pid, signal.SIGSTOP)
        try:
            state = bk.ledger_metadata(ledger).state
            assert state == LedgerState.OPEN, f"the writer finished ledger {ledger} before it was stopped ({state}): raise n"
            lac = bk.open_ledger(ledger, recovery=False).last_add_confirmed
            assert lac < n - 1, f"ledger {ledger}: all {n} entries acknowledged before the stop: raise n"
            yield StoppedWriter(ledger, lac)
        finally:
            os.killpg(writer.pid, signal.SIGCONT)
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err.decode()[-3000:]
        assert int(out) == ledger
    finally:
        stop_process(writer, sig=signal.SIGKILL)
    md = bk.ledger_metadata(ledger)
    assert md.state == LedgerState.CLOSED and md.last_entry_id == n - 1, md  # closed by its writer, not by a recovery
