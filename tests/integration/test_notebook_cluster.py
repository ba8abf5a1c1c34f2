"""The notebooks' own local cluster (spark_bookkeeper.notebook.cluster_uri without METADATA_SERVICE_URI): started
with its sample data, and stopped by PID when the interpreter that started it dies, even by SIGKILL (as a kernel
that is killed, not shut down)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.helpers.waiting import wait_for

CHILD = """
import json, os, signal
from spark_bookkeeper import notebook
uri = notebook.cluster_uri()
cluster, bk, sample = notebook._local["cluster"], notebook._local["client"], notebook._local["sample"]
print(json.dumps({"uri": uri, "base_dir": cluster.base_dir, "pids": notebook.cluster_pids(cluster),
                  "writable": bk.writable_bookies(), "lost": sample.lost_bookie,
                  "fragments": len(bk.ledger_metadata(sample.two_fragments).ensembles),
                  "open": bk.ledger_metadata(sample.open_ledger).state.name,
                  "listed": [l.ledger_id for l in bk.list_ledgers()], "deleted": sample.deleted,
                  "marked": sorted(sample.underreplicated)}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def alive(pid: int, base_dir: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return base_dir.encode() in f.read()
    except OSError:
        return False


def test_local_cluster_has_sample_data_and_dies_with_its_interpreter():
    env = {k: v for k, v in os.environ.items() if k != "METADATA_SERVICE_URI"}
    child = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    started = json.loads(child.stdout.strip().splitlines()[-1])
    assert started["uri"].startswith("zk://127.0.0.1:")
    assert len(started["pids"]) == 1 + 3  # ZooKeeper and the bookies the sample did not kill
    assert started["deleted"] and not set(started["deleted"]) & set(started["listed"])
    assert started["lost"] not in started["writable"] and len(started["writable"]) == 3
    assert started["fragments"] == 2 and started["open"] == "OPEN" and started["marked"]
    base_dir = started["base_dir"]
    wait_for(lambda: not any(alive(pid, base_dir) for pid in started["pids"]),
             "the watchdog to stop the killed interpreter's ZooKeeper and bookies")
    wait_for(lambda: not os.path.exists(base_dir), f"the watchdog to remove {base_dir}")
