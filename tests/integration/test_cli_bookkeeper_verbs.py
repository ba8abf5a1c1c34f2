"""The BookKeeper 4.17 shell verbs of issue 33 (item 4) with a real ZooKeeper and real bookie processes:
listfilesondisc, localconsistencycheck and regenerate-interleaved-storage-index-file on a bookie stopped with
SIGTERM, clusterinfo, endpointinfo, forceauditchecks, updateledgers and updateBookieInLedger: each verb's
output, and each refusal (a running bookie's files, a registered bookie's id, a missing or wrong flag)."""
from __future__ import annotations

import base64
import glob
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.replication.auditor_elector import current_auditor
from bookie.server.conf import ServerConfiguration
from bookie.server.index import index_path
from tests.helpers.shell import bk_shell, bk_shell_run
from tests.helpers.waiting import wait_for

DAY_MS = 24 * 3600 * 1000
REGENERATE = "regenerate-interleaved-storage-index-file"


def bk_local(*args: str) -> subprocess.CompletedProcess:
    """``bk shell ARGS`` with no metadata service (the verbs that only read a bookie's directories)."""
    return subprocess.run([sys.executable, "-m", "bookie.cli.main", "shell", *args], capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def closed_ledger(bk, entries: int, password: bytes = b"pw", **placement) -> int:
    """A closed ledger of ``entries`` entries (``entry-<i>``): its id."""
    lh = bk.create_ledger(password=password, **placement)
    for i in range(entries):
        lh.append(b"entry-%d" % i)
    lh.close()
    return lh.ledger_id


def refused(result: subprocess.CompletedProcess, *phrases: str) -> None:
    """The verb failed as ``main`` fails a command: exit 2, its last word one ``bk: ...`` line saying ``phrases``."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("bk: "), result.stderr
    for phrase in phrases:
        assert phrase in line, line


def sections(out: str) -> dict[str, list[str]]:
    """listfilesondisc's output: each ``--------- Printing the list of X ---------`` title with its lines."""
    found: dict[str, list[str]] = {}
    title = None
    for line in out.splitlines():
        header = re.fullmatch(r"--------- Printing the list of (.+) ---------", line)
        if header:
            title = header.group(1)
            found[title] = []
        elif line and title is not None:
            found[title].append(line)
    return found


# -- listfilesondisc --------------------------------------------------------------------------------------------
def test_listfilesondisc_lists_the_journal_entry_log_and_index_files(bk_cluster):
    c, bk = bk_cluster(1)
    ledger = closed_ledger(bk, 5, ensemble_size=1, write_quorum=1, ack_quorum=1)
    c.kill_bookie(0, signal.SIGTERM)  # its index is written and its entry log finished
    b = c.bookies[0]
    journals = {os.path.realpath(p) for p in glob.glob(os.path.join(b.journal_dir, "**", "*.txn"), recursive=True)}
    logs = {os.path.realpath(p) for p in glob.glob(os.path.join(b.ledger_dir, "current", "*.log"))}
    index = os.path.realpath(index_path(b.ledger_dir, LedgerId(0, ledger)))
    assert journals and logs and os.path.exists(index)

    out = bk_local("listfilesondisc", "--conf", b.conf_path, "-txn", "-log", "-idx")
    assert out.returncode == 0, out.stderr
    listed = sections(out.stdout)
    assert list(listed) == ["Journal Files", "EntryLog/Ledger Files", "Index Files"]
    assert set(listed["Journal Files"]) == journals
    assert set(listed["EntryLog/Ledger Files"]) == logs
    assert listed["Index Files"] == [index]

    only_index = bk_local("listfilesondisc", "--conf", b.conf_path, "--index")
    assert list(sections(only_index.stdout)) == ["Index Files"]
    every = bk_local("listfilesondisc", "--conf", b.conf_path)  # no flag: all three
    assert sections(every.stdout) == listed


# -- localconsistencycheck --------------------------------------------------------------------------------------
def test_localconsistencycheck_passes_on_a_healthy_bookie_and_reports_a_removed_entry_log(bk_cluster):
    c, bk = bk_cluster(1)
    b = c.bookies[0]
    ledger = closed_ledger(bk, 10, ensemble_size=1, write_quorum=1, ack_quorum=1)
    refused(bk_shell_run(c, "localconsistencycheck", "--conf", b.conf_path),
            f"bookie {b.bookie_id} is registered", "stop it before checking its storage")

    c.kill_bookie(0, signal.SIGTERM)
    healthy = bk_shell(c, "localconsistencycheck", "--conf", b.conf_path)
    assert healthy.splitlines() == ["=== Performing local consistency check ===",
                                    "Finished localConsistencyCheck: 1 ledgers, 10 entries checked, 0 errors",
                                    "=== Check passed ==="]

    logs = glob.glob(os.path.join(b.ledger_dir, "current", "*.log"))
    assert logs
    for path in logs:  # the planted problem: every entry the index points at is gone
        os.remove(path)
    broken = bk_shell_run(c, "localconsistencycheck", "--conf", b.conf_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    lines = broken.stdout.splitlines()
    assert "Finished localConsistencyCheck: 1 ledgers, 10 entries checked, 10 errors" in lines
    assert "=== Check returned errors: ===" in lines and "=== Check passed ===" not in lines
    problems = [line for line in lines if line.startswith(f"Ledger {ledger}, entry ")]
    assert len(problems) == 10
    for entry_id, line in enumerate(problems):
        assert re.fullmatch(rf"Ledger {ledger}, entry {entry_id}: entry log [0-9a-f]+\.log does not exist "
                            r"\(location [0-9a-f]+:\d+\)", line), line


# -- regenerate-interleaved-storage-index-file ------------------------------------------------------------------
def test_regenerate_index_rebuilds_a_deleted_index_so_the_bookie_serves_the_ledger_again(bk_cluster):
    c, bk = bk_cluster(1)
    b = c.bookies[0]
    ledger = closed_ledger(bk, 50, password=b"secret", ensemble_size=1, write_quorum=1, ack_quorum=1)
    conf = ("--conf", b.conf_path)
    refused(bk_shell_run(c, REGENERATE, *conf, "-l", str(ledger), "-p", "secret"),
            f"bookie {b.bookie_id} is registered", "stop it before rebuilding its index files")

    c.kill_bookie(0, signal.SIGTERM)
    index = index_path(b.ledger_dir, LedgerId(0, ledger))
    os.remove(index)
    refused(bk_shell_run(c, REGENERATE, *conf, "-l", str(ledger), "-p", "wrong"),
            f"the password given is not ledger {ledger}'s", "nothing was rebuilt")
    refused(bk_shell_run(c, REGENERATE, *conf, "-l", str(ledger), "-b", "not base64!"), "is not base64")
    missing_password = bk_shell_run(c, REGENERATE, *conf, "-l", str(ledger))
    assert missing_password.returncode == 2 and "one of the arguments" in missing_password.stderr

    dry = bk_shell(c, REGENERATE, *conf, "--ledgerIds", str(ledger), "-p", "secret", "-d")
    assert f"=== Rebuilding index file for [{ledger}] ===" in dry
    assert "Rebuilding indices done (dry run: nothing written)" in dry
    assert f" {ledger} - Found 50 entries, from 0 to 49" in dry
    assert not os.path.exists(index)

    b64 = base64.b64encode(b"secret").decode()
    unknown = ledger + 1000  # no such ledger: said, and nothing found for it
    out = bk_shell(c, REGENERATE, *conf, "-l", f"{ledger},{unknown}", "-b", b64)
    lines = out.splitlines()
    assert lines[0].startswith(f"ledger {unknown} has no metadata (deleted?)")
    assert lines[1] == f"=== Rebuilding index file for [{ledger}, {unknown}] ==="
    assert re.fullmatch(r"Completed scanning of log [0-9a-f]+\.log -- 1 / \d+", lines[2]), lines[2]
    assert f" {ledger} - Found 50 entries, from 0 to 49" in lines
    assert f" {unknown} - No entries found" in lines
    assert f"wrote {index}" in lines and os.path.exists(index)
    assert re.fullmatch(r"Total time: \d\d:\d\d:\d\d\.\d\d\d", lines[-2]), lines[-2]
    assert lines[-1] == f"-- Done rebuilding index file for [{ledger}, {unknown}] --"
    assert bk_shell_run(c, "localconsistencycheck", *conf).returncode == 0

    c.start_bookie(0)  # it starts on the rebuilt index and serves the ledger's entries from it
    with BookKeeper(c.metadata_service_uri) as fresh, fresh.open_ledger(ledger, b"secret") as reader:
        assert [e.payload for e in reader.read(0, 49)] == [b"entry-%d" % i for i in range(50)]


# -- clusterinfo ------------------------------------------------------------------------------------------------
def test_clusterinfo_counts_bookies_and_says_whether_the_cluster_is_under_replicated(cluster):
    c = cluster(3)
    c.kill_bookie(2, signal.SIGTERM)  # its cookie stays: it is a bookie of the cluster, unavailable
    with ZKMetadataStore(c.metadata_service_uri) as store:
        instance_id = store.instance_id()
        out = bk_shell(c, "clusterinfo").splitlines()
        assert out[0] == "--------- Cluster Info ---------"
        info = json.loads(out[1])
        assert list(info) == ["auditorElected", "auditorId", "clusterUnderReplicated", "ledgerReplicationEnabled",
                              "totalBookiesCount", "writableBookiesCount", "readonlyBookiesCount",
                              "unavailableBookiesCount", "instanceId", "underReplicatedLedgersCount"]
        assert info == {"auditorElected": False, "auditorId": "", "clusterUnderReplicated": False,
                        "ledgerReplicationEnabled": True, "totalBookiesCount": 3, "writableBookiesCount": 2,
                        "readonlyBookiesCount": 0, "unavailableBookiesCount": 1, "instanceId": instance_id,
                        "underReplicatedLedgersCount": 0}
        assert out[1] == json.dumps(info, separators=(",", ":"))  # BookKeeper's compact JSON

        manager = LedgerUnderreplicationManager(store)
        manager.mark_ledger_underreplicated(7, [c.bookies[2].bookie_id])
        manager.disable_ledger_replication()
        info = json.loads(bk_shell(c, "clusterinfo").splitlines()[1])
        assert (info["clusterUnderReplicated"], info["underReplicatedLedgersCount"],
                info["ledgerReplicationEnabled"]) == (True, 1, False)


# -- endpointinfo -----------------------------------------------------------------------------------------------
def test_endpointinfo_prints_what_the_bookie_registered(cluster):
    c = cluster(2)
    b, stopped = c.bookies
    out = bk_shell(c, "endpointinfo", "-b", b.bookie_id).splitlines()
    assert out == [f"BookiedId: {b.bookie_id}", "Properties", "readOnly : false",
                   "Endpoint: bookie", "Protocol: bookie-rpc", f"Address: 127.0.0.1 : {b.port}", "Auth: []",
                   "Extensions: []",
                   "Endpoint: grpc", "Protocol: grpc", f"Address: 127.0.0.1 : {b.grpc_port}", "Auth: []",
                   "Extensions: []"]

    unknown = bk_shell_run(c, "endpointinfo", "--bookieid", "10.0.0.9:3181")
    known = ", ".join(sorted([b.bookie_id, stopped.bookie_id]))
    assert unknown.returncode == 1
    assert unknown.stdout.strip() == f"Bookie 10.0.0.9:3181 does not exist, only [{known}]"

    c.kill_bookie(1, signal.SIGTERM)
    down = bk_shell_run(c, "endpointinfo", "-b", stopped.bookie_id)
    assert down.returncode == 1 and f"Bookie {stopped.bookie_id} is not registered" in down.stdout

    no_flag = bk_shell_run(c, "endpointinfo")
    assert no_flag.returncode == 2 and "-b/-bookieid/--bookieid" in no_flag.stderr


# -- forceauditchecks -------------------------------------------------------------------------------------------
def test_forceauditchecks_sets_the_check_times_back_so_the_next_auditor_runs_the_checks(cluster):
    c = cluster(1)
    refused(bk_shell_run(c, "forceauditchecks"), "at least one check to reset: -calc, -ppc or -rc",
            "nothing was changed")
    with ZKMetadataStore(c.metadata_service_uri) as store:
        manager = LedgerUnderreplicationManager(store)
        manager.set_check_all_ledgers_ctime(int(time.time() * 1000))  # just ran: not due for a week

        before_ms = int(time.time() * 1000)
        out = bk_shell(c, "forceauditchecks", "-calc").splitlines()
        assert re.fullmatch(r"Resetting CheckAllLedgersCTime to : \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+", out[0]), out
        assert out[-1] == "No auditor elected: the next one runs the checks when it starts"
        assert abs(manager.get_check_all_ledgers_ctime() - (before_ms - 21 * DAY_MS)) < 120_000
        assert manager.get_replicas_check_ctime() == -1 and manager.get_placement_policy_check_ctime() == -1

        # An auditor that starts now finds the check 21 days old, more than its week: it checks every ledger at once.
        c.start_autorecovery("auditor-a")
        wait_for(lambda: current_auditor(store) == "auditor-a", "auditor-a elected")
        wait_for(lambda: manager.get_check_all_ledgers_ctime() >= before_ms, "the forced check of every ledger")

        out = bk_shell(c, "forceauditchecks", "--placementpolicycheck", "-rc").splitlines()
        assert [line.split(" to : ")[0] for line in out[:2]] == ["Resetting PlacementPolicyCheckCTime",
                                                                "Resetting ReplicasCheckCTime"]
        assert "(this project's auditor has no placement policy check: a BookKeeper auditor reads that time)" in out
        assert out[-1] == ("An auditor reads these times when it starts: restart the current one (auditor-a) for "
                           "it to run the checks now")
        for ctime in (manager.get_placement_policy_check_ctime(), manager.get_replicas_check_ctime()):
            assert abs(ctime - (int(time.time() * 1000) - 21 * DAY_MS)) < 120_000


# -- updateBookieInLedger ---------------------------------------------------------------------------------------
def test_update_bookie_in_ledger_moves_a_stopped_bookies_id_in_metadata(bk_cluster):
    c, bk = bk_cluster(3)
    first, second, victim = (b.bookie_id for b in c.bookies)
    on_victim = closed_ledger(bk, 5, ensemble_size=3, write_quorum=2, ack_quorum=2)
    elsewhere = closed_ledger(bk, 5, ensemble_size=2, write_quorum=2, ack_quorum=2, bookies=[first, second])
    moved_to = "127.0.0.1:1"
    refused(bk_shell_run(c, "updateBookieInLedger", "-sb", victim, "-db", moved_to),
            f"bookie {victim} is registered", f"stop it before replacing it by {moved_to} in ledger metadata")
    refused(bk_shell_run(c, "updateBookieInLedger", "-sb", victim, "-db", victim), "can't be the same")

    c.kill_bookie(2, signal.SIGTERM)
    refused(bk_shell_run(c, "updateBookieInLedger", "-sb", victim, "-db", moved_to, "-s", "0"),
            "Invalid updatespersec 0, should be > 0")
    before = {ledger: bk.ledger_metadata(ledger) for ledger in (on_victim, elsewhere)}
    out = bk_shell(c, "updateBookieInLedger", "-sb", victim, "-db", moved_to, "-s", "100", "-v")
    assert f"Updated ledger {on_victim} metadata, replacing {victim} with {moved_to}" in out
    assert f"Updated ledger {elsewhere} metadata" not in out
    assert out.splitlines()[-1] == "Total number of ledgers issued=2 updated=1"
    after = bk.ledger_metadata(on_victim)
    assert after.ensembles == tuple((entry, tuple(moved_to if m == victim else m for m in members))
                                    for entry, members in before[on_victim].ensembles)
    assert after.last_entry_id == 4 and after.is_closed
    assert bk.ledger_metadata(elsewhere) == before[elsewhere]

    # -l: only the first ledger listed (the lowest id) is looked at; the id goes back where it was.
    back = bk_shell(c, "updateBookieInLedger", "--srcBookie", moved_to, "--destBookie", victim, "-l", "1")
    assert back.splitlines()[-1] == "Total number of ledgers issued=1 updated=1"
    assert bk.ledger_metadata(on_victim).ensembles == before[on_victim].ensembles


# -- updateledgers ----------------------------------------------------------------------------------------------
def test_updateledgers_replaces_the_bookies_ip_id_by_its_host_name_id(bk_cluster, tmp_path):
    c, bk = bk_cluster(1)
    b = c.bookies[0]
    ledger = closed_ledger(bk, 3, ensemble_size=1, write_quorum=1, ack_quorum=1)
    by_name = tmp_path / "by-name.conf"
    by_name.write_text(pathlib.Path(b.conf_path).read_text() + "useHostNameAsBookieID=true\n")
    name_id = ServerConfiguration.load(str(by_name)).bookie_id
    if name_id == b.bookie_id:
        pytest.skip("127.0.0.1 has no host name on this machine: both ids are the same")

    refused(bk_shell_run(c, "updateledgers", "--conf", b.conf_path, "-b", "hostname"),
            "-bookieId hostname expects useHostNameAsBookieID=true")
    refused(bk_shell_run(c, "updateledgers", "--conf", str(by_name), "-b", "hostname"),
            f"bookie {b.bookie_id} is registered")  # the id being replaced still serves the ledger

    c.kill_bookie(0, signal.SIGTERM)
    out = bk_shell(c, "updateledgers", "--conf", str(by_name), "-b", "hostname", "-v", "true", "-p", "1")
    assert f"Updated ledger {ledger} metadata, replacing {b.bookie_id} with {name_id}" in out
    assert out.splitlines()[-1] == "Total number of ledgers issued=1 updated=1"
    assert bk.ledger_metadata(ledger).ensembles == ((0, (name_id,)),)

    ignored = bk_shell_run(c, "updateledgers", "--conf", b.conf_path, "-b", "ip", "-p", "5")
    assert ignored.returncode == 0, ignored.stderr
    assert "Ignoring option 'printprogress', this is applicable when 'verbose' is true" in ignored.stderr
    assert ignored.stdout.splitlines()[-1] == "Total number of ledgers issued=1 updated=1"
    assert bk.ledger_metadata(ledger).ensembles == ((0, (b.bookie_id,)),)  # back to the IP id
