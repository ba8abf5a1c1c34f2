"""`bk` as BookKeeper operators type it: listbookies' format and -h, readledger past a ledger's end, and Ctrl-C in
the commands that write (a flag the loop checks: what was sent is acknowledged, the ledgers end closed)."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from bookie.meta.ledger_metadata import LedgerState
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.util.processes import stop_process
from tests.helpers.shell import bk_shell, bk_shell_run
from tests.helpers.waiting import wait_for


@pytest.fixture(scope="module")
def ledger_of_30(shared_cluster):
    from bookie.client import BookKeeper
    with BookKeeper(shared_cluster.metadata_service_uri) as bk:
        lh = bk.create_ledger(3, 2, 2, password=b"pw")
        lh.append_batch([b"e%d" % i for i in range(30)]).result(60)
        lh.close()
    return lh.ledger_id


def test_listbookies_prints_bookkeepers_lines_and_h_means_hostnames(shared_cluster):
    out = bk_shell(shared_cluster, "listbookies", "-rw", "-h")
    ids = sorted(b.bookie_id for b in shared_cluster.bookies)
    assert out.splitlines()[0] == "ReadWrite Bookies :"
    lines = sorted(out.splitlines()[1:])
    assert [line.split(",")[0] for line in lines] == [f"BookieID:{i}" for i in ids]
    assert all(", IP:127.0.0.1, Port:" in line and ", Hostname:" in line for line in lines)
    default = bk_shell(shared_cluster, "listbookies")  # no flag: BookKeeper's three lists, the empty one left out
    assert "ReadWrite Bookies :" in default and "All Bookies :" in default and "Readonly" not in default
    assert "Hostname" not in default


def test_readledger_past_the_end_prints_what_there_is_and_says_where_it_ends(shared_cluster, ledger_of_30):
    result = bk_shell_run(shared_cluster, "readledger", "-l", str(ledger_of_30), "-fe", "28", "-le", "40000", "-m")
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("e")] == ["e28", "e29"]
    assert f"ledger {ledger_of_30} ends at entry 29 (closed): no entries past it" in result.stderr


def interrupt_after_first_ledger(uri: str, *command: str) -> tuple[subprocess.CompletedProcess, list]:
    """Run ``bk COMMAND -u URI``, SIGINT it once it has created a ledger; its result and the ledgers it made."""
    with ZKMetadataStore(uri) as store:
        before = set(store.iterate_ledgers())
        proc = subprocess.Popen([sys.executable, "-m", "bookie.cli.main", *command, "-u", uri], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            wait_for(lambda: set(store.iterate_ledgers()) - before or proc.poll() is not None,
                     f"{command} to create its ledger")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            stop_process(proc)
        made = sorted(set(store.iterate_ledgers()) - before)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), \
            [store.read_ledger(ledger).value for ledger in made]


def test_ctrl_c_in_bench_write_keeps_its_results_and_closes_its_ledgers(shared_cluster):
    result, ledgers = interrupt_after_first_ledger(shared_cluster.metadata_service_uri, "bench", "write",
                                                   "--time", "600", "--ledgers", "2")
    assert result.returncode == 130, result.stderr
    assert "interrupted after" in result.stdout and "entries/s" in result.stdout
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    assert len(ledgers) == 2 and all(md.state is LedgerState.CLOSED for md in ledgers)


def test_ctrl_c_in_simpletest_closes_its_ledger(shared_cluster):
    result, ledgers = interrupt_after_first_ledger(shared_cluster.metadata_service_uri, "shell", "simpletest",
                                                   "-n", "100000000")
    assert result.returncode == 130, result.stderr
    assert "interrupted: ledger" in result.stdout and "of 100000000 entries; nothing was read back" in result.stdout
    assert "Traceback" not in result.stderr
    assert len(ledgers) == 1 and ledgers[0].state is LedgerState.CLOSED
