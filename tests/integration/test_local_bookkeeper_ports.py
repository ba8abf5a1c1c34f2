"""LocalBookKeeper, which every end-to-end test stands on: a new bookie whose port another process took
between picking it and binding it starts on new ports instead of failing the test."""
from __future__ import annotations

import socket

from bookie.client import BookKeeper
from bookie.testing.local_bookkeeper import LocalBookKeeper


def test_a_new_bookie_whose_port_was_taken_starts_on_new_ports(tmp_path):
    cluster = LocalBookKeeper(2, base_dir=str(tmp_path / "cluster"))
    taken = cluster.bookies[1].port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with cluster:
            assert cluster.bookies[1].port != taken
            with BookKeeper(cluster.metadata_service_uri) as bk:
                with bk.create_ledger(2, 2, 2) as ledger:
                    ledger.append(b"written to both bookies")
                assert {b.bookie_id for b in cluster.bookies} == set(bk.writable_bookies())
