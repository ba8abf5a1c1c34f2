"""Manual recovery and decommission end to end (real ZooKeeper, real bookie processes, the ``bk`` command):
``recover -dr`` changes nothing and lists the ledgers; ``recover`` restores closed ledgers and fences an
open one whose writer is gone (``-sk`` leaves it alone); ``decommissionbookie`` is refused while the bookie
is registered, then waits until a replication worker has moved its ledgers and deletes its cookie."""
from __future__ import annotations


from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerState
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.replication.replication_worker import ReplicationSettings, ReplicationWorker
from tests.helpers.waiting import wait_for
from tests.helpers.replication import CLIENT, assert_fully_replicated, holdings, payloads, unregistered, write
from tests.helpers.shell import bk_shell_run


def closed_ledger(bk: BookKeeper, bookies: list[str], write_quorum: int, data: list[bytes], written: dict | None = None):
    """A closed ledger on ``bookies`` (WQ = AQ = ``write_quorum``) holding ``data``, recorded in ``written``."""
    handle = bk.create_ledger(len(bookies), write_quorum, write_quorum, bookies=bookies, password=b"pw")
    write(handle, data)
    handle.close()
    if written is not None:
        written[handle.ledger_id] = data
    return handle


def test_recover_dry_run_then_recover_closed_and_open_ledgers(bk_cluster):
    cluster, bk = bk_cluster(5, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    data = {}
    striped = closed_ledger(bk, [b[0], b[1], b[2]], 2, payloads("s", 40), data)
    plain = closed_ledger(bk, [b[0], b[3]], 2, payloads("p", 25), data)
    # An open ledger whose writer is gone: its own client, closed without closing the ledger.
    writer = BookKeeper(cluster.metadata_service_uri, CLIENT)
    try:
        open_handle = writer.create_ledger(3, 3, 2, bookies=[b[0], b[1], b[2]], password=b"pw")
        data[open_handle.ledger_id] = payloads("o", 15)
        write(open_handle, data[open_handle.ledger_id])
    finally:
        writer.close()
    untouched = bk.create_ledger(2, 2, 2, bookies=[b[3], b[4]], password=b"pw")
    untouched.append(b"x")
    untouched.close()
    ledgers = sorted(data)
    cluster.kill_bookie(0)
    wait_for(unregistered(bk, b[0]), f"{b[0]} to leave the registration")

    versions = {x: bk.store.read_ledger(LedgerId(0, x)).version for x in ledgers}
    before = holdings(bk, b[1:], ledgers)
    dry = bk_shell_run(cluster, "recover", b[0], "-dr")
    assert dry.returncode == 0, dry.stderr
    for x in ledgers:
        assert f"ledger {LedgerId(0, x)}: would copy" in dry.stdout
    assert f"ledger {LedgerId(0, untouched.ledger_id)}" not in dry.stdout
    assert {x: bk.store.read_ledger(LedgerId(0, x)).version for x in ledgers} == versions
    assert holdings(bk, b[1:], ledgers) == before
    only = bk_shell_run(cluster, "recover", b[0], "-dr", "-l", str(plain.ledger_id))
    assert only.returncode == 0, only.stderr
    assert [line.split(":")[0] for line in only.stdout.splitlines() if ": would copy" in line] == \
        [f"ledger {LedgerId(0, plain.ledger_id)}"]
    assert not bk.ledger_metadata(open_handle.ledger_id).is_closed

    skipping = bk_shell_run(cluster, "recover", b[0], "-sk", "-f")
    assert skipping.returncode == 0, skipping.stderr
    assert f"skipped ledger {LedgerId(0, open_handle.ledger_id)}" in skipping.stdout
    assert bk.ledger_metadata(open_handle.ledger_id).state is LedgerState.OPEN
    for x in (striped.ledger_id, plain.ledger_id):
        assert all(b[0] not in ens for _, ens in bk.ledger_metadata(x).ensembles)
        assert_fully_replicated(bk, x)

    full = bk_shell_run(cluster, "recover", b[0], "-d", "-f")
    assert full.returncode == 0, full.stdout + full.stderr
    assert "1 open ledgers fenced and closed" in full.stdout
    md = bk.ledger_metadata(open_handle.ledger_id)
    assert md.is_closed and md.last_entry_id == len(data[open_handle.ledger_id]) - 1
    for x in ledgers:
        assert all(b[0] not in ens for _, ens in bk.ledger_metadata(x).ensembles)
        assert_fully_replicated(bk, x)
        reader = bk.open_ledger(x, b"pw")
        assert [e.payload for e in reader.read(0, len(data[x]) - 1)] == data[x]
    assert bk.store.read_cookie(b[0]) is None


def test_recover_reports_what_has_no_replica_left(bk_cluster):
    cluster, bk = bk_cluster(3, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    lonely = closed_ledger(bk, [b[0], b[1]], 1, payloads("l", 10))
    cluster.kill_bookie(0)
    wait_for(unregistered(bk, b[0]), f"{b[0]} to leave the registration")
    result = bk_shell_run(cluster, "recover", b[0], "-d", "-f")
    assert result.returncode == 1
    assert f"NOT RECOVERED ledger {LedgerId(0, lonely.ledger_id)}" in result.stdout
    assert "on no surviving replica" in result.stdout
    assert bk.store.read_cookie(b[0]) is not None  # -d only once everything is recovered


def test_decommission_refused_while_registered_then_waits_for_the_ledgers_to_move(bk_cluster):
    cluster, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    handles = [closed_ledger(bk, [b[0], b[1], b[2]], 2, payloads("d0", 20)),
               closed_ledger(bk, [b[2], b[3]], 2, payloads("d1", 20))]
    refused = bk_shell_run(cluster, "decommissionbookie", "-bookieid", b[2])
    assert refused.returncode != 0
    assert f"bookie {b[2]} is registered as writable" in refused.stderr
    assert bk.store.read_cookie(b[2]) is not None

    cluster.kill_bookie(2)
    wait_for(unregistered(bk, b[2]), f"{b[2]} to leave the registration")
    worker_bk = BookKeeper(cluster.metadata_service_uri, CLIENT)
    worker = ReplicationWorker(worker_bk, LedgerUnderreplicationManager(worker_bk.store, "worker"),
                               ReplicationSettings(rw_rereplicate_backoff_ms=200)).start()
    try:
        done = bk_shell_run(cluster, "decommissionbookie", "-bookieid", b[2], "--timeout", "300")
    finally:
        worker.shutdown()
        worker_bk.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no auditor is running: marked 2 ledgers" in done.stdout
    assert bk.store.read_cookie(b[2]) is None
    for h in handles:
        assert all(b[2] not in ens for _, ens in bk.ledger_metadata(h.ledger_id).ensembles)
        assert_fully_replicated(bk, h.ledger_id)
    assert list(LedgerUnderreplicationManager(bk.store).list_underreplicated()) == []
