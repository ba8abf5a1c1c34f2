"""AutoRecovery end to end (issue 13): real ZooKeeper, real bookie processes and real ``bk autorecovery``
processes. A bookie holding many ledgers (striped and not, several fragments, a dead writer's open ledger and
a live writer's) is SIGKILLed and everything comes back to full replication; the auditor's process and a
worker stopped mid-fragment are SIGKILLed and the others finish the work."""
from __future__ import annotations

import os
import signal
import threading

from bookie.client import BookKeeper
from bookie.meta.ledger_metadata import LedgerState
from bookie.meta.ledger_underreplication_manager import COPYING, LedgerUnderreplicationManager
from bookie.replication.auditor_elector import current_auditor
from bookie.util.processes import stop_process
from tests.helpers.waiting import wait_for
from tests.helpers.replication import (CLIENT, assert_fully_replicated, assert_restored, first_ledger_check_done, logged,
                                      marked, names, payloads, write)

GRACE_MS = 4000  # openLedgerRereplicationGracePeriod: the dead writer's ledger is fenced after it
AUTORECOVERY = {"zkTimeout": 2000, "lostBookieRecoveryDelay": 0, "rwRereplicateBackoffMs": 200,
                "lockReleaseOfFailedLedgerGracePeriod": 2000, "openLedgerRereplicationGracePeriod": GRACE_MS}


class LiveWriter(threading.Thread):
    """Appends small batches until stopped; every append must be acknowledged."""

    def __init__(self, handle):
        super().__init__(name="live-writer", daemon=True)
        self.handle = handle
        self.acked: list[bytes] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        batch = 0
        try:
            while not self.stop.is_set():
                data = payloads(f"live{batch}", 5)
                for future in [self.handle.append_async(p) for p in data]:
                    future.result(timeout=60)
                self.acked.extend(data)
                batch += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def test_a_lost_bookies_ledgers_come_back_with_real_autorecovery(bk_cluster):
    c, bk = bk_cluster(5, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    written: dict[int, list[bytes]] = {}
    shapes = [(3, 2, [b[0], b[1], b[2]]), (3, 3, [b[0], b[1], b[3]]), (4, 2, [b[0], b[1], b[2], b[3]])] * 2
    handles = [bk.create_ledger(e, wq, 2, bookies=ens, password=b"pw") for e, wq, ens in shapes]
    for i, h in enumerate(handles):
        written[h.ledger_id] = payloads(f"c{i}", 40)
        write(h, written[h.ledger_id][:20])
    c.kill_bookie(1)  # mid-write: every ledger gets a second fragment (b1 replaced), b0 in both
    for h in handles:
        write(h, written[h.ledger_id][20:])
        h.close()
        assert len(bk.ledger_metadata(h.ledger_id).ensembles) >= 2
    c.start_bookie(1)

    dead_bk = BookKeeper(c.metadata_service_uri, CLIENT)
    dead = dead_bk.create_ledger(3, 2, 2, bookies=[b[0], b[2], b[3]], password=b"pw")
    written[dead.ledger_id] = payloads("dead", 30)
    write(dead, written[dead.ledger_id])
    dead_bk.close()  # the writer is gone without closing its ledger
    live_bk = BookKeeper(c.metadata_service_uri, CLIENT)
    live = live_bk.create_ledger(3, 2, 2, bookies=[b[0], b[2], b[3]], password=b"pw")
    writer = LiveWriter(live)

    try:
        writer.start()
        wait_for(lambda: len(writer.acked) >= 20, "the live writer's first appends")
        for participant in ("ar-a", "ar-b"):
            c.start_autorecovery(participant, **AUTORECOVERY)
        wait_for(lambda: current_auditor(bk.store) in ("ar-a", "ar-b"), "an auditor")
        wait_for(lambda: first_ledger_check_done(bk.store), "the auditor's first check of every ledger")
        c.kill_bookie(0)

        def restored() -> bool:
            return (not marked(bk.store)
                    and bk.ledger_metadata(dead.ledger_id).state is LedgerState.CLOSED
                    and not any(names(bk, lid, b[0]) for lid in [*written, live.ledger_id]))
        wait_for(restored, "every ledger re-replicated off the killed bookie and the dead writer's fenced", timeout=180)
        # The live writer outlived the grace period (the dead writer's ledger was fenced only after it) unfenced.
        assert writer.error is None and writer.is_alive()
        assert bk.ledger_metadata(live.ledger_id).state is LedgerState.OPEN
    finally:
        writer.stop.set()
        writer.join(timeout=120)
    assert writer.error is None, f"the live writer failed: {writer.error!r}"
    live.close()
    live_bk.close()
    written[live.ledger_id] = writer.acked
    assert_restored(bk, written, b[0])
    assert bk.ledger_metadata(dead.ledger_id).last_entry_id == len(written[dead.ledger_id]) - 1


def test_auditor_and_a_worker_mid_fragment_killed_others_finish(bk_cluster):
    # Four bookies, ensembles of three: the one replacement for b0 is the fourth bookie, whoever copies,
    # so a copy restarted by another worker lands on the same bookie (same bytes again, nothing extra).
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    written: dict[int, list[bytes]] = {}
    for i, (e, wq, ens) in enumerate([(3, 2, [b[0], b[1], b[2]]), (3, 3, [b[0], b[2], b[3]]),
                                      (3, 2, [b[0], b[1], b[3]])] * 2):
        h = bk.create_ledger(e, wq, 2, bookies=ens, password=b"pw")
        written[h.ledger_id] = [p * 40 for p in payloads(f"w{i}", 600)]
        for future in [h.append_async(p) for p in written[h.ledger_id]]:
            future.result(timeout=60)
        h.close()
    settings = {**AUTORECOVERY, "rereplicationEntryBatchSize": 5}
    manager = LedgerUnderreplicationManager(bk.store)
    manager.disable_ledger_replication()
    a = c.start_autorecovery("ar-a", **settings)
    wait_for(lambda: current_auditor(bk.store) == "ar-a", "ar-a elected")
    c.kill_bookie(0)  # disabled: the auditor's check of every ledger is skipped, nothing can race the kill
    wait_for(lambda: logged(os.path.join(c.base_dir, "autorecovery-ar-a.log"),
                            f"lost bookies {b[0]} are marked once it is enabled"), "ar-a seeing the lost bookie")
    stop_process(a, sig=signal.SIGKILL)  # the auditor dies with b0's ledgers unmarked
    assert marked(bk.store) == {}

    w = c.start_autorecovery("ar-b", **settings)
    wait_for(lambda: current_auditor(bk.store) == "ar-b", "ar-b taking over once ar-a's session expired")
    manager.enable_ledger_replication()

    def copying_by_b() -> int | None:
        for lid in marked(bk.store):
            state = manager.get_state(lid)
            if state is not None and state.state == COPYING and state.by == "ar-b":
                return lid
        return None
    def frozen_copying() -> bool:
        """SIGSTOP ar-b once a state node says it copies; if it moved on in between, let it run on."""
        if copying_by_b() is None:
            return False
        os.kill(w.pid, signal.SIGSTOP)  # frozen mid-fragment: its lock and state stay as they are
        if copying_by_b() is None:
            os.kill(w.pid, signal.SIGCONT)
            return False
        return True
    wait_for(frozen_copying, "ar-b frozen while copying a fragment")
    frozen = copying_by_b()
    assert frozen is not None and manager.lock_holder(frozen) == "ar-b"
    stop_process(w, sig=signal.SIGKILL)

    c.start_autorecovery("ar-c", **settings)
    wait_for(lambda: current_auditor(bk.store) == "ar-c", "ar-c taking over")
    wait_for(lambda: not marked(bk.store) and not any(names(bk, lid, b[0]) for lid in written),
             "ar-c finishing the work", timeout=180)
    assert_restored(bk, written, b[0])


def test_a_scoped_ledger_on_a_lost_bookie_is_marked_apart_and_re_replicated(bk_cluster):
    """128-bit (BP-35) ledgers have no place in BookKeeper's urL%010d tree: the auditor marks them in the scoped
    tree (``listunderreplicated`` shows the qualified name), and a ``bk autorecovery`` worker brings them back
    like any other ledger; a scope-0 ledger with the same 64-bit id half stays a different ledger."""
    c, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in c.bookies]
    scoped = bk.create_ledger(3, 2, 2, bookies=b[:3], password=b"pw", scope_id=0x5C09E)
    plain = bk.create_ledger(3, 2, 2, bookies=b[:3], password=b"pw")
    written = {scoped.ledger: payloads("scoped", 40), plain.ledger: payloads("plain", 40)}
    for handle in (scoped, plain):
        write(handle, written[handle.ledger])
        handle.close()
    c.start_autorecovery("ar-s", **AUTORECOVERY)
    wait_for(lambda: current_auditor(bk.store) == "ar-s", "an auditor")
    wait_for(lambda: first_ledger_check_done(bk.store), "the auditor's first check of every ledger")
    c.kill_bookie(0)
    wait_for(lambda: not marked(bk.store) and not any(names(bk, ledger, b[0]) for ledger in written),
             "both ledgers re-replicated off the killed bookie", timeout=180)
    for ledger, data in written.items():
        assert_fully_replicated(bk, ledger)
        with bk.open_ledger(ledger, b"pw", recovery=False) as reader:
            assert [e.payload for e in reader.read(0, len(data) - 1)] == data
    # The worker re-replicated it as a marked ledger (it works only on ledgers it locked in the manager's trees).
    log_text = open(os.path.join(c.base_dir, "autorecovery-ar-s.log")).read()
    assert f"ledger {scoped.ledger.qualified_name} is fully replicated again" in log_text
