"""`bk local --conf FILE`: one command starts ZooKeeper and bookies with an operator's bk_server.conf."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

from bookie.client import BookKeeper
from bookie.util.processes import stop_process
from tests.helpers.waiting import wait_for


def start_local(tmp_path, conf_text: str) -> tuple[subprocess.Popen, list[str]]:
    """``bk local`` with one bookie and ``conf_text`` as its --conf; returns the process and its output so far."""
    conf = tmp_path / "bk_server.conf"
    conf.write_text(conf_text)
    proc = subprocess.Popen([sys.executable, "-m", "bookie.cli.main", "local", "--bookies", "1", "--zk-port", "0",
                             "--dir", str(tmp_path / "cluster"), "--conf", str(conf)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    return proc, []


def read_until(proc: subprocess.Popen, lines: list[str], marker: str) -> None:
    for line in proc.stdout:
        lines.append(line)
        if marker in line:
            return
    raise AssertionError(f"bk local exited ({proc.wait()}) before {marker!r}:\n{''.join(lines)}")


def test_local_applies_a_bk_server_conf_to_every_bookie(tmp_path):
    # A production-style file: per-bookie keys (ports, directories, ZooKeeper) are left out, with a notice.
    proc, lines = start_local(tmp_path, "# tried on a laptop\nentryLogSizeLimit=262144\ngcWaitTime=123456\n"
                                        "bookiePort=3181\njournalDirectories=/data/bk/journal\n")
    try:
        read_until(proc, lines, "press Ctrl-C")
        out = "".join(lines)
        assert "entryLogSizeLimit=262144, gcWaitTime=123456" in out
        assert "not applied" in out and "bookiePort, journalDirectories" in out
        uri = next(line.split()[-1] for line in lines if line.startswith("metadataServiceUri:"))
        with BookKeeper(uri) as bk:
            lh = bk.create_ledger(1, 1, 1)
            for _ in range(8):
                lh.append_batch([bytes(1024)] * 128).result(60)  # 1 MiB in all
            lh.close()
        # The bookie rolled its entry log at 256 KiB: the setting reached the bookie process.
        pattern = os.path.join(tmp_path, "cluster", "*", "ledgers", "current", "*.log")
        wait_for(lambda: len(glob.glob(pattern)) >= 4, "the bookie to roll its entry log at entryLogSizeLimit")
    finally:
        stop_process(proc)


def test_local_refuses_a_bad_value_before_starting_anything(tmp_path):
    proc, lines = start_local(tmp_path, "gcWaitTime=soon\n")
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        stop_process(proc)
    assert proc.returncode == 2 and "gcWaitTime='soon' is not valid" in out
    assert not (tmp_path / "cluster").exists() or not os.listdir(tmp_path / "cluster")
