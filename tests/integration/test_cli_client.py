"""`bk shell` ledger and bookie commands, and `bk bench`, as an operator runs them."""
from __future__ import annotations

import subprocess
import sys

from bookie.client import BookKeeper


def bk(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", *args], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    if ok:
        assert out.returncode == 0, out.stderr
    return out


def test_ledger_commands(cluster):
    c = cluster(3)
    uri = ["-u", c.metadata_service_uri]
    assert "1000 entries written to ledger" in bk("shell", "simpletest", *uri, "-n", "1000").stdout
    with BookKeeper(c.metadata_service_uri) as client:
        lh = client.create_ledger(3, 2, 2, password=b"pw", scope_id=5, custom_metadata={"owner": b"etl"})
        for i in range(5):
            lh.append(b"hello %d" % i)
        lh.close()
        name = lh.ledger.qualified_name
    assert "ledgerID: 0" in bk("shell", "listledgers", *uri).stdout
    listing = bk("shell", "listledgers", *uri, "--all-scopes", "-m").stdout
    assert name in listing and "state: CLOSED" in listing and "customMetadata owner: b'etl'" in listing
    meta = bk("shell", "ledgermetadata", *uri, "--ledger-qualified-name", name).stdout
    assert "lastEntryId: 4" in meta and "ensemble from entry 0:" in meta
    assert meta == bk("shell", "ledgermetadata", *uri, "-l", str(lh.ledger_id), "--ledger-scope-id", "5").stdout
    read = bk("shell", "readledger", *uri, "--ledger-qualified-name", name, "-fe", "1", "-le", "2", "-m").stdout
    assert "Eid=1" in read and "hello 2" in read and "Eid=3" not in read
    refused = bk("shell", "deleteledger", *uri, "--ledger-qualified-name", name, ok=False)
    assert refused.returncode == 2 and "pass -f" in refused.stderr
    bk("shell", "deleteledger", *uri, "--ledger-qualified-name", name, "-f")
    assert name not in bk("shell", "listledgers", *uri, "--all-scopes").stdout
    missing = bk("shell", "ledgermetadata", *uri, "-l", "424242", ok=False)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    info = bk("shell", "bookieinfo", *uri).stdout
    assert info.count("Free:") == 3
    sanity = bk("shell", "bookiesanity", *uri, "-b", c.bookies[1].bookie_id).stdout
    assert f"succeeded on {c.bookies[1].bookie_id}" in sanity


def test_bench_commands(cluster):
    c = cluster(3)
    uri = ["-u", c.metadata_service_uri]
    write = bk("bench", "write", *uri, "--time", "1", "--throttle", "500").stdout
    assert "entries/s" in write and "p99" in write
    ledger = write.rsplit("(ledgers ", 1)[1].split(")")[0]
    read = bk("bench", "read", *uri, "-l", ledger).stdout
    assert f"of ledger {ledger}" in read and "entries/s" in read
