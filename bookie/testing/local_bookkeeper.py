"""A local cluster on loopback: a real ZooKeeper server and N bookie processes (LocalBookKeeper).

``bk local`` runs one until Ctrl-C; the test fixtures use the same class to kill (SIGKILL) and restart
bookies. Every process it starts runs in its own process group and is stopped by its PID.

Its bookies listen on loopback only (``listeningInterface=lo``, ``allowLoopback=true``: LOCAL_BOOKIE_SETTINGS),
each on two ports no other of them has (``bookie.util.processes.free_ports``): a port is a bookie's id and its
cookie's name. With httpServerEnabled each serves the HTTP admin API on 127.0.0.1 (``http_address``): bookie i on
httpServerPort + i (BookKeeper's LocalBookKeeper starts no HTTP server), or on a free port of its own when
httpServerPort is 0.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from bookie.exceptions import PortInUseException, ProcessStartException
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.conf import ServerConfiguration
from bookie.testing.zookeeper_server import ZooKeeperServer
from bookie.util.processes import free_ports, stop_process, tail

# Where a local cluster differs from BookKeeper's defaults: a shorter ZooKeeper session, the journal
# writes as soon as its queue is empty (the force-write thread still groups the fsyncs), and every bookie
# listens on loopback only and is 127.0.0.1:<port> (nothing binds the machine's real interfaces).
LOCAL_BOOKIE_SETTINGS = {"zkTimeout": 4000, "journalFlushWhenQueueEmpty": True, "diskCheckInterval": 5000,
                         "listeningInterface": "lo", "allowLoopback": True}


PORT_ATTEMPTS = 3  # a new bookie whose port was taken before it bound it gets new ports, this many times
ADDRESS_IN_USE = "address already in use"
# A cluster's bookie ports, kept in its directory: a bookie's port is its id (in its cookie and in every
# ledger's ensemble), so a cluster started again on the same directory must give each bookie the same ports.
PORTS_FILE = "bookie-ports.json"


@dataclass
class BookieProcess:
    """A bookie process of a test cluster: its directory (conf, log, journal, ledgers), the process and
    the settings it was started with. Subclasses say where it is (``bookie_id``)."""

    index: int
    directory: str
    proc: subprocess.Popen | None = None
    settings: dict = field(default_factory=dict)
    stale_session: int | None = None  # the session of a registration left by a killed process

    @property
    def conf_path(self) -> str:
        return os.path.join(self.directory, "bk_server.conf")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "bookie.log")

    @property
    def journal_dir(self) -> str:
        return os.path.join(self.directory, "journal")

    @property
    def ledger_dir(self) -> str:
        return os.path.join(self.directory, "ledgers")


@dataclass
class LocalBookie(BookieProcess):
    """One bookie process on loopback: BookKeeper's native protocol on ``port`` (bookiePort, its bookie id),
    gRPC on ``grpc_port`` (grpcPort)."""

    port: int = 0
    grpc_port: int = 0
    kept: bool = False  # its ports come from the directory's PORTS_FILE: it may hold data, its id is fixed
    http_port: int = 0  # its HTTP admin server's (httpServerPort); 0: it serves none

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_address(self) -> str | None:
        """host:port of its HTTP admin server (None without httpServerEnabled)."""
        return f"127.0.0.1:{self.http_port}" if self.http_port else None


def write_conf(path: str, values: dict) -> None:
    """A bk_server.conf (Java properties; a list is written comma-separated)."""
    with open(path, "w") as f:
        f.writelines(f"{k}={','.join(v) if isinstance(v, list) else v}\n" for k, v in values.items())


def wait_registered(store: ZKMetadataStore, bookie, timeout: float = 60.0) -> None:
    """Until ``bookie`` (a BookieProcess) holds its registration with a new session, not one a killed
    process left; ProcessStartException with its log's tail if it exits or takes longer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if bookie.proc.poll() is not None:
            raise ProcessStartException(f"bookie {bookie.bookie_id} exited with code {bookie.proc.returncode}:\n"
                                        f"{tail(bookie.log_path)}")
        session = store.registration_session(bookie.bookie_id)
        if session is not None and session != bookie.stale_session:
            return
        time.sleep(0.05)  # polling ZooKeeper for another process
    raise ProcessStartException(f"bookie {bookie.bookie_id} did not register within {timeout:.0f} s:\n"
                                f"{tail(bookie.log_path)}")


def stop_bookie(bookie: BookieProcess, sig: int = signal.SIGKILL) -> int:
    """Stop the bookie's process by PID with ``sig`` (SIGKILL: a crash; SIGTERM: a clean stop)."""
    if bookie.proc is None:
        return 0
    code = stop_process(bookie.proc, sig=sig)
    bookie.proc = None
    return code


def autorecovery_command(base_dir: str, participant_id: str, uri: str, settings: dict) -> tuple[list[str], str]:
    """(the Python arguments, log path) of a ``bk autorecovery`` participant on ``uri``, its
    ``autorecovery-<id>.conf`` written with ``settings`` in ``base_dir``."""
    conf_path = os.path.join(base_dir, f"autorecovery-{participant_id}.conf")
    write_conf(conf_path, settings)
    args = ["-m", "bookie.cli.main", "autorecovery", "--conf", conf_path, "-u", uri, "--id", participant_id]
    return args, os.path.join(base_dir, f"autorecovery-{participant_id}.log")


class LocalBookKeeper:
    def __init__(self, num_bookies: int = 3, base_dir: str | None = None, zk_port: int = 0,
                 zookeeper: ZooKeeperServer | None = None, root: str = "/ledgers", tick_time: int = 2000,
                 bookie_settings: dict | None = None):
        self._own_dir = base_dir is None  # a directory it made itself is removed again by stop()
        self.base_dir = base_dir or tempfile.mkdtemp(prefix="bk-local-")
        self._own_zk = zookeeper is None
        self.zookeeper = zookeeper or ZooKeeperServer(os.path.join(self.base_dir, "zookeeper"), zk_port, tick_time)
        self.root = root
        self.settings = {**LOCAL_BOOKIE_SETTINGS, **(bookie_settings or {})}
        http = ServerConfiguration({k: v for k, v in self.settings.items()
                                    if k in ("httpServerEnabled", "httpServerPort")})
        # The HTTP admin servers' first port (None: they serve none); 0: each bookie a free port of its own.
        self._http_base: int | None = http["httpServerPort"] if http["httpServerEnabled"] else None
        self._planned = num_bookies
        self.bookies: list[LocalBookie] = []
        self._kept = self._kept_ports()
        for i in range(num_bookies):
            self.bookies.append(self._kept_bookie(i, *self._kept[i]) if i < len(self._kept) else self._new_bookie(i))
        self.autorecovery: list[subprocess.Popen] = []  # ``bk autorecovery`` processes it started

    @property
    def ports(self) -> list[int]:
        """The ports its bookies listen on (bookiePort and grpcPort of each)."""
        return [p for b in self.bookies for p in (b.port, b.grpc_port)]

    @property
    def _ports_file(self) -> str:
        return os.path.join(self.base_dir, PORTS_FILE)

    def _kept_ports(self) -> list[tuple[int, int]]:
        """(bookiePort, grpcPort) of each bookie a cluster on this directory had, in order; none for a new one."""
        try:
            with open(self._ports_file) as f:
                return [(int(p), int(g)) for p, g in json.load(f)["bookies"]]
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError) as exc:
            raise ProcessStartException(f"{self._ports_file} is not a list of bookie ports ({exc}): a local cluster "
                                        "keeps its bookies' ports there; restore it or start on a new directory")

    def _keep_ports(self) -> None:
        tmp = self._ports_file + ".tmp"
        with open(tmp, "w") as f:
            # Bookies of the directory not started this time keep their ports too.
            json.dump({"bookies": [[b.port, b.grpc_port] for b in self.bookies]
                       + [list(p) for p in self._kept[len(self.bookies):]]}, f)
        os.replace(tmp, self._ports_file)

    def _kept_bookie(self, index: int, port: int, grpc_port: int) -> LocalBookie:
        return LocalBookie(index, os.path.join(self.base_dir, f"bookie-{index}"), port=port, grpc_port=grpc_port,
                           kept=True, http_port=self._http_port(index))

    def _new_bookie(self, index: int) -> LocalBookie:
        """A bookie with two free ports of its own (bookiePort, grpcPort), none its bookies have (nor the ports
        of the one it replaces, which another process took) nor ZooKeeper's, nor an HTTP admin server's."""
        port, grpc_port = free_ports(2, self.ports + [self.zookeeper.port] + self._http_ports())
        return LocalBookie(index, os.path.join(self.base_dir, f"bookie-{index}"), port=port, grpc_port=grpc_port,
                           http_port=self._http_port(index))

    def _http_ports(self) -> list[int]:
        """The HTTP admin ports taken or reserved: httpServerPort + i of the bookies planned and of one more (an
        added bookie), or the free ones picked so far."""
        if self._http_base:
            return list(range(self._http_base, self._http_base + max(self._planned, len(self.bookies)) + 1))
        return [b.http_port for b in self.bookies if b.http_port]

    def _http_port(self, index: int) -> int:
        if self._http_base is None:
            return 0
        if self._http_base:
            return self._http_base + index
        return free_ports(1, self.ports + [self.zookeeper.port] + self._http_ports())[0]

    @property
    def metadata_service_uri(self) -> str:
        return f"zk://{self.zookeeper.connect_string}{self.root}"

    def start(self, timeout: float = 60.0) -> "LocalBookKeeper":
        if self._own_zk:
            self.zookeeper.start()
        try:
            with ZKMetadataStore(self.metadata_service_uri) as store:
                store.init_new_cluster()
            for bookie in self.bookies:
                self.start_bookie(bookie.index, wait=False)
            for bookie in self.bookies:
                self._wait_first_start(bookie.index, timeout)
            self._keep_ports()
        except BaseException:
            self.stop()
            raise
        return self

    def add_bookie(self, **settings) -> LocalBookie:
        bookie = self._new_bookie(len(self.bookies))
        self.bookies.append(bookie)
        self.start_bookie(bookie.index, wait=False, **settings)
        self._wait_first_start(bookie.index)
        self._keep_ports()
        return self.bookies[bookie.index]

    def _wait_first_start(self, index: int, timeout: float = 60.0) -> None:
        """Wait for a new bookie to register. Its ports were free when picked, but another process can take
        one before the bookie binds it (an outgoing connection's ephemeral port): a new bookie, which holds
        nothing yet, then starts afresh on new ports (a restart keeps its ports: they are its id; so does a
        bookie of a cluster started again on its directory, which is told so)."""
        for attempt in range(PORT_ATTEMPTS):
            try:
                self.wait_registered(index, timeout)
                return
            except ProcessStartException as exc:
                if ADDRESS_IN_USE not in str(exc) or attempt == PORT_ATTEMPTS - 1:
                    raise
                kept = self.bookies[index]
                if kept.kept:
                    raise PortInUseException(
                        f"bookie {kept.bookie_id} cannot listen: port {kept.port} or {kept.grpc_port} is held by "
                        f"another process. A local cluster's bookies keep their ports ({self._ports_file}), since a "
                        "bookie's port is its id in its cookie and in every ledger it holds: free the port and "
                        "start again") from None
            taken = self.bookies[index]
            shutil.rmtree(taken.directory, ignore_errors=True)
            self.bookies[index] = self._new_bookie(index)
            self.start_bookie(index, wait=False, **taken.settings)

    def start_bookie(self, index: int, wait: bool = True, env: dict | None = None, **settings) -> LocalBookie:
        """(Re)start bookie ``index`` with its own directories and ports; extra settings go in its conf,
        ``env`` in this process's environment only (test seams such as BK_COMPACTION_STOP_AT)."""
        bookie = self.bookies[index]
        os.makedirs(bookie.directory, exist_ok=True)
        bookie.settings.update(settings)
        values = {**self.settings, **bookie.settings, "bookiePort": bookie.port, "grpcPort": bookie.grpc_port,
                  "journalDirectories": bookie.journal_dir, "ledgerDirectories": bookie.ledger_dir,
                  "metadataServiceUri": self.metadata_service_uri}
        if bookie.http_port:
            values.update(httpServerPort=bookie.http_port, httpServerHost="127.0.0.1")
        write_conf(bookie.conf_path, values)
        with ZKMetadataStore(self.metadata_service_uri) as store:
            # After a SIGKILL the old process's registration lingers until its session expires: the
            # restart counts as registered only once a new session holds the node.
            bookie.stale_session = store.registration_session(bookie.bookie_id)
        with open(bookie.log_path, "ab") as log:
            bookie.proc = subprocess.Popen([sys.executable, "-m", "bookie.cli.main", "bookie", "--conf", bookie.conf_path],
                                           stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True, env=_child_env(env))
        if wait:
            self.wait_registered(index)
        return bookie

    def wait_registered(self, index: int, timeout: float = 60.0) -> None:
        with ZKMetadataStore(self.metadata_service_uri) as store:
            wait_registered(store, self.bookies[index], timeout)

    def kill_bookie(self, index: int, sig: int = signal.SIGKILL) -> int:
        """Stop bookie ``index`` by PID with ``sig`` (SIGKILL: a crash; SIGTERM: a clean stop)."""
        return stop_bookie(self.bookies[index], sig)

    def start_autorecovery(self, participant_id: str, **settings) -> subprocess.Popen:
        """Start a ``bk autorecovery`` process (its own process group, stopped by PID in ``stop``); its output
        goes to ``autorecovery-<id>.log`` in the cluster's directory; ``settings`` (AutoRecovery's keys of
        ServerConfiguration) go in its ``autorecovery-<id>.conf``."""
        args, log_path = autorecovery_command(self.base_dir, participant_id, self.metadata_service_uri, settings)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([sys.executable, *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=_child_env())
        self.autorecovery.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.autorecovery:
            stop_process(proc)
        for bookie in self.bookies:
            if bookie.proc is not None:
                self.kill_bookie(bookie.index, signal.SIGTERM)
        if self._own_zk:
            self.zookeeper.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _child_env(extra: dict | None = None) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return dict(os.environ, **(extra or {}), PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))


