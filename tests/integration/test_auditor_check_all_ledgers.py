"""The auditor's check of every ledger (BookKeeper's checkAllLedgers, ``auditorPeriodicCheckInterval``) with real
ZooKeeper and real bookie processes: a ledger whose metadata names a registered bookie that never got its entries
is marked with exactly that bookie, the check's ctime is written, and an auditor started soon after honors it."""
from __future__ import annotations

import dataclasses
import time

from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.replication.auditor import Auditor
from bookie.server.conf import ServerConfiguration
from tests.helpers.replication import marked
from tests.helpers.waiting import wait_for


def closed_ledger(bk, ensemble_hint: int) -> int:
    lh = bk.create_ledger(3, 2, 2, password=b"pw")
    for j in range(6):
        lh.append(b"entry-%d-%d" % (ensemble_hint, j))
    lh.close()
    return lh.ledger_id


def test_check_all_ledgers_marks_the_ledger_naming_a_bookie_without_its_entries(bk_cluster):
    c, bk = bk_cluster(4)
    ledgers = [closed_ledger(bk, i) for i in range(3)]
    victim = ledgers[1]
    with ZKMetadataStore(c.metadata_service_uri) as store:
        # Rewrite the victim's metadata: one member replaced by a registered bookie that never got its entries.
        versioned = store.read_ledger(LedgerId(0, victim))
        (first, ensemble), = versioned.value.ensembles
        stranger = next(b.bookie_id for b in c.bookies if b.bookie_id not in ensemble)
        replaced = (ensemble[0], stranger, *ensemble[2:])
        store.write_ledger(LedgerId(0, victim), dataclasses.replace(versioned.value, ensembles=((first, replaced),)),
                           versioned.version)
        manager = LedgerUnderreplicationManager(store)
        assert manager.get_check_all_ledgers_ctime() == -1
        before_ms = int(time.time() * 1000)
        auditor = Auditor("auditor-a", store, manager, ServerConfiguration(
            {"auditorPeriodicCheckInterval": 1, "auditorPeriodicBookieCheckInterval": 0}), client=lambda: bk).start()
        try:
            wait_for(lambda: auditor.stats.ledger_checks >= 1, "the check of every ledger")
        finally:
            auditor.shutdown()
        assert marked(store) == {victim: (stranger,)}
        assert manager.get_check_all_ledgers_ctime() >= before_ms

        # A participant started soon after does not run it again at once: an audit round runs without it.
        manager.mark_ledger_replicated(victim)
        conf = ServerConfiguration({"auditorPeriodicCheckInterval": 3600, "auditorPeriodicBookieCheckInterval": 0})
        again = Auditor("auditor-b", store, manager, conf, client=lambda: bk).start()
        try:
            again.trigger_audit()
            wait_for(lambda: again.stats.audits >= 1, "an audit round of the restarted auditor")
            assert again.stats.ledger_checks == 0
            assert again._next_ledger_check - time.monotonic() > 3000  # the rest of the hour since the ctime
        finally:
            again.shutdown()
        assert list(manager.list_underreplicated()) == []
