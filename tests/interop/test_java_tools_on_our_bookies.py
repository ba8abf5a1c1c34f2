"""BookKeeper's Java client tool and BookieShell against this project's bookies only (issue 11 test 5).

Three ``bk bookie`` processes (LocalBookKeeper: native protocol on bookiePort, gRPC beside it) on a
root this project initialised; the Java tools find them through their registrations (the
``bookie-rpc`` endpoint), write, recover, verify and read over BookKeeper's v3 protocol, and read
what this project's client wrote over gRPC.
"""
from __future__ import annotations

import re

import pytest

from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk, payload
from tests.helpers.java_tools import summary_of

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)
PASSWORD = b"pw"


@pytest.fixture
def our_cluster(bk_cluster, zookeeper, tmp_path):
    """(LocalBookKeeper of three bookies, this project's client, the Java tools pointed at its root)."""
    c, bk = bk_cluster(3)
    tools = RealBookKeeper(zookeeper.connect_string, str(tmp_path / "tools"), num_bookies=0, root=c.root)
    tools.env["REALBK_LOGLEVEL"] = "INFO"  # BookieShell prints its answers through its logger, at INFO
    return c, bk, tools


def test_the_java_client_writes_recovers_verifies_and_reads_on_our_bookies(our_cluster):
    c, bk, tools = our_cluster
    ledger = tools.client("write", "200", "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2",
                          "--entry-size", "100", "--no-close").stdout.split()[-1]
    # verify opens with recovery (fence reads over the native protocol), then checks the LAC and every entry.
    verified = tools.client("verify", ledger, "200", "--entry-size", "100")
    assert f"OK ledger {ledger}: 200 entries verified" in verified.stdout
    summary = tools.client("read", ledger, "--format", "summary").stdout
    expected = [payload(i, 100) for i in range(200)]
    assert "entries=200 lac=199" in summary and "closed=true" in summary
    assert f"sha256={summary_of(expected)}" in summary
    # This project's client reads the Java-written ledger over gRPC.
    reader = bk.open_ledger(int(ledger), password=b"")
    assert [e.payload for e in reader.read(0, 199)] == expected


def test_bookie_shell_on_our_bookies(our_cluster):
    c, bk, tools = our_cluster
    simple = tools.shell("simpletest", "-ensemble", "3", "-writeQuorum", "2", "-ackQuorum", "2", "-numEntries", "100")
    assert re.search(r"100 entries written to ledger \d+", simple.stderr), simple.stderr[-3000:]

    listed = tools.shell("listbookies", "-rw").stderr
    for b in c.bookies:
        assert f"BookieID:{b.bookie_id}," in listed, listed[-3000:]

    # A ledger this project's client writes over gRPC, for the Java tools to read.
    lh = bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2, password=PASSWORD)
    for i in range(10):
        lh.append(b"ours-%d" % i)
    lh.close()

    ledgers = tools.shell("listledgers").stderr
    assert f"ledgerID: {lh.ledger_id}" in ledgers, ledgers[-3000:]
    metadata = tools.shell("ledgermetadata", "-ledgerid", str(lh.ledger_id)).stderr
    assert ("ensembleSize=3, writeQuorumSize=2, ackQuorumSize=2, state=CLOSED" in metadata
            and "lastEntryId=9" in metadata), metadata[-3000:]
    read = tools.shell("readledger", "-ledgerid", str(lh.ledger_id), "-firstentryid", "0", "-lastentryid", "9").stderr
    # ReadLedgerCommand's "EntrySize" is the entry's LedgerEntry.getLength(): the ledger's length up to it.
    lengths = [int(s) for s in re.findall(rf"Lid={lh.ledger_id}, Eid=\d+, EntrySize=(\d+)", read)]
    assert lengths == [sum(len(b"ours-%d" % j) for j in range(i + 1)) for i in range(10)], read[-3000:]

