"""free_ports: the ports of one cluster's bookies are distinct even when the kernel hands one out twice."""
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.zookeeper_server import ZooKeeperServer
from bookie.util import processes


def kernel_repeating(monkeypatch, ports):
    handed = iter(ports)
    monkeypatch.setattr(processes, "free_port", lambda: next(handed))


def test_a_port_handed_out_twice_or_already_taken_is_skipped(monkeypatch):
    kernel_repeating(monkeypatch, [5000, 5000, 5001, 5002, 5003])
    assert processes.free_ports(2, taken=[5001]) == [5000, 5002]


def test_the_bookies_of_one_cluster_never_share_a_port(monkeypatch, tmp_path):
    # bookie 0 gets 6000/6001; the kernel then hands out 6000, 6001 and ZooKeeper's 2181 again
    kernel_repeating(monkeypatch, [6000, 6001, 6000, 6001, 2181, 6002, 6003, 6001, 6004, 6005])
    zk = ZooKeeperServer(str(tmp_path / "zk"), port=2181)
    c = LocalBookKeeper(3, base_dir=str(tmp_path), zookeeper=zk)
    assert [(b.port, b.grpc_port) for b in c.bookies] == [(6000, 6001), (6002, 6003), (6004, 6005)]
