"""The auditor election and the auditor with real ZooKeeper, real bookie processes and real ``bk autorecovery``
processes (issue 13): takeover after SIGKILL, a lost bookie's ledgers marked with the right missing replica,
a bookie back within lostBookieRecoveryDelay, disable/enable, and the shell verbs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.replication.auditor_elector import current_auditor
from bookie.util.processes import stop_process
from tests.helpers.replication import first_ledger_check_done, logged, marked
from tests.helpers.shell import bk_shell
from tests.helpers.waiting import wait_for


def write_ledgers(bk, count: int = 6):
    """Closed ledgers E=3 WQ=2, a few entries each; their ids and ensembles. On three bookies a lost one has
    no replacement: the ledgers stay marked (each participant's ReplicationWorker tries and backs off), so a
    test sees what the auditor marked."""
    ensembles = {}
    for i in range(count):
        lh = bk.create_ledger(3, 2, 2, password=b"pw")
        for j in range(5):
            lh.append(b"entry-%d-%d" % (i, j))
        lh.close()
        ensembles[lh.ledger_id] = set(bk.ledger_metadata(lh.ledger_id).last_ensemble)
    return ensembles


def test_election_takeover_after_sigkill(cluster):
    c = cluster(1)
    first = c.start_autorecovery("auditor-a")
    with ZKMetadataStore(c.metadata_service_uri) as store:
        wait_for(lambda: current_auditor(store) == "auditor-a", "auditor-a elected")
        second = c.start_autorecovery("auditor-b")
        wait_for(lambda: len(store.node_children("underreplication/auditorelection")) == 2, "auditor-b's vote")
        assert bk_shell(c, "whoisauditor").strip() == "Auditor: auditor-a"
        stop_process(first, sig=signal.SIGKILL)
        wait_for(lambda: current_auditor(store) == "auditor-b", "auditor-b taking over once a's session expired")
        assert bk_shell(c, "whoisauditor").strip() == "Auditor: auditor-b"
        # BookKeeper's whoisauditor also finds the auditor's vote in the election node's data
        assert store.read_node("underreplication/auditorelection").value == b'bookieId: "auditor-b"\n'
        # SIGTERM stops it cleanly: it withdraws its vote at once (no session expiry to wait for)
        assert stop_process(second) == 0
        assert store.node_children("underreplication/auditorelection") == []


def test_lost_bookie_marked_after_the_delay_with_the_missing_replica(bk_cluster):
    c, bk = bk_cluster(3)
    ensembles = write_ledgers(bk)
    victim = next(iter(ensembles[min(ensembles)]))
    on_victim = {lid for lid, ens in ensembles.items() if victim in ens}
    with ZKMetadataStore(c.metadata_service_uri) as store:
        LedgerUnderreplicationManager(store).set_lost_bookie_recovery_delay(1)
        c.start_autorecovery("auditor-a")
        wait_for(lambda: current_auditor(store) == "auditor-a", "an auditor")
        wait_for(lambda: first_ledger_check_done(store), "the auditor's first check of every ledger")
        c.kill_bookie(next(b.index for b in c.bookies if b.bookie_id == victim))
        wait_for(lambda: set(marked(store)) == on_victim, f"ledgers {sorted(on_victim)} marked")
        assert all(replicas == (victim,) for replicas in marked(store).values())
        listing = bk_shell(c, "listunderreplicated", "-pmr")
        assert all(str(lid) in listing for lid in on_victim) and f"Missing replicas: {victim}" in listing
        assert bk_shell(c, "listunderreplicated", "-c").strip() == f"Number of under-replicated ledgers: {len(on_victim)}"
        assert bk_shell(c, "listunderreplicated", "-emr", victim).strip() == "No under-replicated ledgers found"


def test_bookie_back_within_the_delay_is_not_marked(bk_cluster):
    c, bk = bk_cluster(3)
    ensembles = write_ledgers(bk, 8)
    back, lost = c.bookies[0], c.bookies[1]
    with ZKMetadataStore(c.metadata_service_uri) as store:
        assert bk_shell(c, "lostbookierecoverydelay", "-set", "3600").strip() == \
            "Successfully set LostBookieRecoveryDelay value to: 3600"
        assert bk_shell(c, "lostbookierecoverydelay", "-get").strip() == "LostBookieRecoveryDelay value: 3600"
        c.start_autorecovery("auditor-a")
        wait_for(lambda: current_auditor(store) == "auditor-a", "an auditor")
        wait_for(lambda: first_ledger_check_done(store), "the auditor's first check of every ledger")
        c.kill_bookie(back.index)
        wait_for(lambda: store.registration_session(back.bookie_id) is None, "the killed bookie's registration gone")
        c.start_bookie(back.index)
        # Another bookie lost, and the delay set to 0: the audit that marks it runs after the first came back.
        c.kill_bookie(lost.index)
        wait_for(lambda: store.registration_session(lost.bookie_id) is None, "the second bookie's registration gone")
        bk_shell(c, "lostbookierecoverydelay", "-set", "0")
        expected = {lid for lid, ens in ensembles.items() if lost.bookie_id in ens}
        wait_for(lambda: set(marked(store)) == expected, "the second bookie's ledgers marked")
        assert all(replicas == (lost.bookie_id,) for replicas in marked(store).values())


def test_disabled_marks_nothing_until_enabled(bk_cluster):
    c, bk = bk_cluster(3)
    ensembles = write_ledgers(bk)
    victim = c.bookies[2]
    with ZKMetadataStore(c.metadata_service_uri) as store:
        assert bk_shell(c, "autorecovery", "-disable").strip() == "AutoRecovery is disabled"
        proc = c.start_autorecovery("auditor-a")
        wait_for(lambda: current_auditor(store) == "auditor-a", "an auditor")  # disabled: no check of every ledger
        c.kill_bookie(victim.index)
        log_path = os.path.join(c.base_dir, "autorecovery-auditor-a.log")
        wait_for(lambda: logged(log_path, f"lost bookies {victim.bookie_id} are marked once it is enabled"),
                 "the auditor seeing the lost bookie while disabled")
        bk_shell(c, "triggeraudit")
        wait_for(lambda: open(log_path).read().count("are marked once it is enabled") >= 2, "the triggered audit")
        assert marked(store) == {}
        assert proc.poll() is None
        assert bk_shell(c, "queryautorecoverystatus").strip() == "No ledgers are being re-replicated"
        assert bk_shell(c, "autorecovery", "-enable").strip() == "AutoRecovery is enabled"
        expected = {lid for lid, ens in ensembles.items() if victim.bookie_id in ens}
        wait_for(lambda: set(marked(store)) == expected, "the ledgers marked once enabled")


def test_in_bookie_autorecovery_the_auditors_own_bookie_killed(bk_cluster):
    """autoRecoveryDaemonEnabled=true: every bookie votes and runs a replication worker; SIGKILL the auditor's
    bookie: another bookie becomes the auditor, marks the dead one's ledgers, and the workers bring every one
    of them back to full replication on the three bookies left (then nothing is marked)."""
    c, bk = bk_cluster(4, autoRecoveryDaemonEnabled=True)
    ensembles = write_ledgers(bk)
    with ZKMetadataStore(c.metadata_service_uri) as store:
        wait_for(lambda: len(store.node_children("underreplication/auditorelection")) == 4, "every bookie's vote")
        auditor = current_auditor(store)
        assert auditor in {b.bookie_id for b in c.bookies}
        c.kill_bookie(next(b.index for b in c.bookies if b.bookie_id == auditor))
        wait_for(lambda: current_auditor(store) not in (None, auditor), "another bookie's auditor")
        on_dead = {lid for lid, ens in ensembles.items() if auditor in ens}
        assert on_dead

        def replicated() -> bool:
            return not marked(store) and not any(
                auditor in bookies for lid in on_dead for _, bookies in bk.ledger_metadata(lid).ensembles)
        wait_for(replicated, "the dead auditor's ledgers re-replicated by the bookies' workers", timeout=180)
        for lid in on_dead:
            rh = bk.open_ledger(lid, password=b"pw", recovery=False)
            i = sorted(ensembles).index(lid)
            assert [e.payload for e in rh.read(0, 4)] == [b"entry-%d-%d" % (i, j) for j in range(5)]


def test_bk_local_autorecovery_elects_an_auditor(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "bookie.cli.main", "local", "--bookies", "2", "--zk-port", "0",
                             "--dir", str(tmp_path / "cluster"), "--autorecovery"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "press Ctrl-C" in line:
                break
        uri = next(line.split()[-1] for line in lines if line.startswith("metadataServiceUri:"))
        bookies = {line.split()[1] for line in lines if line.startswith("bookie ")}
        with ZKMetadataStore(uri) as store:
            wait_for(lambda: current_auditor(store) in bookies, f"one of {sorted(bookies)} elected auditor")
    finally:
        assert stop_process(proc) == 0
