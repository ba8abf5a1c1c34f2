"""`bk local --conf FILE`: one command starts ZooKeeper and bookies with an operator's bk_server.conf."""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys

import pytest

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


def run_local(tmp_path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bookie.cli.main", "local", "--bookies", "1",
                             "--dir", str(tmp_path / "cluster"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def test_local_refuses_a_zookeeper_port_someone_else_holds(zookeeper, tmp_path):
    # A stranger's ZooKeeper (a Pulsar standalone's, say) on the port: bk local must not join it.
    proc = run_local(tmp_path, "--zk-port", str(zookeeper.port))
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        stop_process(proc)
    assert proc.returncode == 2, out
    assert f"client port 127.0.0.1:{zookeeper.port} is already in use" in out and "--zk-port" in out
    assert "press Ctrl-C" not in out and not (tmp_path / "cluster" / "bookie-0").exists()


def test_a_zookeeper_answering_for_another_is_told_apart(zookeeper, tmp_path):
    from bookie.exceptions import ProcessStartException
    from bookie.testing.zookeeper_server import ZooKeeperServer
    mine = ZooKeeperServer(str(tmp_path / "mine"), port=zookeeper.port)  # as if the stranger took the port after the check
    with pytest.raises(ProcessStartException, match="answered by another ZooKeeper"):
        mine._check_it_is_this_one(str(tmp_path / "mine" / "data"))
    zookeeper._check_it_is_this_one(os.path.join(zookeeper.data_dir, "data"))  # the session's own passes


def test_local_starts_again_on_its_directory_with_its_data(tmp_path):
    def start() -> tuple[subprocess.Popen, list[str]]:
        proc, lines = run_local(tmp_path, "--zk-port", "0"), []
        read_until(proc, lines, "press Ctrl-C")
        return proc, lines

    def bookie_ids(lines: list[str]) -> list[str]:
        return [line.split()[1] for line in lines if line.startswith("bookie ")]

    proc, first = start()
    try:
        uri = next(line.split()[-1] for line in first if line.startswith("metadataServiceUri:"))
        with BookKeeper(uri) as bk:
            lh = bk.create_ledger(1, 1, 1, password=b"pw")
            lh.append_batch([b"kept %d" % i for i in range(10)]).result(60)
            lh.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        stop_process(proc)
    proc, second = start()  # the same bookie ports: its cookie and the ledger's ensemble name them
    try:
        assert bookie_ids(second) == bookie_ids(first)
        uri = next(line.split()[-1] for line in second if line.startswith("metadataServiceUri:"))
        with BookKeeper(uri) as bk, bk.open_ledger(lh.ledger_id, b"pw") as reader:
            assert [e.payload for e in reader.read(0, 9)] == [b"kept %d" % i for i in range(10)]
    finally:
        stop_process(proc)
