"""BookKeeper's own BookieShell reads what this project's AutoRecovery writes in ZooKeeper (issue 13):
``whoisauditor`` (the election), ``listunderreplicated`` (the urL records with their missing replicas) and
``lostbookierecoverydelay -get``. Our bookies and a ``bk autorecovery`` process on a root this project laid
out; the real BookKeeper 4.17.4 tools pointed at it."""
from __future__ import annotations

import pytest

from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.replication.auditor_elector import current_auditor
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk
from tests.helpers.replication import first_ledger_check_done
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)


def test_bookie_shell_reads_what_our_autorecovery_writes(bk_cluster, zookeeper, tmp_path):
    # Three bookies: a lost one has no replacement, so the marks stay while the AutoRecovery process's
    # replication worker tries and backs off, and the tools see them.
    c, bk = bk_cluster(3)
    ensembles = {}
    for i in range(4):
        lh = bk.create_ledger(3, 2, 2, password=b"pw")
        lh.append_batch([b"x%d" % j for j in range(10)]).result()
        lh.close()
        ensembles[lh.ledger_id] = bk.ledger_metadata(lh.ledger_id).last_ensemble
    victim = c.bookies[2]
    on_victim = sorted(lid for lid, ens in ensembles.items() if victim.bookie_id in ens)
    tools = RealBookKeeper(zookeeper.connect_string, str(tmp_path / "tools"), num_bookies=0, root=c.root)
    tools.env["REALBK_LOGLEVEL"] = "INFO"  # BookieShell prints its answers through its logger, at INFO
    with ZKMetadataStore(c.metadata_service_uri) as store:
        LedgerUnderreplicationManager(store).set_lost_bookie_recovery_delay(0)
        c.start_autorecovery("127.0.0.1-auditor")
        wait_for(lambda: current_auditor(store) == "127.0.0.1-auditor", "our auditor elected")
        wait_for(lambda: first_ledger_check_done(store), "the auditor's first check of every ledger")
        c.kill_bookie(victim.index)
        manager = LedgerUnderreplicationManager(store)
        wait_for(lambda: sorted(u.ledger.ledger_id for u in manager.list_underreplicated()) == on_victim,
                 f"ledgers {on_victim} marked")
    who = tools.shell("whoisauditor")
    assert "127.0.0.1-auditor" in who.stdout + who.stderr
    listed = tools.shell("listunderreplicated", "-printmissingreplica")
    out = listed.stdout + listed.stderr
    for lid in on_victim:
        assert str(lid) in out
    assert victim.bookie_id in out
    delay = tools.shell("lostbookierecoverydelay", "-get")
    assert "LostBookieRecoveryDelay value in ZK: 0" in delay.stdout + delay.stderr
