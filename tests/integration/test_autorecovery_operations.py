"""AutoRecovery as an operator runs it (issue 13), with a real ZooKeeper and real bookie processes:

- disabled, nothing moves until enabled: replication workers that have seen AutoRecovery disabled take
  no lock, copy nothing and change no metadata while ledgers are marked; once enabled they re-replicate
  everything. Also the interleaving where a worker had already passed its "enabled?" check when the
  operator disabled AutoRecovery and ledgers got marked;
- ``bk shell decommissionbookie`` with a running auditor (real ``bk autorecovery`` processes, a
  lostBookieRecoveryDelay of an hour): the command triggers the audit, the workers move the ledgers, it
  returns once nothing references the bookie and deletes its cookie;
- a ``bk autorecovery`` worker SIGKILLed mid-fragment while copying to T1; T1 then stopped, so the next
  worker must copy to T2: one replacement in the metadata, every entry on every bookie of the new
  ensemble, and T1's stray partial copy, named by no ensemble, is removed by a forced GC pass on T1 (the
  ledger named by T1 stays; T2's copy stays), its bytes with the compaction of T1's entry log.
"""
from __future__ import annotations

import os
import signal
import threading

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import COPYING, LOCKS_PATH, LedgerUnderreplicationManager
from bookie.proto import availability, status
from bookie.replication.auditor_elector import current_auditor
from bookie.replication.replication_worker import POLL_SECONDS, ReplicationSettings
from bookie.util.processes import stop_process
from tests.helpers.replication import (CLIENT, Workers, assert_fully_replicated, assert_restored, holdings, logged,
                                      marked, names, payloads, unregistered)
from tests.helpers.shell import bk_shell, bk_shell_run
from tests.helpers.waiting import wait_for
from tests.helpers.gc import NO_TIMED_PASS, forced_pass

# `bk autorecovery` participants that act only when told: the lost-bookie audit waits an hour, the periodic
# checks are off, so what moves is what the test triggers or marks.
QUIET_AUTORECOVERY = {"zkTimeout": 2000, "lostBookieRecoveryDelay": 3600, "auditorPeriodicCheckInterval": 0,
                      "auditorPeriodicBookieCheckInterval": 0, "auditorReplicasCheckInterval": 0,
                      "rwRereplicateBackoffMs": 200, "lockReleaseOfFailedLedgerGracePeriod": 2000}


def closed_ledgers(bk: BookKeeper, shapes, tag: str, entries: int = 30) -> dict[int, list[bytes]]:
    """Closed ledgers of the given (ensemble size, write quorum, bookies) shapes (AQ 2, password pw):
    ledger id -> the acknowledged payloads."""
    written = {}
    for i, (size, wq, bookies) in enumerate(shapes):
        handle = bk.create_ledger(size, wq, 2, bookies=bookies, password=b"pw")
        written[handle.ledger_id] = payloads(f"{tag}{i}", entries)
        handle.append_batch(written[handle.ledger_id]).result(120)
        handle.close()
    return written


def versions(bk: BookKeeper, ledgers) -> dict[int, int]:
    return {lid: bk.store.read_ledger(LedgerId(0, lid)).version for lid in ledgers}


def locks(bk: BookKeeper) -> list[str]:
    return bk.store.node_children(LOCKS_PATH)


def held(bk: BookKeeper, bookie: str, ledger_id: int) -> set[int] | None:
    """The entries of the ledger ``bookie`` stores; None if it has no such ledger."""
    listing = bk.bookie_client(bookie).list_entries(LedgerId(0, ledger_id))
    return set(availability.decode(listing.availabilityOfEntriesOfLedger)) if listing.status == status.EOK else None


class Spy:
    """Records what one in-process ReplicationWorker's manager is asked: each return of
    ``wait_until_enabled`` (False: it looked and AutoRecovery was disabled) and each lock attempt
    (``get_ledger_to_rereplicate``) with its outcome. ``gate_first_lock``: the first lock attempt waits for
    ``gate`` before it runs (a worker that passed its "enabled?" check just before an operator disabled)."""

    def __init__(self, manager: LedgerUnderreplicationManager, gate_first_lock: bool = False):
        self.disabled_seen = 0
        self.lock_attempts: list[int | None] = []  # the outcome of each finished attempt
        self.entered = threading.Event()
        self.gate = threading.Event()
        if not gate_first_lock:
            self.gate.set()
        wait_until_enabled, get_ledger = manager.wait_until_enabled, manager.get_ledger_to_rereplicate

        def spied_wait_until_enabled(timeout=None):
            enabled = wait_until_enabled(timeout)
            if not enabled:
                self.disabled_seen += 1
            return enabled

        def spied_get_ledger(timeout=None, skip=None):
            self.entered.set()
            assert self.gate.wait(120), "the test never opened the gate"
            ledger_id = get_ledger(timeout, skip)
            self.lock_attempts.append(ledger_id)
            return ledger_id

        manager.wait_until_enabled = spied_wait_until_enabled
        manager.get_ledger_to_rereplicate = spied_get_ledger


def test_disabled_workers_take_no_lock_and_copy_nothing_until_enabled(bk_cluster):
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    written = closed_ledgers(bk, [(3, 2, [b[0], b[1], b[2]]), (3, 3, [b[0], b[1], b[2]]), (2, 2, [b[0], b[3]])], "d")
    c.kill_bookie(0)
    wait_for(unregistered(bk, b[0]), f"{b[0]} to leave the registration")
    assert bk_shell(c, "autorecovery", "-disable").strip() == "AutoRecovery is disabled"
    manager = LedgerUnderreplicationManager(bk.store, "test-auditor")
    for lid in written:
        manager.mark_ledger_underreplicated(lid, [b[0]])
    before_versions, before_holdings = versions(bk, written), holdings(bk, b[1:], sorted(written))

    workers = Workers(c.metadata_service_uri, 2, ReplicationSettings(rw_rereplicate_backoff_ms=200))
    spies = [Spy(w.manager) for w in workers.workers]
    workers.start()
    try:
        # Each worker has looked twice (a full poll each) and found AutoRecovery disabled, with every
        # ledger marked all along: that is when it would have locked one.
        wait_for(lambda: all(s.disabled_seen >= 2 for s in spies), "both workers seeing AutoRecovery disabled")
        assert [s.lock_attempts for s in spies] == [[], []] and not any(s.entered.is_set() for s in spies)
        assert locks(bk) == []
        assert set(marked(bk.store)) == set(written)
        assert all(manager.get_state(lid) is None for lid in written)  # no worker wrote "copying"
        assert versions(bk, written) == before_versions
        assert holdings(bk, b[1:], sorted(written)) == before_holdings  # b3 got nothing of the 3-bookie ledgers

        assert bk_shell(c, "autorecovery", "-enable").strip() == "AutoRecovery is enabled"
        wait_for(lambda: not marked(bk.store) and not any(names(bk, lid, b[0]) for lid in written),
                 "every ledger re-replicated once AutoRecovery is enabled", timeout=120)
        assert workers.overlaps == []
    finally:
        workers.stop()
    assert locks(bk) == []
    assert_restored(bk, written, b[0])


def test_a_worker_past_its_enabled_check_takes_nothing_marked_after_autorecovery_is_disabled(bk_cluster):
    """BookKeeper's getLedgerToRereplicate checks the disable node before each lock attempt
    (waitIfLedgerReplicationDisabled), so a worker that was waiting for work when an operator disabled
    AutoRecovery takes nothing marked afterwards (by decommissionbookie, another auditor, a tool)."""
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    written = closed_ledgers(bk, [(3, 2, [b[0], b[1], b[2]]), (3, 3, [b[0], b[1], b[2]])], "g")
    c.kill_bookie(0)
    manager = LedgerUnderreplicationManager(bk.store, "test-auditor")
    workers = Workers(c.metadata_service_uri, 1, ReplicationSettings(rw_rereplicate_backoff_ms=200))
    spy = Spy(workers.workers[0].manager, gate_first_lock=True)
    workers.start()
    try:
        wait_for(spy.entered.is_set, "the worker about to look for work (AutoRecovery enabled, nothing marked)")
        manager.disable_ledger_replication()
        for lid in written:
            manager.mark_ledger_underreplicated(lid, [b[0]])
        before_versions, before_holdings = versions(bk, written), holdings(bk, b[1:], sorted(written))
        spy.gate.set()  # its lock attempt runs now: AutoRecovery disabled, both ledgers marked
        wait_for(lambda: spy.lock_attempts, "the worker's lock attempt to return", timeout=60 + POLL_SECONDS)
        assert spy.lock_attempts == [None], \
            f"the worker locked ledger {spy.lock_attempts[0]} while AutoRecovery was disabled"
        wait_for(lambda: spy.disabled_seen >= 1, "the worker seeing AutoRecovery disabled")
        assert locks(bk) == []
        assert versions(bk, written) == before_versions
        assert holdings(bk, b[1:], sorted(written)) == before_holdings

        manager.enable_ledger_replication()
        wait_for(lambda: not marked(bk.store) and not any(names(bk, lid, b[0]) for lid in written),
                 "every ledger re-replicated once AutoRecovery is enabled", timeout=120)
    finally:
        spy.gate.set()
        workers.stop()
    assert_restored(bk, written, b[0])


def test_decommission_with_a_running_auditor_triggers_the_audit_and_waits(bk_cluster):
    c, bk = bk_cluster(5, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    gone = b[1]
    written = closed_ledgers(bk, [(3, 2, [gone, b[2], b[3]]), (3, 3, [b[0], gone, b[4]]), (2, 2, [b[3], gone]),
                                  (4, 2, [b[0], gone, b[2], b[3]])], "x", 40)
    untouched = closed_ledgers(bk, [(3, 2, [b[0], b[2], b[4]])], "u", 10)
    untouched_versions = versions(bk, untouched)
    assert bk_shell(c, "lostbookierecoverydelay", "-set", "3600").strip() == \
        "Successfully set LostBookieRecoveryDelay value to: 3600"
    for participant in ("ar-a", "ar-b"):
        c.start_autorecovery(participant, **QUIET_AUTORECOVERY)
    wait_for(lambda: current_auditor(bk.store) in ("ar-a", "ar-b"), "an auditor")
    auditor = current_auditor(bk.store)

    c.kill_bookie(1)
    wait_for(unregistered(bk, gone), f"{gone} to leave the registration")
    assert marked(bk.store) == {}  # the auditor waits lostBookieRecoveryDelay (an hour) on its own
    assert bk.store.read_cookie(gone) is not None
    done = bk_shell_run(c, "decommissionbookie", "-bookieid", gone, "--timeout", "120")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"triggered an audit on {auditor}" in done.stdout
    assert f"bookie {gone} decommissioned" in done.stdout
    # The auditor marked them (the command only triggered it), the workers moved them, the cookie is gone.
    assert logged(os.path.join(c.base_dir, f"autorecovery-{auditor}.log"),
                  f"lost bookies {gone}: {len(written)} ledgers marked under-replicated")
    assert bk.store.read_cookie(gone) is None
    assert marked(bk.store) == {}
    assert locks(bk) == []
    assert_restored(bk, written, gone)
    assert versions(bk, untouched) == untouched_versions
    assert bk_shell(c, "lostbookierecoverydelay", "-get").strip() == "LostBookieRecoveryDelay value: 3600"


# The replicator copies a fragment in windows of 1024 entries (the client's maxBatchEntries), one after the
# other, each acknowledged by the target before the next is read. T1's journal holds each add 3 s before
# it syncs and acknowledges it, so a fragment of two windows lies on T1 in part (the first window's entries
# are stored, and listed, as they arrive) for at least 6 s before its ensemble can be replaced, whatever the
# machine's speed: the test catches the worker in that state.
SLOW_TARGET = {"journalFlushWhenQueueEmpty": False, "journalMaxGroupWaitMSec": 3000}
FAST_TARGET = {"journalFlushWhenQueueEmpty": True, "journalMaxGroupWaitMSec": 2.0}
ENTRIES = 1024 + 200  # two windows of the replicator


def test_worker_killed_mid_fragment_the_next_copies_to_another_bookie_and_gc_removes_the_stray(bk_cluster):
    # No GC pass runs on its own; a forced one also deletes over-replicated ledgers (gcOverreplicatedLedgerWaitTime).
    # The client waits out T1's slow acknowledgements (it would replace T1 in the ledger written to it).
    c, bk = bk_cluster(3, client_conf={**CLIENT, "addEntryTimeout": 30.0}, gcOverreplicatedLedgerWaitTime=1,
                       **NO_TIMED_PASS)
    b = [x.bookie_id for x in c.bookies]
    t1 = c.add_bookie(**SLOW_TARGET)  # the only bookie outside [b0, b1, b2] while the first worker runs
    ledger = bk.create_ledger(3, 3, 2, bookies=b[:3], password=b"pw")
    data = payloads("m", ENTRIES)
    ledger.append_batch(data).result(120)
    ledger.close()
    lid = ledger.ledger_id
    on_t1 = closed_ledgers(bk, [(3, 2, [t1.bookie_id, b[1], b[2]])], "t", 10)  # a ledger T1 rightly holds
    (kept,) = on_t1
    assert bk.ledger_metadata(kept).ensembles == ((0, (t1.bookie_id, b[1], b[2])),)
    manager = LedgerUnderreplicationManager(bk.store, "test-auditor")
    manager.set_lost_bookie_recovery_delay(3600)
    c.kill_bookie(0)
    manager.mark_ledger_underreplicated(lid, [b[0]])

    w1 = c.start_autorecovery("ar-1", **QUIET_AUTORECOVERY)
    frozen = [False]
    try:
        def copying_by_w1() -> bool:
            state = manager.get_state(lid)
            return state is not None and state.state == COPYING and state.by == "ar-1"

        def frozen_mid_fragment() -> bool:
            """SIGSTOP ar-1 once it copies and T1 holds part of the fragment; if by then the fragment was
            replaced (or ar-1 no longer holds the ledger), let it run on."""
            if not copying_by_w1() or not held(bk, t1.bookie_id, lid):
                return False
            os.kill(w1.pid, signal.SIGSTOP)
            frozen[0] = True
            if copying_by_w1() and manager.lock_holder(lid) == "ar-1" and \
                    bk.ledger_metadata(lid).ensembles == ((0, tuple(b[:3])),):
                return True
            os.kill(w1.pid, signal.SIGCONT)
            frozen[0] = False
            return False
        wait_for(frozen_mid_fragment, "ar-1 frozen mid-fragment with part of it on T1")
        stray = held(bk, t1.bookie_id, lid)
        stop_process(w1, sig=signal.SIGKILL)
    finally:
        if frozen[0] and w1.poll() is None:
            os.kill(w1.pid, signal.SIGCONT)
    assert stray and stray <= set(range(ENTRIES))
    # T1 goes away (a clean stop: what it received stays on its disk) and T2 comes: the next worker's only
    # choice is T2.
    c.kill_bookie(t1.index, signal.SIGTERM)
    wait_for(unregistered(bk, t1.bookie_id), "T1 to leave the registration")
    t2 = c.add_bookie()
    c.start_autorecovery("ar-2", **QUIET_AUTORECOVERY)
    wait_for(lambda: manager.get_underreplicated(lid) is None, "ar-2 finishing the ledger", timeout=120)

    md = bk.ledger_metadata(lid)
    assert md.ensembles == ((0, (t2.bookie_id, b[1], b[2])),)  # exactly one replacement, the one copied to
    assert_fully_replicated(bk, lid)  # T2 holds every entry, byte-identical to b1's and b2's copies
    with bk.open_ledger(lid, b"pw", recovery=False) as reader:  # every acknowledged entry, byte for byte
        assert [e.payload for e in reader.read(0, ENTRIES - 1)] == data
    assert locks(bk) == []

    # T1 back: it still holds its partial copy, which nothing names (readers use the ensemble: harmless).
    c.start_bookie(t1.index, **FAST_TARGET)
    assert held(bk, t1.bookie_id, lid) >= stray
    assert not names(bk, lid, t1.bookie_id)
    # A forced GC pass on T1 deletes it (closed, in no ensemble, not marked) and keeps the ledger T1 is in.
    after_gc = forced_pass(bk, t1.bookie_id)
    assert held(bk, t1.bookie_id, lid) is None
    assert held(bk, t1.bookie_id, kept) is not None
    assert_restored(bk, on_t1, b[0])
    # On T2, which the metadata names, a forced pass deletes nothing.
    forced_pass(bk, t2.bookie_id)
    assert held(bk, t2.bookie_id, lid) == set(range(ENTRIES))
    # The stray's bytes go too: the forced pass compacts T1's entry log holding them (mostly garbage now)
    # instead of skipping it as corrupt, which would keep them for good.
    assert not after_gc.skipped, "T1's GC skipped " + "; ".join(f"{k.path}: {k.reason}" for k in after_gc.skipped)
