"""A ``bk bookie`` process serves two transports over one engine (issue 11): BookKeeper's native
protocol on bookiePort (its bookie id), this project's gRPC on grpcPort, and registers both.

The native side is spoken here with raw frames (v3 and v2), the gRPC side with BookieClient, and the
BookKeeper client is checked to pick gRPC from the registration.
"""
from __future__ import annotations

import signal
import socket
import subprocess
import sys

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.meta.bookie_service_info import BOOKIE_RPC, GRPC, Endpoint
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import entry_format
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.proto.native_frames import FrameDecoder, encode_frames
from tests.helpers.waiting import DEADLINE

PASSWORD = b"pw"
KEY = generate_master_key(PASSWORD)


def stored_entry(ledger: LedgerId, entry_id: int) -> bytes:
    """An entry as a writer sends it and a bookie stores it (digest crc32c)."""
    return DigestManager(ledger, PASSWORD).build_entry(entry_id, entry_id - 1, entry_id + 1, b"entry-%d" % entry_id)


def exchange(port: int, payload: bytes) -> bytes:
    """One frame to 127.0.0.1:``port``, one frame back."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(encode_frames([payload]))
        decoder = FrameDecoder(1 << 20)
        while True:
            data = sock.recv(1 << 16)
            assert data, "the bookie closed the connection"
            frames = decoder.feed(data)
            if frames:
                return frames[0]


def v3_read(port: int, ledger_id: int, entry_id: int) -> pb.Response:
    request = pb.Request(header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.READ_ENTRY, txnId=7),
                         readRequest=pb.ReadRequest(ledgerId=ledger_id, entryId=entry_id))
    response = pb.Response.FromString(exchange(port, request.SerializeToString()))
    assert response.header.txnId == 7
    return response


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=DEADLINE).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_bookie_serves_native_on_its_bookie_port_grpc_beside_it_and_registers_both(cluster):
    c = cluster(1)
    b = c.bookies[0]
    assert b.bookie_id == f"127.0.0.1:{b.port}" and b.grpc_port != b.port
    with ZKMetadataStore(c.metadata_service_uri) as store:
        info = store.bookie_service_info(b.bookie_id)
    assert info.endpoints == (Endpoint("bookie", "127.0.0.1", b.port, BOOKIE_RPC),
                              Endpoint("grpc", "127.0.0.1", b.grpc_port, GRPC))

    ledger = LedgerId(0, 31)
    client = BookieClient(b.bookie_id, address=b.grpc_address)
    try:
        added = client.add(ledger, KEY, entry_format.frame(stored_entry(ledger, e) for e in range(3))).result(DEADLINE)
        assert added.status == status.EOK
    finally:
        client.close()
    # The same engine answers on the native port: v3 (a protobuf Request) ...
    read = v3_read(b.port, ledger.ledger_id, 1)
    assert (read.status, read.readResponse.status) == (status.EOK, status.EOK)
    assert read.readResponse.body == stored_entry(ledger, 1)
    assert v3_read(b.port, ledger.ledger_id, 3).readResponse.status == status.ENOENTRY
    # ... and v2 (BookieProtocol's binary header), as Pulsar's brokers speak it.
    answer = v2.decode_response(exchange(b.port, v2.encode_request(v2.ReadRequest(2, v2.FLAG_NONE, 31, 2))))
    assert answer == v2.ReadResponse(2, v2.EOK, 31, 2, stored_entry(ledger, 2))


def test_the_client_picks_grpc_from_the_registration_and_writes_and_reads(bk_cluster):
    c, bk = bk_cluster(3)
    lh = bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2, password=PASSWORD)
    for i in range(50):
        lh.append(b"payload-%d" % i)
    lh.close()
    assert all(isinstance(bk.bookie_client(b.bookie_id), BookieClient) for b in c.bookies)
    reader = bk.open_ledger(lh.ledger_id, password=PASSWORD)
    assert [e.payload for e in reader.read(0, 49)] == [b"payload-%d" % i for i in range(50)]
    reader.close()


def test_sigterm_stops_both_servers_and_deregisters(cluster):
    c = cluster(1)
    b = c.bookies[0]
    assert c.kill_bookie(0, signal.SIGTERM) == 0
    assert refuses_connections(b.port) and refuses_connections(b.grpc_port)
    with ZKMetadataStore(c.metadata_service_uri) as store:
        assert store.bookie_service_info(b.bookie_id) is None


def test_one_port_for_both_transports_is_refused(cluster):
    c = cluster(1)
    b = c.bookies[0]
    c.kill_bookie(0, signal.SIGTERM)
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", "bookie", "--conf", b.conf_path,
                          "--grpc-port", str(b.port)], capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode != 0 and "grpcPort and bookiePort are both" in out.stderr, out.stderr

