"""The multi-host harness itself (bookie.testing.netns): hosts reach each other and nothing else, cuts drop
silently both ways and heal, a slowed link queues, a ZooKeeper on a host serves the other hosts, and close()
leaves nothing behind, also when the body raises or the owner is killed.

No packet is ever sent from the root namespace to a host address: it would leave through the root namespace's
own link. Its isolation is shown by what exists instead: no link or address of ours in it, the switch's links
all lead to our hosts, a host has no route beyond its /24.
"""
from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from bookie.testing.netns import SUBNET, Network, available, namespace_pids, namespaces
from tests.helpers.waiting import DEADLINE, wait_for
from tests.procs import spawn_python

REASON = available()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

ECHO_PORT = 7000
CUT_TIMEOUT = 1.0  # seconds a connection across a cut is given: it times out, it never fails at once


@pytest.fixture
def net():
    """Hosts a, b, c, each with an echo server on ECHO_PORT."""
    with Network(["a", "b", "c"]) as network:
        for host in network.hosts.values():
            server = host.python("-m", "tests.helpers.tcp_peer", "serve", host.address, str(ECHO_PORT))
            host.wait_for_port(ECHO_PORT, server, what="echo server")
        yield network


def hosts(network: Network):
    return [network.hosts[name] for name in sorted(network.hosts)]


def transfer(src, dst, size: int, timeout: float = 10.0) -> dict:
    """``size`` bytes sent by a client process on ``src`` to ``dst``'s echo server and back (tcp_peer send)."""
    proc = src.python("-m", "tests.helpers.tcp_peer", "send", dst.address, str(ECHO_PORT), str(size),
                      str(timeout), stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=DEADLINE)
    return json.loads(out)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return data


def assert_reaches(src, dst) -> None:
    with src.connect(dst.address, ECHO_PORT, timeout=DEADLINE) as sock:
        sock.sendall(b"ping")
        assert recv_exactly(sock, 4) == b"ping"


def assert_cut(src, dst) -> None:
    """A connection from ``src`` to ``dst`` times out: no error comes back, the SYN is just lost."""
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        src.connect(dst.address, ECHO_PORT, timeout=CUT_TIMEOUT)
    assert time.monotonic() - start >= CUT_TIMEOUT * 0.9


def root_links() -> set[str]:
    """The root namespace's links, by index and name."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {" ".join(line.split()[:2]) for line in out.splitlines()}


def links(namespace: str) -> dict[str, str | None]:
    """A namespace's links: name -> the namespace its peer is in (veths), None for others."""
    out = subprocess.run(["ip", "-n", namespace, "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        name = line.split()[1].rstrip(":").split("@")[0]
        peer = re.search(r"link-netns (\S+)", line)
        found[name] = peer.group(1) if peer else None
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def qdiscs(namespace: str, link: str) -> str:
    return subprocess.run(["tc", "-n", namespace, "qdisc", "show", "dev", link], capture_output=True, text=True,
                          check=True).stdout


def test_hosts_reach_each_other_with_processes_on_them(net):
    a, b, c = hosts(net)
    for src, dst in ((a, b), (b, c), (c, a)):
        result = transfer(src, dst, 100_000)
        assert result["received"] == 100_000 and result["intact"], result


def test_hosts_and_the_root_namespace_cannot_reach_each_other(net):
    a, b, c = hosts(net)
    # Nothing of ours in the root namespace: no link (a veth there would name its peer's namespace), no address
    # of the subnet, hence no route to a host.
    root = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert net.run_id not in root and " br0" not in root
    root_addresses = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                                    check=True).stdout
    assert f" {SUBNET}." not in root_addresses
    # The switch's links all lead to our hosts, each host's only link to the switch.
    switch = links(net.switch)
    assert switch == {"lo": None, "br0": None, a.port: a.namespace, b.port: b.namespace, c.port: c.namespace}
    for host in (a, b, c):
        assert links(host.namespace) == {"lo": None, "eth0": net.switch}
        routes = host.run(["ip", "-4", "route", "show"]).stdout.splitlines()
        assert [r.split()[0] for r in routes] == [f"{SUBNET}.0/24"], routes  # no default route
    # A host cannot reach the root namespace's addresses: no route, refused at once, no packet sent.
    for address in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/\d+ .*scope global", root_addresses):
        with pytest.raises(OSError) as raised:
            a.connect(address, 9, timeout=DEADLINE)
        assert raised.value.errno == errno.ENETUNREACH, raised.value
    # Nor its loopback: 127.0.0.1 on a host is the host's own.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        with pytest.raises(ConnectionRefusedError):
            a.connect("127.0.0.1", listener.getsockname()[1], timeout=DEADLINE)


def test_cut_drops_both_ways_silently_and_heals(net):
    a, b, c = hosts(net)
    established = a.connect(b.address, ECHO_PORT, timeout=DEADLINE)
    established.sendall(b"one")
    assert recv_exactly(established, 3) == b"one"

    net.cut(a, b)
    assert net.cuts == {("a", "b"), ("b", "a")}
    # An established connection stalls: what is sent is neither delivered nor refused.
    established.sendall(b"two")
    established.settimeout(CUT_TIMEOUT)
    with pytest.raises(TimeoutError):
        established.recv(3)
    assert_cut(a, b)
    assert_cut(b, a)
    assert_reaches(a, c)
    assert_reaches(b, c)
    assert_reaches(c, a)

    net.heal(a, b)
    assert net.cuts == set()
    # TCP's retransmission gets the stalled bytes through once the link is back.
    established.settimeout(DEADLINE)
    assert recv_exactly(established, 3) == b"two"
    established.close()
    assert_reaches(a, b)
    assert_reaches(b, a)


def test_cut_a_host_from_all_others(net):
    a, b, c = hosts(net)
    net.cut(a)
    assert_cut(a, b)
    assert_cut(c, a)
    assert_reaches(b, c)
    net.heal(a)
    assert_reaches(a, b)
    assert_reaches(c, a)


def test_slow_link_queues_its_traffic(net):
    a, b, c = hosts(net)
    size, rate = 256 * 1024, 2_000_000
    unlimited = transfer(a, b, size)
    net.slow(a, rate="2mbit")
    for namespace, link in ((a.namespace, "eth0"), (net.switch, a.port)):  # both directions
        assert "tbf" in qdiscs(namespace, link) and "rate 2Mbit" in qdiscs(namespace, link)
    assert "tbf" not in qdiscs(b.namespace, "eth0")
    limited = transfer(a, b, size, timeout=DEADLINE)
    assert limited["received"] == size and limited["intact"], limited
    # The bytes cannot cross faster than the rate allows (less one burst): a floor, not a timing guess.
    floor = 0.8 * size * 8 / rate
    assert limited["elapsed"] >= floor > unlimited["elapsed"], (limited, unlimited)
    net.unslow(a)
    assert "tbf" not in qdiscs(a.namespace, "eth0") and "tbf" not in qdiscs(net.switch, a.port)


KAZOO = """
import os, sys
from kazoo.client import KazooClient
hosts, timeout, path, value = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
zk = KazooClient(hosts=hosts, connection_retry={"max_tries": -1})
if not zk.start_async().wait(timeout) or not zk.connected:
    print("timeout", flush=True)
    os._exit(0)  # stop() (start()'s too) would wait for the connection attempt lost in the cut
if value:
    zk.create(path, value.encode(), makepath=True)
print(zk.get(path)[0].decode())
zk.stop()
zk.close()
"""


def kazoo(host, connect_string: str, path: str, value: str = "", timeout: float = DEADLINE) -> str:
    """A kazoo client process on ``host``: creates ``path`` with ``value`` (if given), prints its data."""
    proc = host.python("-c", KAZOO, connect_string, str(timeout), path, value, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=DEADLINE + timeout)
    assert proc.returncode == 0, out
    return out.strip()


def listening_inodes(pid: int | str, port: int) -> set[str]:
    """The inodes of the TCP sockets listening on ``port`` in the namespace of process ``pid`` (Java listens
    on an IPv6 socket, IPv4 mapped)."""
    rows = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            rows += [line.split() for line in f.readlines()[1:]]
    return {row[9] for row in rows if row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == port}


def test_zookeeper_on_a_host_serves_the_other_hosts_only(net, tmp_path):
    a, b, c = hosts(net)
    zk = c.zookeeper(str(tmp_path / "zk"))
    assert zk.connect_string == f"{c.address}:2181"
    assert zk.proc in net.processes
    assert os.stat(f"/proc/{zk.proc.pid}/ns/net").st_ino == os.stat(f"/run/netns/{c.namespace}").st_ino
    # Its listening socket is in c's namespace, not the root namespace's.
    ours = listening_inodes(zk.proc.pid, zk.port)
    assert ours and not ours & listening_inodes("self", zk.port)

    assert kazoo(a, zk.connect_string, "/multihost/from-a", "written on a") == "written on a"
    assert kazoo(b, zk.connect_string, "/multihost/from-a") == "written on a"
    net.cut(a, c)
    assert kazoo(a, zk.connect_string, "/multihost/from-a", timeout=2.0) == "timeout"
    assert kazoo(b, zk.connect_string, "/multihost/from-a") == "written on a"


def test_close_removes_everything_even_when_the_body_raises():
    before = root_links()
    with pytest.raises(RuntimeError, match="test body failed"):
        with Network(["a", "b"]) as network:
            run_id = network.run_id
            a, b = hosts(network)
            sleeper = a.popen(["sleep", "600"])
            server = b.python("-m", "tests.helpers.tcp_peer", "serve", b.address, str(ECHO_PORT))
            # A process that left its process group: only the namespace's sweep finds it.
            escaped = b.popen(["setsid", "-f", "sleep", "600"], stdout=subprocess.DEVNULL)
            assert escaped.wait(timeout=DEADLINE) == 0
            wait_for(lambda: len(namespace_pids(network.namespaces())) == 3, "three processes on the hosts")
            pids = namespace_pids(network.namespaces())
            assert {sleeper.pid, server.pid} < pids
            assert len(network.namespaces()) == 3 and root_links() == before
            raise RuntimeError("test body failed")
    assert not [name for name in namespaces() if name.startswith(run_id)]
    assert not [pid for pid in pids if running(pid)]
    assert sleeper.returncode is not None and server.returncode is not None
    assert root_links() == before
    with pytest.raises(RuntimeError, match="closed"):
        a.popen(["true"])


OWNER = """
import json, os, signal, subprocess
from bookie.testing.netns import Network, namespace_pids
network = Network(["a", "b"])
sleeper = network.hosts["a"].popen(["sleep", "600"], stdout=subprocess.DEVNULL)
while sleeper.pid not in namespace_pids(network.namespaces()):  # until `ip netns exec` entered the namespace
    pass
print(json.dumps({"run_id": network.run_id, "pids": sorted(namespace_pids(network.namespaces()))}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_watchdog_removes_everything_when_the_owner_is_killed():
    owner = spawn_python("-c", OWNER)
    out, err = owner.communicate(timeout=DEADLINE)
    assert owner.returncode == -signal.SIGKILL, err
    made = json.loads(out)
    assert made["pids"]
    wait_for(lambda: not [n for n in namespaces() if n.startswith(made["run_id"])], "the watchdog's sweep")
    assert not [pid for pid in made["pids"] if running(pid)]


def test_two_runs_never_meet(net):
    a, b, c = hosts(net)
    with Network(["a"]) as other:
        their_a = other.hosts["a"]
        assert other.run_id != net.run_id and their_a.namespace != a.namespace
        assert their_a.address == a.address  # the same subnet, on another bridge
        assert_cut(their_a, b)
