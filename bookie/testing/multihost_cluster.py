"""A BookKeeper cluster across hosts: a ZooKeeper and bookies, each on a host of a ``netns.Network``.

Each bookie runs ``bk bookie --conf`` on its own host with ``listeningInterface=eth0`` and
``advertisedAddress=<its host's address>``, as an operator runs one per machine: its id is
``<address>:3181`` and its registration names that address for both endpoints. Every host has its own
ports, so all bookies use BookKeeper's usual ones. Clients, AutoRecovery and Spark run on other hosts of
the same network (``Host.python``); this process watches the cluster through a metadata store whose
ZooKeeper session lives on the ZooKeeper's own host, so cuts between other hosts never blind it.

    with Network() as net:
        cluster = MultiHostBookKeeper(net, 4, base_dir).start()
        writer = net.add_host("client")   # then run a client there: writer.python("-m", ...)
"""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass

from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.testing.local_bookkeeper import (BookieProcess, autorecovery_command, stop_bookie, wait_registered,
                                             write_conf)
from bookie.testing.netns import HOST_LINK, Host, HostZooKeeper, Network, in_namespace
from bookie.util.processes import stop_process

BOOKIE_PORT, GRPC_PORT = 3181, 4181  # BookKeeper's bookiePort; this project's grpcPort
# Shorter than BookKeeper's defaults where tests wait on them: the session (zkTimeout) and the disk check.
HOST_BOOKIE_SETTINGS = {"zkTimeout": 4000, "journalFlushWhenQueueEmpty": True, "diskCheckInterval": 5000}


@dataclass
class HostBookie(BookieProcess):
    """One bookie process on its own host."""
    host: Host | None = None

    @property
    def bookie_id(self) -> str:
        return f"{self.host.address}:{BOOKIE_PORT}"


class MultiHostBookKeeper:
    def __init__(self, network: Network, num_bookies: int, base_dir: str, root: str = "/ledgers",
                 bookie_settings: dict | None = None, tick_time: int = 500):
        self.network = network
        self.base_dir = base_dir
        self.root = root
        self.settings = {**HOST_BOOKIE_SETTINGS, **(bookie_settings or {})}
        self.zk_host = network.add_host("zk")
        self.zookeeper = HostZooKeeper(self.zk_host, os.path.join(base_dir, "zookeeper"), tick_time=tick_time)
        self.bookies = [HostBookie(i, os.path.join(base_dir, f"bookie-{i}"), host=network.add_host(f"bookie{i}"))
                        for i in range(num_bookies)]
        self.autorecovery: list[subprocess.Popen] = []
        self._store: ZKMetadataStore | None = None

    @property
    def metadata_service_uri(self) -> str:
        return f"zk://{self.zookeeper.connect_string}{self.root}"

    @property
    def store(self) -> ZKMetadataStore:
        """The cluster's metadata as seen from the ZooKeeper's own host (its session lives there)."""
        if self._store is None:
            self._store = in_namespace(self.zk_host.namespace, lambda: ZKMetadataStore(self.metadata_service_uri))
        return self._store

    def start(self, timeout: float = 60.0) -> "MultiHostBookKeeper":
        self.zookeeper.start(timeout)
        self.store.init_new_cluster()
        for bookie in self.bookies:
            self.start_bookie(bookie.index, wait=False)
        for bookie in self.bookies:
            self.wait_registered(bookie.index, timeout)
        return self

    def start_bookie(self, index: int, wait: bool = True, **settings) -> HostBookie:
        """(Re)start bookie ``index`` on its host with its own directories; extra settings go in its conf."""
        bookie = self.bookies[index]
        os.makedirs(bookie.directory, exist_ok=True)
        bookie.settings.update(settings)
        values = {**self.settings, **bookie.settings, "bookiePort": BOOKIE_PORT, "grpcPort": GRPC_PORT,
                  "listeningInterface": HOST_LINK, "advertisedAddress": bookie.host.address,
                  "journalDirectories": bookie.journal_dir, "ledgerDirectories": bookie.ledger_dir,
                  "metadataServiceUri": self.metadata_service_uri}
        write_conf(bookie.conf_path, values)
        bookie.stale_session = self.store.registration_session(bookie.bookie_id)
        with open(bookie.log_path, "ab") as log:
            bookie.proc = bookie.host.python("-m", "bookie.cli.main", "bookie", "--conf", bookie.conf_path,
                                             stdout=log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_registered(index)
        return bookie

    def wait_registered(self, index: int, timeout: float = 60.0) -> None:
        wait_registered(self.store, self.bookies[index], timeout)

    def kill_bookie(self, index: int, sig: int = signal.SIGKILL) -> int:
        """Stop bookie ``index`` by PID with ``sig`` (SIGKILL: a crash; SIGTERM: a clean stop)."""
        return stop_bookie(self.bookies[index], sig)

    def start_autorecovery(self, host: Host, participant_id: str, **settings) -> subprocess.Popen:
        """A ``bk autorecovery`` process on ``host`` (its conf and log in the cluster's directory)."""
        args, log_path = autorecovery_command(self.base_dir, participant_id, self.metadata_service_uri,
                                              {"zkTimeout": self.settings["zkTimeout"], **settings})
        with open(log_path, "ab") as log:
            proc = host.python(*args, stdout=log, stderr=subprocess.STDOUT)
        self.autorecovery.append(proc)
        return proc

    def stop(self) -> None:
        """Stop everything by PID (the network removes the hosts)."""
        for proc in self.autorecovery:
            stop_process(proc)
        for bookie in self.bookies:
            self.kill_bookie(bookie.index, signal.SIGTERM)
        if self._store is not None:
            self._store.close()
            self._store = None
        self.zookeeper.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m bookie.testing.multihost_cluster [--bookies N]``: a cluster across hosts until Ctrl-C."""
    import argparse
    import sys
    import tempfile

    from bookie.testing.netns import available

    parser = argparse.ArgumentParser(prog="python -m bookie.testing.multihost_cluster",
                                     description="ZooKeeper and N bookies, each on a host of its own, and a "
                                                 "client host, until Ctrl-C (Linux, root)")
    parser.add_argument("--bookies", type=int, default=3)
    args = parser.parse_args(argv)
    reason = available()
    if reason is not None:
        print(f"cannot make hosts here: {reason}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill PID` cleans up as Ctrl-C does
    with Network() as net, tempfile.TemporaryDirectory(prefix="bk-hosts-") as base:
        cluster = MultiHostBookKeeper(net, args.bookies, base).start()
        client = net.add_host("client")
        try:
            print(f"metadataServiceUri: {cluster.metadata_service_uri}")
            for bookie in cluster.bookies:
                print(f"bookie {bookie.bookie_id} on host {bookie.host.name} (log {bookie.log_path})")
            print(f"a client host: ip netns exec {client.namespace} {sys.executable} -m bookie.cli.main shell "
                  f"simpletest -u {cluster.metadata_service_uri}")
            print("Ctrl-C stops everything and removes the hosts", flush=True)
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
