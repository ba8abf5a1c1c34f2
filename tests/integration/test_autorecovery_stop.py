"""`bk autorecovery` stops on SIGTERM even after its ZooKeeper has gone: once zkTimeout has passed, its
sessions are closed under the calls that would retry for good (the locks and the auditor vote are
ephemeral and go with them), instead of the process hanging until someone sends SIGKILL. And no thread
dies of the lost connection meanwhile (the auditor elected as ZooKeeper went used to kill the election
thread with a bare kazoo error)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from bookie.testing.zookeeper_server import ZooKeeperServer
from tests.procs import child_env, kill, spawn_python


def test_sigterm_stops_autorecovery_whose_zookeeper_is_gone(tmp_path):
    with ZooKeeperServer(str(tmp_path / "zk")) as zk:
        uri = f"zk://{zk.connect_string}/ledgers"
        init = subprocess.run([sys.executable, "-m", "bookie.cli.main", "shell", "initnewcluster", "-u", uri],
                              env=child_env(), capture_output=True, text=True, timeout=120)
        assert init.returncode == 0, init.stderr
        conf = tmp_path / "autorecovery.conf"
        conf.write_text(f"metadataServiceUri={uri}\nzkTimeout=4000\n")
        proc = spawn_python("-m", "bookie.cli.main", "autorecovery", "--conf", str(conf))
        try:
            assert "is up" in proc.stdout.readline()  # its worker and election threads run
            zk.stop()
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(timeout=120) == 0, "autorecovery did not stop on SIGTERM"
            log = proc.stderr.read()
            assert "ZooKeeper did not answer within 4 s; closing the sessions to stop" in log, log
            assert "autorecovery 127.0.0.1:3181 stopped" in log, log
            assert "Exception in thread" not in log, log  # no thread died of the lost connection
        finally:
            kill(proc)
