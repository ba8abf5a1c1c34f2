"""Spark on a cluster, not only local[2] (issue 30): a standalone master and two workers, each on a host of its
own, a driver on another, bookies on three more and ZooKeeper on one; batch write, batch read and a streaming
query run there, with the executors on the worker hosts doing the bookie I/O.

One network, Spark cluster and driver serve the whole module (their start-up is most of its time). Executors
import the project as installed in the venv (the workers have no PYTHONPATH of this checkout), which is what
docs/spark.md asks of a cluster's nodes. Where a row was made, written or read is the address of the host whose
executor did it (``spark_cluster_job.here``), and the bookies' established connections show who talked to them.
"""
from __future__ import annotations

import ipaddress
import struct
import subprocess
import sys

import pytest

from bookie.testing.netns import Network, available
from bookie.testing.spark_standalone import SparkStandalone
from tests.helpers.spark_cluster_job import ClusterDriver

REASON = available()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

WORKERS = ("w1", "w2")
HOSTS = ("master", *WORKERS, "driver")  # MultiHostBookKeeper adds zk and bookie0..2
TCP_ESTABLISHED = "01"


def _proc_address(hex_address: str) -> str:
    """An address of ``/proc/net/tcp[6]``: 32-bit words in the host's byte order; IPv4-mapped ones as IPv4."""
    raw = b"".join(struct.pack("=I", int(hex_address[i:i + 8], 16)) for i in range(0, len(hex_address), 8))
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw))
    address = ipaddress.IPv6Address(raw)
    return str(address.ipv4_mapped or address)


def peers(bookie) -> set[str]:
    """Who holds a connection to either port of a bookie now: the remote addresses of the established TCP
    connections in its process's namespace (``/proc/<pid>/net/tcp`` and ``tcp6``: gRPC's sockets are IPv6
    ones, IPv4-mapped)."""
    from bookie.testing.multihost_cluster import BOOKIE_PORT, GRPC_PORT
    found = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{bookie.proc.pid}/net/{table}") as f:
            for line in f.readlines()[1:]:
                local, remote, state = line.split()[1:4]
                if state == TCP_ESTABLISHED and int(local.rsplit(":", 1)[1], 16) in (BOOKIE_PORT, GRPC_PORT):
                    found.add(_proc_address(remote.rsplit(":", 1)[0]))
    return found


@pytest.fixture(scope="module")
def net():
    with Network(HOSTS) as network:
        yield network


@pytest.fixture(scope="module")
def workers(net):
    return {net.hosts[name].address for name in WORKERS}


@pytest.fixture(scope="module")
def spark_cluster(net, tmp_path_factory):
    installed = subprocess.run([sys.executable, "-c", "import spark_bookkeeper, pyspark_bookkeeper"], cwd="/",
                               env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert installed.returncode == 0, ("executors import the project as installed: pip install -e . into "
                                       f"{sys.executable}\n{installed.stderr}")
    hosts = net.hosts
    with SparkStandalone(hosts["master"], [hosts[name] for name in WORKERS],
                         str(tmp_path_factory.mktemp("spark-standalone"))) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def driver(net, spark_cluster, tmp_path_factory):
    driver = ClusterDriver(spark_cluster, net.hosts["driver"], str(tmp_path_factory.mktemp("driver") / "driver.log"))
    yield driver
    driver.close()


@pytest.fixture(scope="module")
def bookies(net, tmp_path_factory):
    """ZooKeeper and three bookies, each on a host of its own, bound to and registered at its host's address."""
    from bookie.testing.multihost_cluster import MultiHostBookKeeper
    cluster = MultiHostBookKeeper(net, 3, str(tmp_path_factory.mktemp("host-bookies")))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def test_the_master_runs_one_worker_and_one_executor_on_each_worker_host(net, spark_cluster, driver, workers):
    state = spark_cluster.state()
    assert state["status"] == "ALIVE" and spark_cluster.alive_workers(state) == workers
    assert [app["name"] for app in state["activeapps"]] == ["spark-cluster-job"]
    assert driver.master == spark_cluster.master_url
    assert set(driver.executors) == workers and len(driver.executors) == len(WORKERS)
    ran = driver.call("hosts", partitions=6)
    assert {address for _, address in ran["tasks"]} == workers, ran  # tasks never run on the driver's host
    assert sorted(index for index, _ in ran["tasks"]) == list(range(6))


def test_batch_write_then_read_by_executors_on_the_worker_hosts(net, driver, bookies, workers):
    uri = bookies.metadata_service_uri
    driver.call("write", uri=uri, log="events", rows=4000, partitions=4)
    # Each write task made its rows and wrote them to the bookies, from its executor's host; the driver's host
    # only planned and committed (ZooKeeper): no one else holds a connection to a bookie.
    for bookie in bookies.bookies:
        assert peers(bookie) == workers, bookie.bookie_id

    read = driver.call("read", uri=uri, log="events")
    payloads = sorted(payload for payload, *_ in read["rows"])
    assert sorted(int(p.split("@")[0]) for p in payloads) == list(range(4000))  # each row once
    assert {p.split("@")[1] for p in payloads} == workers  # made and written on both worker hosts
    assert {reader for *_, reader in read["rows"]} == workers  # and read back there
    assert len({ledger for _, ledger, _, _ in read["rows"]}) == 4  # a ledger per write task


def test_a_stream_into_a_log_on_the_cluster_is_written_exactly_once(net, driver, bookies, workers, tmp_path):
    uri = bookies.metadata_service_uri
    driver.call("write", uri=uri, log="source", rows=900, partitions=2)
    checkpoint = str(tmp_path / "checkpoint")
    first = driver.call("stream", uri=uri, source="source", sink="copy", checkpoint=checkpoint, per_trigger=300)
    assert sum(first["batches"]) == 900 and len([n for n in first["batches"] if n]) >= 3, first
    # A restart from the checkpoint finds nothing new and adds nothing.
    again = driver.call("stream", uri=uri, source="source", sink="copy", checkpoint=checkpoint, per_trigger=300)
    assert sum(again["batches"]) == 0, again

    copied = [payload for payload, *_ in driver.call("read", uri=uri, log="copy")["rows"]]
    rows = [payload.split("|")[0] for payload in copied]
    assert sorted(int(row.split("@")[0]) for row in rows) == list(range(900))  # each row exactly once
    assert {payload.split("|")[1] for payload in copied} == workers  # carried into the sink by both executors
