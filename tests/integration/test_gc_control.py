"""Control and visibility of a bookie's garbage collection: the GarbageCollection request and
`bk shell gc` (force a pass and wait for it, report, suspend / resume compaction), as an operator
and the audit jobs use them. Real ZooKeeper and bookie processes."""
from __future__ import annotations

import subprocess
import sys

from bookie.client import BookKeeper
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status

Action = pb.GarbageCollectionRequest
# Logs roll often, and no pass runs unless forced.
SETTINGS = {"entryLogSizeLimit": 256 << 10, "gcWaitTime": 3_600_000}


def bk_shell(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", "shell", *args], capture_output=True, text=True,
                         timeout=300, stdin=subprocess.DEVNULL)
    if ok:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def write_ledgers(bk: BookKeeper, count: int, entries: int = 256) -> list:
    handles = []
    for _ in range(count):
        lh = bk.create_ledger(1, 1, 1, password=b"pw")
        lh.append_batch([bytes(1024)] * entries).result(60)
        lh.close()
        handles.append(lh)
    return handles


def test_a_forced_pass_is_reported_with_what_it_reclaimed(cluster):
    c = cluster(1, **SETTINGS)
    bookie = c.bookies[0].bookie_id
    with BookKeeper(c.metadata_service_uri) as bk:
        ledgers = write_ledgers(bk, 6)  # 6 x 256 KiB: several finished entry logs
        gc = bk.bookie_client(bookie)
        before = gc.garbage_collection()
        assert before.status == status.EOK and before.bytesReclaimed == 0
        for lh in ledgers[:3]:
            bk.delete_ledger(lh.ledger_id)

        out = bk_shell("gc", "-u", c.metadata_service_uri, "--bookie", bookie).stdout
        after = gc.garbage_collection()
    assert after.passes >= 1 and after.ledgersDeleted == 3 and after.bytesReclaimed > 0
    assert f"{bookie}: {after.passes} GC passes" in out
    assert f"this pass: {after.bytesReclaimed:,} bytes reclaimed, 3 ledgers" in out
    assert after.entryLogs and all(u.ledgerCount > 0 for u in after.entryLogs)
    assert "entry logs:" in bk_shell("gc", "-u", c.metadata_service_uri, "--status").stdout


def test_compaction_is_suspended_and_resumed_by_request(cluster):
    c = cluster(1, **SETTINGS)
    uri = c.metadata_service_uri
    bookie = c.bookies[0].bookie_id
    out = bk_shell("gc", "-u", uri, "--suspend", "minor").stdout
    assert "suspended: minor compaction" in out
    with BookKeeper(uri) as bk:
        state = bk.bookie_client(bookie).garbage_collection()
        assert state.minorCompactionSuspended and not state.majorCompactionSuspended
        state = bk.bookie_client(bookie).garbage_collection(Action.SUSPEND, major=True)
        assert state.majorCompactionSuspended and state.minorCompactionSuspended
        bk_shell("gc", "-u", uri, "--resume", "all")
        state = bk.bookie_client(bookie).garbage_collection()
        assert not state.majorCompactionSuspended and not state.minorCompactionSuspended
        refused = bk.bookie_client(bookie).garbage_collection(Action.SUSPEND)
        assert refused.status == status.EBADREQ and "set major, minor or both" in refused.message
