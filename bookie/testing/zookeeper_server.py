"""A real Apache ZooKeeper server, from the jars inside the pyspark wheel, run with this machine's Java;
``ZooKeeperEnsemble``: several of them in quorum mode, as operators run ZooKeeper.

Binds 127.0.0.1 only (``ZooKeeperServer(bind_address=...)``: another address), admin server off. ``stop()``
ends every process by PID (SIGTERM, then SIGKILL).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

from bookie.exceptions import PortInUseException, ProcessStartException
from bookie.util.processes import free_port, free_ports, port_taken, stop_process, tail, wait_for_port


def zookeeper_classpath() -> str:
    try:
        import pyspark
    except ImportError:
        raise ProcessStartException("pyspark is not installed: the embedded ZooKeeper runs from its jars") from None
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    if not any(name.startswith("zookeeper-") for name in os.listdir(jars)):
        raise ProcessStartException(f"no zookeeper-*.jar in {jars}")
    return os.path.join(jars, "*")


DEFAULT_HEAP_MB = 256  # ample for the tests' and most benches' znodes; a million ledgers need ~1 GiB


def launch_java(main_class: str, cfg: str, log_path: str, heap_mb: int = DEFAULT_HEAP_MB) -> subprocess.Popen:
    """ZooKeeper's ``main_class`` on ``cfg``, in a process group of its own, its output to ``log_path``."""
    java = shutil.which("java")
    if java is None:
        raise ProcessStartException("java is not on PATH: the embedded ZooKeeper needs Java 17+ (PySpark's own "
                                   "requirement), e.g. apt-get install openjdk-17-jre-headless")
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [java, f"-Xmx{heap_mb}m", "-Dzookeeper.admin.enableServer=false", "-cp", zookeeper_classpath(), main_class, cfg],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


class ZooKeeperServer:
    def __init__(self, data_dir: str, port: int = 0, tick_time: int = 2000, bind_address: str = "127.0.0.1",
                 heap_mb: int = DEFAULT_HEAP_MB):
        self.data_dir = data_dir
        self.heap_mb = heap_mb
        self.port = port or free_port()
        self.bind_address = bind_address  # clientPortAddress: 0.0.0.0 in a host of bookie.testing.netns
        self.tick_time = tick_time
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, "zookeeper.log")

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "ZooKeeperServer":
        """Start the server and wait until it answers. A port another server holds (a ZooKeeper of a Pulsar
        standalone, say) is refused first: this server would die on it while the other answered in its place,
        and bookies started next would join that other cluster."""
        if port_taken(self.bind_address, self.port):
            raise PortInUseException(
                f"ZooKeeper's client port {self.bind_address}:{self.port} is already in use (another ZooKeeper, "
                "such as a Pulsar standalone's, or another program): not starting, since bookies would join "
                "whatever answers there. Stop that program or pick another port (bk local --zk-port; 0: any free "
                "port)")
        data = os.path.join(self.data_dir, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.data_dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_time}\ndataDir={data}\n"
                    f"clientPort={self.port}\nclientPortAddress={self.bind_address}\nmaxClientCnxns=0\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,conf\n")
        self.proc = launch_java("org.apache.zookeeper.server.ZooKeeperServerMain", cfg, self.log_path, self.heap_mb)
        try:
            wait_for_port(self.port, self.proc, timeout, "ZooKeeper", self.log_path)
            self._check_it_is_this_one(data, timeout)
        except ProcessStartException:
            self.stop()
            raise
        return self

    def _check_it_is_this_one(self, data: str, timeout: float = 60.0) -> None:
        """The server answering on the port is the one started here: its ``conf`` names this data directory
        (a server that took the port meanwhile, or refuses ``conf``, does not). A server still starting answers
        nothing yet: asked again while this one's process runs."""
        deadline = time.monotonic() + timeout
        while True:
            answer = four_letter_word(self.port, "conf")
            served = next((line.split("=", 1)[1] for line in answer.splitlines() if line.startswith("dataDir=")), "")
            if served or time.monotonic() > deadline or self.proc is None or self.proc.poll() is not None:
                break
            time.sleep(0.05)  # asking a server process that is starting
        if not os.path.realpath(served).startswith(os.path.realpath(data)):
            raise ProcessStartException(
                f"127.0.0.1:{self.port} is answered by another ZooKeeper (its data directory: {served or 'not told'}; "
                f"this one's: {data}):\n{tail(self.log_path)}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """ZooKeeper's answer to a four-letter command (``srvr``, ``ruok``) on 127.0.0.1:port; "" if none."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def received_requests(port: int) -> int:
    """Requests the ZooKeeper server on 127.0.0.1:port received so far (``srvr``'s Received counter; the
    benches count an operation's requests as the difference, session pings included)."""
    answer = four_letter_word(port, "srvr", timeout=10.0)
    for line in answer.splitlines():
        if line.startswith("Received:"):
            return int(line.split(":")[1])
    raise RuntimeError(f"no Received counter in srvr's answer from port {port}: {answer!r}")


@dataclass
class QuorumPeer:
    """One server of an ensemble (``server.<myid>=127.0.0.1:<peer_port>:<election_port>``), serving
    clients on ``port``, with its own directory (``zoo.cfg``, ``data/myid``, ``zookeeper.log``)."""

    myid: int
    port: int
    peer_port: int
    election_port: int
    directory: str
    proc: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "zookeeper.log")

    def mode(self) -> str | None:
        """``leader``, ``follower`` (serving clients), or None (down, or not in a quorum)."""
        for line in four_letter_word(self.port, "srvr").splitlines():
            if line.startswith("Mode: "):
                return line[len("Mode: "):].strip()
        return None


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers in quorum mode, each a process of its own (QuorumPeerMain) with its own
    ``myid``, data directory, client, quorum and election ports; a majority keeps serving when the others
    stop. ``connect_string`` lists every server (``h:p,h:p,h:p``, what kazoo and ZooKeeper take; a
    ``metadataServiceUri`` may separate them with ``;`` as BookKeeper documents). Servers are numbered
    from 0 here (``myid`` is index + 1); ``kill(i)`` / ``start_server(i)`` stop and restart one by PID."""

    def __init__(self, data_dir: str, size: int = 3, tick_time: int = 2000):
        self.data_dir = data_dir
        self.tick_time = tick_time
        ports = free_ports(3 * size)
        self.peers = [QuorumPeer(i + 1, *ports[3 * i:3 * i + 3], os.path.join(data_dir, f"server-{i + 1}"))
                      for i in range(size)]

    @property
    def connect_string(self) -> str:
        return ",".join(p.connect_string for p in self.peers)

    @property
    def port(self) -> int:
        """The first server's client port (the one port a single-server caller expects)."""
        return self.peers[0].port

    @property
    def ports(self) -> list[int]:
        """Every port the ensemble listens on: client, quorum and election ports of each server."""
        return [port for p in self.peers for port in (p.port, p.peer_port, p.election_port)]

    def _write_config(self, peer: QuorumPeer) -> str:
        data = os.path.join(peer.directory, "data")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "myid"), "w") as f:
            f.write(f"{peer.myid}\n")
        cfg = os.path.join(peer.directory, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_time}\ninitLimit=20\nsyncLimit=5\ndataDir={data}\n"
                    f"clientPort={peer.port}\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,cons\n")
            f.writelines(f"server.{p.myid}=127.0.0.1:{p.peer_port}:{p.election_port}\n" for p in self.peers)
        return cfg

    def start(self, timeout: float = 60.0) -> "ZooKeeperEnsemble":
        try:
            for peer in self.peers:
                peer.proc = launch_java(QUORUM_MAIN, self._write_config(peer), peer.log_path)
            for index in range(len(self.peers)):
                self.wait_serving(index, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_server(self, index: int, timeout: float = 60.0) -> QuorumPeer:
        """(Re)start server ``index`` on its own data and ports; returns once it serves in the quorum."""
        peer = self.peers[index]
        if peer.proc is not None and peer.proc.poll() is None:
            raise ProcessStartException(f"ZooKeeper server {peer.myid} is running already (pid {peer.proc.pid})")
        peer.proc = launch_java(QUORUM_MAIN, self._write_config(peer), peer.log_path)
        self.wait_serving(index, timeout)
        return peer

    def wait_serving(self, index: int, timeout: float = 60.0) -> None:
        """Wait until server ``index`` is a leader or follower of a quorum; fail early if it exits."""
        peer = self.peers[index]
        deadline = time.monotonic() + timeout
        while peer.mode() not in ("leader", "follower"):
            if peer.proc is None or peer.proc.poll() is not None:
                code = None if peer.proc is None else peer.proc.returncode
                raise ProcessStartException(f"ZooKeeper server {peer.myid} exited (code {code}) before serving:\n"
                                            f"{tail(peer.log_path)}")
            if time.monotonic() > deadline:
                raise ProcessStartException(f"ZooKeeper server {peer.myid} (127.0.0.1:{peer.port}) did not join a "
                                            f"quorum within {timeout:.0f} s:\n{tail(peer.log_path)}")
            time.sleep(0.05)

    def serving(self, session_id: int) -> int | None:
        """The index of the server a client's session is connected to now (four-letter ``cons``), None if
        no server has it (the client is between servers)."""
        sid = f"sid=0x{session_id:x}"
        return next((i for i, p in enumerate(self.peers) if sid in four_letter_word(p.port, "cons")), None)

    def leader(self) -> int | None:
        """The index of the server that leads the quorum now, None if none does."""
        return next((i for i, p in enumerate(self.peers) if p.mode() == "leader"), None)

    def kill(self, index: int, sig: int = signal.SIGKILL) -> int:
        """Stop server ``index`` by PID with ``sig`` (SIGKILL: a crash); the others go on as a quorum if
        they are a majority."""
        peer = self.peers[index]
        if peer.proc is None:
            return 0
        code = stop_process(peer.proc, sig=sig)
        peer.proc = None
        return code

    def stop(self) -> None:
        for index in range(len(self.peers)):
            self.kill(index, signal.SIGTERM)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
