"""Several hosts on one machine: network namespaces on a bridge, with partitions and slow links (Linux, root).

``Network()`` makes a *switch* namespace holding a bridge, and ``add_host(name)`` a namespace per host with one
veth to that bridge and an address of a private /24 (``SUBNET``) configured only inside the namespaces: nothing
is added to the root namespace, hosts have no route out, so their traffic never leaves the namespaces (nor can
the root namespace reach them). Processes run "on" a host (``Host.popen``, ``Host.python``: a ZooKeeper, a bookie
with ``bk bookie --conf``, a client, Spark), and sockets of this process can be made there (``Host.socket``).

Faults: ``cut(a, b)`` drops every IPv4 packet between two hosts, both ways, in the bridge (an nftables ``bridge``
table in the switch namespace), silently as a real partition: a sender sees timeouts and retransmissions, never
an error; ``cut(a)`` cuts a from every other host, ``heal`` undoes cuts. ``slow(host)`` rate-limits the host's
link both ways with ``tbf``: *latency from a rate-limited link; this kernel has no netem*, so there is no fixed
delay, only the time a packet waits behind the host's own queued traffic (up to tbf's ``latency``).

Names are unique per run (``bk<6 hex>-<host>``), so two runs on one machine never meet. ``close()`` (also at the
end of a ``with``, on an exception, and at exit) stops the processes it started by PID (their process groups,
SIGTERM then SIGKILL), then any process still inside its namespaces, then deletes the namespaces by name, which
removes their veths and the bridge; a watchdog process does the same if this one dies without closing.
``available()`` says why the harness cannot run here (tests skip with it), ``ensure_tools()`` installs nftables.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import functools
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from bookie.exceptions import ProcessStartException
from bookie.testing.local_bookkeeper import _child_env
from bookie.testing.zookeeper_server import ZooKeeperServer
from bookie.util.processes import stop_process, tail

SUBNET = "10.77.0"  # hosts are SUBNET.1, .2, ... /24, configured inside the namespaces only
SWITCH = "switch"  # the namespace of the bridge: <run>-switch
BRIDGE = "br0"
HOST_LINK = "eth0"  # a host's end of its veth; the switch's end is p<n>
FAULTS = "bkfaults"  # the nftables bridge table in the switch namespace; its set "cut" holds (saddr . daddr) pairs
NETNS_DIR = "/run/netns"  # where `ip netns` keeps a namespace's name
HOST_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
RUN_ID = re.compile(r"bk[0-9a-f]{6}")
STOP_TIMEOUT = 10.0  # seconds a process gets after SIGTERM before SIGKILL
COMMAND_TIMEOUT = 60.0
ZOOKEEPER_PORT = 2181  # a host has its own ports: ZooKeeper's usual one is free on every host

T = TypeVar("T")


def _command(argv: list[str], check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    """Run a short command (``ip``, ``tc``, ``nft``) to completion; fail with its stderr."""
    done = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise ProcessStartException(f"`{' '.join(argv)}` failed (exit {done.returncode}): {done.stderr.strip()}")
    return done


def namespaces() -> list[str]:
    """The names of this machine's named network namespaces (``ip netns list``)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def _namespace_inode(name: str) -> tuple[int, int] | None:
    try:
        st = os.stat(os.path.join(NETNS_DIR, name))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def namespace_pids(names: Iterable[str]) -> set[int]:
    """The processes inside the named namespaces (``ip netns pids`` for several at once; zombies are in none)."""
    wanted = {inode for inode in map(_namespace_inode, names) if inode is not None}
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = os.stat(f"/proc/{entry}/ns/net")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in wanted:
                pids.add(int(entry))
    return pids


def sweep(run_id: str, timeout: float = STOP_TIMEOUT) -> None:
    """Remove what run ``run_id`` made: every process still in its namespaces (by PID: SIGTERM, then SIGKILL),
    then the namespaces (by name), hosts before the switch. Its veths and bridge go with them."""
    if not RUN_ID.fullmatch(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    names = [n for n in namespaces() if n.startswith(run_id + "-")]
    for sig in (signal.SIGTERM, signal.SIGKILL):  # a round finds none once the last one has gone
        for pid in namespace_pids(names):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while namespace_pids(names) and time.monotonic() < deadline:
            time.sleep(0.02)
    for name in sorted(names, key=lambda n: n == f"{run_id}-{SWITCH}"):
        _command(["ip", "netns", "del", name], check=False)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _enter(namespace: str) -> None:
    """Move the calling thread (only it) into a network namespace."""
    with open(os.path.join(NETNS_DIR, namespace)) as f:
        if hasattr(os, "setns"):  # Python 3.12+
            os.setns(f.fileno(), os.CLONE_NEWNET)
            return
        if _libc().setns(f.fileno(), 0x40000000) != 0:  # CLONE_NEWNET
            err = ctypes.get_errno()
            raise OSError(err, f"setns({namespace}): {os.strerror(err)}")


def in_namespace(namespace: str, call: Callable[[], T]) -> T:
    """``call()`` in a new thread that entered ``namespace``: the sockets it makes stay there, the processes it
    starts run there; the caller's threads stay where they are."""
    outcome: dict = {}

    def run() -> None:
        try:
            _enter(namespace)
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"netns-{namespace}", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@dataclass
class Host:
    """A host: a network namespace ``namespace`` with one link, ``eth0`` at ``address``, to the network's bridge
    (whose end is ``port`` in the switch namespace), and its own loopback."""

    name: str
    namespace: str
    address: str
    port: str
    network: "Network" = field(repr=False)

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside the host (``ip netns exec``, which becomes the command: its PID is the
        command's), in a process group of its own, stdin from /dev/null unless given; the network stops it."""
        kwargs["start_new_session"] = True
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        self.network._check_open()
        return self.network._track(subprocess.Popen(["ip", "netns", "exec", self.namespace, *argv], **kwargs))

    def python(self, *args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
        """This Python on the host with this project first on its path, output unbuffered, ``env`` added to
        this process's environment: ``python("-m", "bookie.cli.main", "bookie", "--conf", path)``."""
        return self.popen([sys.executable, *args], env=_child_env({**(env or {}), "PYTHONUNBUFFERED": "1"}),
                          **kwargs)

    def run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """A short command on the host, to completion (output captured, as text)."""
        return _command(["ip", "netns", "exec", self.namespace, *argv], check=check)

    def socket(self, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM) -> socket.socket:
        """A socket of this process inside the host: it binds and connects as the host does."""
        return in_namespace(self.namespace, lambda: socket.socket(family, kind))

    def connect(self, address: str, port: int, timeout: float | None = None) -> socket.socket:
        """A TCP connection from the host to ``address:port``; a connection across a cut raises TimeoutError
        after ``timeout`` (``None``: the kernel's SYN retries, minutes)."""
        sock = self.socket()
        try:
            sock.settimeout(timeout)
            sock.connect((address, port))
        except BaseException:
            sock.close()
            raise
        return sock

    def wait_for_port(self, port: int, proc: subprocess.Popen | None = None, timeout: float = 60.0,
                      what: str = "server", log_path: str | None = None) -> None:
        """Wait until the host's ``address:port`` accepts connections; fail early if ``proc`` exits."""
        deadline = time.monotonic() + timeout
        while True:
            if proc is not None and proc.poll() is not None:
                raise ProcessStartException(f"{what} on {self.name} exited with code {proc.returncode} before "
                                            f"listening on {self.address}:{port}"
                                            + (f":\n{tail(log_path)}" if log_path else ""))
            try:
                self.connect(self.address, port, timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise ProcessStartException(f"{what} did not listen on {self.address}:{port} ({self.name}) "
                                                f"within {timeout:.0f} s"
                                                + (f":\n{tail(log_path)}" if log_path else "")) from None
                time.sleep(0.02)

    def zookeeper(self, data_dir: str, port: int = ZOOKEEPER_PORT, tick_time: int = 2000,
                  timeout: float = 60.0) -> "HostZooKeeper":
        """A real ZooKeeper on the host (``connect_string`` is ``address:port``), started; stopped by
        ``stop()`` or with the network."""
        return HostZooKeeper(self, data_dir, port, tick_time).start(timeout)


class HostZooKeeper(ZooKeeperServer):
    """``ZooKeeperServer`` on a host: started from a thread inside the host's namespace, so its process runs
    there, listening on every address of the host (its loopback and its link, nothing beyond)."""

    def __init__(self, host: Host, data_dir: str, port: int = ZOOKEEPER_PORT, tick_time: int = 2000):
        super().__init__(data_dir, port, tick_time, bind_address="0.0.0.0")
        self.host = host

    @property
    def connect_string(self) -> str:
        return f"{self.host.address}:{self.port}"

    def start(self, timeout: float = 60.0) -> "HostZooKeeper":
        # The wait for its port runs in the namespace too (127.0.0.1 there is the host's loopback).
        self.host.network._check_open()
        in_namespace(self.host.namespace, lambda: super(HostZooKeeper, self).start(timeout))
        self.host.network._track(self.proc)
        return self


class Network:
    """Hosts on one bridge, and the faults between them. A context manager; ``close()`` removes everything."""

    def __init__(self, hosts: Iterable[str] = (), watchdog: bool = True):
        self.run_id = f"bk{secrets.token_hex(3)}"
        self.hosts: dict[str, Host] = {}
        self.processes: list[subprocess.Popen] = []  # what popen started, stopped by close()
        self._cuts: set[tuple[str, str]] = set()  # (from, to) host names whose packets the bridge drops
        self._slowed: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._watchdog: subprocess.Popen | None = None
        atexit.register(self.close)
        try:
            if watchdog:
                self._watchdog = _start_watchdog(self.run_id)
            self._make_switch()
            for name in hosts:
                self.add_host(name)
        except BaseException:
            self.close()
            raise

    @property
    def switch(self) -> str:
        """The namespace of the bridge."""
        return f"{self.run_id}-{SWITCH}"

    def namespaces(self) -> list[str]:
        """This run's namespaces that exist now."""
        return [n for n in namespaces() if n.startswith(self.run_id + "-")]

    def _make_switch(self) -> None:
        _command(["ip", "netns", "add", self.switch])
        self._ip(self.switch, "link", "add", BRIDGE, "type", "bridge")
        self._ip(self.switch, "link", "set", BRIDGE, "addrgenmode", "none", "up")
        # Cuts are made in the bridge, between hosts: no host sees a rule, a sender gets no error.
        self._nft(f"table bridge {FAULTS} {{\n"
                  "  set cut { type ipv4_addr . ipv4_addr; }\n"
                  "  chain forward { type filter hook forward priority 0; policy accept;\n"
                  "                  ip saddr . ip daddr @cut drop; }\n"
                  "}\n")

    def add_host(self, name: str) -> Host:
        """A new host ``name`` (namespace ``<run>-<name>``), its link up at the next address of ``SUBNET``."""
        if not HOST_NAME.fullmatch(name) or name == SWITCH:
            raise ValueError(f"a host name is [a-z0-9][a-z0-9_-]* (up to 32), not {SWITCH!r}: {name!r}")
        with self._lock:
            self._check_open()
            if name in self.hosts:
                raise ValueError(f"host {name!r} exists already")
            index = len(self.hosts) + 1
            if index > 254:
                raise ValueError(f"a network has at most 254 hosts ({SUBNET}.0/24)")
            host = Host(name, f"{self.run_id}-{name}", f"{SUBNET}.{index}", f"p{index}", self)
            self.hosts[name] = host
        _command(["ip", "netns", "add", host.namespace])
        # Made inside the switch namespace with its peer straight in the host's: never in the root namespace.
        self._ip(self.switch, "link", "add", host.port, "type", "veth", "peer", "name", HOST_LINK,
                 "netns", host.namespace)
        self._ip(self.switch, "link", "set", host.port, "addrgenmode", "none", "master", BRIDGE, "up")
        # IPv4 only (no IPv6 link-local address): a cut then stops everything between two hosts.
        self._ip(host.namespace, "link", "set", HOST_LINK, "addrgenmode", "none")
        self._ip(host.namespace, "addr", "add", f"{host.address}/24", "dev", HOST_LINK)
        self._ip(host.namespace, "link", "set", HOST_LINK, "up")
        self._ip(host.namespace, "link", "set", "lo", "up")
        return host

    def _ip(self, namespace: str, *args: str) -> None:
        _command(["ip", "-n", namespace, *args])

    def _nft(self, script: str) -> None:
        """Apply an nft script in the switch namespace, as one transaction."""
        _command(["ip", "netns", "exec", self.switch, "nft", "-f", "-"], input=script)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"network {self.run_id} is closed")

    def _track(self, proc: subprocess.Popen) -> subprocess.Popen:
        with self._lock:
            self.processes.append(proc)  # one started while close() runs is in a namespace: sweep() ends it
        return proc

    # Faults.

    def cut(self, a: Host, b: Host | None = None) -> None:
        """Drop every packet between ``a`` and ``b`` both ways (``b`` None: between ``a`` and every other host
        there is now), silently: connections time out, established ones stall and retransmit."""
        others = [b] if b is not None else [h for h in self.hosts.values() if h is not a]
        self._cuts |= {pair for other in others for pair in ((a.name, other.name), (other.name, a.name))}
        self._apply_cuts()

    def heal(self, a: Host | None = None, b: Host | None = None) -> None:
        """Undo the cuts between ``a`` and ``b``; between ``a`` and any host (``b`` None); or all (both None)."""
        one, other = (a, b) if a is not None else (b, None)
        self._cuts = {pair for pair in self._cuts
                      if one is not None and not (one.name in pair and (other is None or other.name in pair))}
        self._apply_cuts()

    @property
    def cuts(self) -> set[tuple[str, str]]:
        """The (from, to) host name pairs whose packets are dropped now."""
        return set(self._cuts)

    def _apply_cuts(self) -> None:
        pairs = ", ".join(f"{self.hosts[s].address} . {self.hosts[d].address}" for s, d in sorted(self._cuts))
        self._nft(f"flush set bridge {FAULTS} cut\n" + (f"add element bridge {FAULTS} cut {{ {pairs} }}\n"
                                                         if pairs else ""))

    def slow(self, host: Host, rate: str = "1mbit", burst: str = "32kbit", latency: str = "1s") -> None:
        """Rate-limit ``host``'s link both ways with a token bucket (tc ``tbf``): ``rate``, bursts of ``burst``,
        packets queued up to ``latency`` then dropped. Latency from a rate-limited link; this kernel has no
        netem: packets wait behind the host's own traffic, an idle link adds nothing."""
        for namespace, link in ((host.namespace, HOST_LINK), (self.switch, host.port)):
            _command(["tc", "-n", namespace, "qdisc", "replace", "dev", link, "root", "tbf", "rate", rate,
                      "burst", burst, "latency", latency])
        self._slowed.add(host.name)

    def unslow(self, host: Host) -> None:
        """Take ``host``'s rate limit off again."""
        if host.name in self._slowed:
            for namespace, link in ((host.namespace, HOST_LINK), (self.switch, host.port)):
                _command(["tc", "-n", namespace, "qdisc", "del", "dev", link, "root"])
            self._slowed.discard(host.name)

    # Cleanup.

    def close(self) -> None:
        """Stop every process started on the hosts (process groups by PID: SIGTERM, SIGKILL after
        ``STOP_TIMEOUT``), then whatever still runs in the namespaces, then delete the namespaces. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            running = [p for p in self.processes if p.poll() is None]
            for proc in running:  # all asked at once, then waited for one by one
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in running:
                stop_process(proc, STOP_TIMEOUT)
        finally:
            sweep(self.run_id)
            if self._watchdog is not None:  # swept already: it ends without sweeping
                stop_process(self._watchdog, STOP_TIMEOUT)
                self._watchdog.stdin.close()
            atexit.unregister(self.close)

    def __enter__(self) -> "Network":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _start_watchdog(run_id: str) -> subprocess.Popen:
    """A process that sweeps ``run_id`` once this one is gone, however it ended (SIGKILL runs no atexit): it
    waits for the end of its stdin, a pipe only this process holds open. Out of this process group, so a
    signal to the group (Ctrl-C, a CI timeout) reaches it only by this process's end."""
    return subprocess.Popen([sys.executable, "-m", "bookie.testing.netns", "watch", run_id], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=_child_env())


@functools.cache
def available() -> str | None:
    """None when the harness runs here, else why not (tests skip with it): it needs Linux, root, ``ip``,
    ``tc`` and ``nft``, and a namespace with a bridge, an nftables bridge table and a tbf qdisc."""
    if not sys.platform.startswith("linux"):
        return "the multi-host harness needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the multi-host harness needs root (it makes network namespaces, veths and a bridge)"
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"the multi-host harness needs `{tool}` (apt-get install {package})"
    try:
        with Network(["probe"]) as probe:
            probe.slow(probe.hosts["probe"])
    except (OSError, ProcessStartException, subprocess.SubprocessError) as exc:
        return f"the multi-host harness cannot make its network here: {exc}"
    return None


def ensure_tools() -> str | None:
    """Install nftables (``nft``) with apt-get when it is missing and this is root (CI); then ``available()``."""
    if shutil.which("nft") is None and os.geteuid() == 0 and shutil.which("apt-get") is not None:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", "-q", "nftables"]
        if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
            subprocess.run(install, env=env, stdout=subprocess.DEVNULL)
    available.cache_clear()
    return available()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bookie.testing.netns", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ensure-tools", help="install nftables if missing (root), say whether the harness runs")
    up = commands.add_parser("up", help="make hosts and keep them until Ctrl-C")
    up.add_argument("hosts", nargs="+")
    watch = commands.add_parser("watch", help="(the watchdog) sweep RUN_ID once stdin ends")
    watch.add_argument("run_id")
    args = parser.parse_args(argv)
    if args.command == "watch":
        sys.stdin.buffer.read()
        sweep(args.run_id)
    elif args.command == "ensure-tools":
        reason = ensure_tools()
        print("multi-host harness: ready" if reason is None else f"multi-host tests will skip: {reason}")
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill PID` removes them as Ctrl-C does
        with Network(args.hosts) as net:
            for host in net.hosts.values():
                print(f"{host.name}: {host.address}  ip netns exec {host.namespace} bash")
            print("Ctrl-C removes them", flush=True)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
