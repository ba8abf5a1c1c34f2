"""Where a bookie listens, what it registers, and whom it serves (issue 30, items 1 and 2).

BookKeeper's keys with BookKeeper's precedence: advertisedAddress, else listeningInterface's address (this
host's when unset), or its host name (useHostNameAsBookieID, useShortHostName); bookieId overrides the id; a
loopback address is refused unless allowLoopback. Both ports bind listeningInterface's address (every
interface when it is unset) and both registered endpoints carry the advertised host. A request meant for
another bookie id is refused, and the client fails that bookie instead of writing its replicas elsewhere.
Real ZooKeeper and real ``bk bookie`` processes; cross-host set-ups come with the network-namespace harness.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from bookie.client import BookKeeper
from bookie.client.bookie_client import BookieClient
from bookie.client.bookkeeper import make_bookie_client
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.exceptions import BKWrongBookieException
from bookie.meta.bookie_service_info import BOOKIE_RPC, GRPC, BookieServiceInfo, Endpoint
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto import status
from bookie.server.conf import interface_address, interface_names
from bookie.util.processes import free_ports, stop_process, tail
from tests.helpers.shell import bk_shell_run
from tests.helpers.waiting import DEADLINE, wait_for

PASSWORD = b"pw"


class StandaloneBookie:
    """One ``bk bookie --conf`` process with the given settings, on two free ports of its own."""

    def __init__(self, directory, uri: str, **settings):
        os.makedirs(directory, exist_ok=True)
        self.port, self.grpc_port = free_ports(2)
        self.log_path = os.path.join(directory, "bookie.log")
        self.conf_path = os.path.join(directory, "bk_server.conf")
        values = {"bookiePort": self.port, "grpcPort": self.grpc_port, "metadataServiceUri": uri, "zkTimeout": 2000,
                  "journalDirectories": os.path.join(directory, "journal"),
                  "ledgerDirectories": os.path.join(directory, "ledgers"), **settings}
        with open(self.conf_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in values.items())
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "bookie.cli.main", "bookie", "--conf", self.conf_path],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    @property
    def log(self) -> str:
        return tail(self.log_path, 200)

    def refused(self) -> str:
        """The output of a bookie that must refuse to start (exit non-zero without registering)."""
        try:
            code = self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            stop_process(self.proc)
            raise AssertionError(f"the bookie started instead of refusing its configuration:\n{self.log}") from None
        assert code != 0, self.log
        return self.log

    def registered(self, store: ZKMetadataStore, bookie_id: str) -> BookieServiceInfo:
        """Wait until it registers as ``bookie_id``; its registration (the znode's BookieServiceInfo)."""
        def up() -> bool:
            assert self.proc.poll() is None, f"the bookie exited:\n{self.log}"
            return store.bookie_service_info(bookie_id) is not None
        wait_for(up, f"bookie {bookie_id} to register")
        return store.bookie_service_info(bookie_id)

    def logged(self, line: str) -> None:
        """Wait until its output has ``line`` (the start-up lines follow the registration)."""
        wait_for(lambda: line in self.log, f"the bookie to print {line!r}")

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def standalone(metadata_store, zookeeper, tmp_path):
    """``start(**settings)``: bookies on a fresh cluster root, stopped by PID at the end."""
    uri = f"zk://{zookeeper.connect_string}{metadata_store.root}"
    started: list[StandaloneBookie] = []

    def start(**settings) -> StandaloneBookie:
        bookie = StandaloneBookie(tmp_path / f"bookie-{len(started)}", uri, **settings)
        started.append(bookie)
        return bookie

    start.uri = uri
    yield start
    for bookie in started:
        bookie.stop()


def other_ipv4() -> str | None:
    """An IPv4 address of this machine that is not loopback (None if it has none)."""
    for name in interface_names():
        try:
            address = interface_address(name)
        except Exception:
            continue
        if not address.startswith("127."):
            return address
    return None


def accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
        return True
    except OSError:
        return False


def write_and_read(uri: str, bookie_id: str) -> None:
    """A ledger on exactly ``bookie_id``, written and read back by the client through its registration."""
    with BookKeeper(uri) as bk:
        lh = bk.create_ledger(1, 1, 1, password=PASSWORD, bookies=[bookie_id])
        for i in range(5):
            lh.append(b"entry-%d" % i)
        lh.close()
        assert bk.ledger_metadata(lh.ledger_id).ensembles == ((0, (bookie_id,)),)
        reader = bk.open_ledger(lh.ledger_id, password=PASSWORD)
        assert [e.payload for e in reader.read(0, 4)] == [b"entry-%d" % i for i in range(5)]
        reader.close()


# -- item 1: addresses ------------------------------------------------------------------------------
def test_a_loopback_address_is_refused_without_allow_loopback(standalone):
    out = standalone(listeningInterface="lo").refused()
    assert "127.0.0.1 (from listeningInterface=lo) is a loopback address" in out
    assert "allowLoopback=true" in out and "advertisedAddress" in out


def test_an_unknown_interface_is_refused_naming_the_key(standalone):
    out = standalone(listeningInterface="nosuch0", allowLoopback="true").refused()
    assert "listeningInterface=nosuch0: no such network interface" in out and "lo" in out


def test_a_bookie_binds_lo_and_registers_the_advertised_address_for_both_endpoints(standalone, metadata_store):
    # advertisedAddress wins over the interface's address: "localhost" is a name that reaches lo here.
    b = standalone(listeningInterface="lo", allowLoopback="true", advertisedAddress="localhost")
    bookie_id = f"localhost:{b.port}"
    info = b.registered(metadata_store, bookie_id)
    assert info.endpoints == (Endpoint("bookie", "localhost", b.port, BOOKIE_RPC),
                              Endpoint("grpc", "localhost", b.grpc_port, GRPC))
    assert accepts("127.0.0.1", b.port) and accepts("127.0.0.1", b.grpc_port)
    elsewhere = other_ipv4()
    if elsewhere is not None:  # bound to lo's address only: the machine's other addresses do not answer
        assert not accepts(elsewhere, b.port) and not accepts(elsewhere, b.grpc_port)
    b.logged(f"bookie {bookie_id} is up: listening on 127.0.0.1:{b.port} (BookKeeper's protocol) and "
             f"127.0.0.1:{b.grpc_port} (gRPC); registered as localhost:{b.port} (bookie-rpc) and "
             f"localhost:{b.grpc_port} (grpc)")
    write_and_read(standalone.uri, bookie_id)


def test_without_listening_interface_a_bookie_listens_on_every_interface(standalone, metadata_store):
    b = standalone(advertisedAddress="127.0.0.1")  # BookKeeper: no listeningInterface, the wildcard address
    info = b.registered(metadata_store, f"127.0.0.1:{b.port}")
    assert {e.host for e in info.endpoints} == {"127.0.0.1"}
    b.logged(f"listening on 0.0.0.0:{b.port} (BookKeeper's protocol) and 0.0.0.0:{b.grpc_port} (gRPC), every "
             f"interface; registered as 127.0.0.1:{b.port}")
    elsewhere = other_ipv4()
    if elsewhere is not None:
        assert accepts(elsewhere, b.port) and accepts(elsewhere, b.grpc_port)


def test_a_custom_bookie_id_is_reached_through_its_registered_endpoints(standalone, metadata_store):
    b = standalone(bookieId="bookie-a", listeningInterface="lo", allowLoopback="true")
    info = b.registered(metadata_store, "bookie-a")
    assert info.endpoints == (Endpoint("bookie", "127.0.0.1", b.port, BOOKIE_RPC),
                              Endpoint("grpc", "127.0.0.1", b.grpc_port, GRPC))
    assert metadata_store.read_cookie("bookie-a") is not None
    write_and_read(standalone.uri, "bookie-a")
    # BookKeeper's protocol too: at the registered bookie-rpc endpoint, as a Java client resolves it.
    native = make_bookie_client("bookie-a", BookieServiceInfo((info.endpoint(BOOKIE_RPC),)), 10.0)
    try:
        assert isinstance(native, NativeBookieClient) and native.bookie_info().status == status.EOK
    finally:
        native.close()


def test_use_host_name_as_bookie_id(standalone, metadata_store):
    b = standalone(listeningInterface="lo", allowLoopback="true", useHostNameAsBookieID="true")
    name = socket.gethostbyaddr("127.0.0.1")[0]  # lo's address by its canonical name
    info = b.registered(metadata_store, f"{name}:{b.port}")
    assert {e.host for e in info.endpoints} == {name}
    write_and_read(standalone.uri, f"{name}:{b.port}")


# -- item 2: a bookie refuses what was meant for another ------------------------------------------------
def point_registration_at(store: ZKMetadataStore, bookie_id: str, other_id: str) -> None:
    """Make ``bookie_id``'s registration list ``other_id``'s endpoints (the mistake that made one bookie
    hold both replicas while the metadata said two)."""
    other = store.bookie_service_info(other_id)
    path = f"available/{bookie_id}"
    store.write_node(path, BookieServiceInfo(other.endpoints, {"readOnly": "false"}).encode(),
                     store.read_node(path).version)


def test_a_request_meant_for_another_bookie_is_refused_naming_both(bk_cluster):
    c, _ = bk_cluster(2)
    a, b = c.bookies
    grpc_client = BookieClient(b.bookie_id, address=a.grpc_address)
    native_client = NativeBookieClient(b.bookie_id, address=a.bookie_id)
    try:
        with pytest.raises(BKWrongBookieException) as refused:
            grpc_client.bookie_info()
        assert (refused.value.expected, refused.value.actual) == (b.bookie_id, a.bookie_id)
        assert f"the bookie at {a.grpc_address} is bookie {a.bookie_id}, not {b.bookie_id}" in str(refused.value)
        with pytest.raises(BKWrongBookieException, match=f"the bookie at {a.bookie_id} is not bookie {b.bookie_id}"):
            native_client.bookie_info()
    finally:
        grpc_client.close()
        native_client.close()
    assert f"meant for bookie {b.bookie_id}; this is bookie {a.bookie_id}" in tail(c.bookies[0].log_path, 50)


@pytest.mark.parametrize("transport", ["grpc", "native"])
def test_a_registration_pointing_at_another_bookie_fails_that_bookie(bk_cluster, transport):
    # native: BookKeeper's protocol to every bookie, at its registered bookie-rpc endpoint
    c, bk = bk_cluster(3, client_conf={"bookieProtocol": transport if transport == "native" else "auto"})
    a, b, spare = (x.bookie_id for x in c.bookies)
    point_registration_at(bk.store, b, a)
    lh = bk.create_ledger(2, 2, 2, password=PASSWORD, bookies=[a, b])
    for i in range(20):
        lh.append(b"entry-%d" % i)
    lh.close()
    # B's copy went nowhere: B was replaced, and the two copies are on two bookies, A and the spare.
    ensembles = bk.ledger_metadata(lh.ledger_id).ensembles
    assert ensembles[-1][1] == (a, spare), ensembles
    ledger = lh.ledger
    for bookie in c.bookies:
        direct = BookieClient(bookie.bookie_id, address=bookie.grpc_address)
        try:
            listed = direct.list_entries(ledger)
        finally:
            direct.close()
        if bookie.bookie_id == b:
            assert listed.status in (status.ENOLEDGER, status.ENOENTRY) or not listed.availabilityOfEntriesOfLedger
        else:
            assert listed.status == status.EOK, (bookie.bookie_id, status.name_of(listed.status))
    reader = bk.open_ledger(lh.ledger_id, password=PASSWORD)
    assert [e.payload for e in reader.read(0, 19)] == [b"entry-%d" % i for i in range(20)]
    reader.close()


def test_bookiesanity_runs_on_the_named_bookie_and_fails_naming_one_that_does_not_answer(cluster):
    c = cluster(3)
    live, stopped, killed = c.bookies
    ok = bk_shell_run(c, "bookiesanity", "-b", live.bookie_id, "-t", "30")
    assert ok.returncode == 0 and f"succeeded on {live.bookie_id}" in ok.stdout, ok.stdout + ok.stderr

    c.kill_bookie(stopped.index, signal.SIGTERM)  # deregistered
    c.kill_bookie(killed.index, signal.SIGKILL)  # registered until its session expires, not answering
    for bookie in (stopped, killed):
        failed = bk_shell_run(c, "bookiesanity", "-b", bookie.bookie_id, "-t", "5")
        assert failed.returncode != 0 and f"FAILED on {bookie.bookie_id}" in failed.stdout, failed.stdout + failed.stderr

    # A live bookie whose registration points at another one's endpoint fails too: its test ledger never
    # reaches it.
    with ZKMetadataStore(c.metadata_service_uri) as store:
        c.start_bookie(stopped.index)
        point_registration_at(store, stopped.bookie_id, live.bookie_id)
    wrong = bk_shell_run(c, "bookiesanity", "-b", stopped.bookie_id, "-t", "30")
    assert wrong.returncode != 0 and f"FAILED on {stopped.bookie_id}" in wrong.stdout, wrong.stdout + wrong.stderr
    assert f"is bookie {live.bookie_id}, not {stopped.bookie_id}" in wrong.stdout
