"""BookKeeper's Java client (v3 and v2 wire protocol) against this project's native protocol server
(bookie/server/native_server.py): the byte layouts checked by the real thing.

Three storage engines run in this process, each served by a BookieNettyServer on a free 127.0.0.1
port and registered in ZooKeeper under that address with a ``bookie-rpc`` endpoint, as Java bookies
register; this checks the server alone, over v3 and v2. The Java tools against `bk bookie` processes
are in test_java_tools_on_our_bookies.py.
"""
from __future__ import annotations

import asyncio
import json
import threading

import pytest

from bookie.meta.bookie_service_info import BOOKIE_RPC, Endpoint
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.native_server import BookieNettyServer
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk
from tests.helpers.engine_ops import engine_settings
from tests.helpers.waiting import DEADLINE

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)


@pytest.fixture
def native_cluster(zookeeper, make_bookie, tmp_path):
    """A cluster root (initialised by BookieShell) whose three bookies are native servers in this process."""
    tools = RealBookKeeper(zookeeper.connect_string, str(tmp_path / "tools"), num_bookies=0).start()
    store = ZKMetadataStore(tools.metadata_service_uri)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="native-servers", daemon=True)
    thread.start()
    servers = []
    try:
        for i in range(3):
            settings = engine_settings(tmp_path / f"bookie{i}")
            bookie = make_bookie(**{k: settings[k] for k in ("journalDirectories", "ledgerDirectories")})
            server = asyncio.run_coroutine_threadsafe(BookieNettyServer(bookie, host="127.0.0.1").start(), loop).result(DEADLINE)
            servers.append(server)
            store.register_bookie(f"127.0.0.1:{server.port}", False,
                                  (Endpoint("bookie", "127.0.0.1", server.port, BOOKIE_RPC),))
        yield tools
    finally:
        for server in servers:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(DEADLINE)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(DEADLINE)
        loop.close()
        store.close()


def test_the_java_client_writes_recovers_and_reads_over_v3(native_cluster):
    ledger = native_cluster.client("write", "300", "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2",
                                   "--entry-size", "100", "--no-close").stdout.split()[-1]
    verified = native_cluster.client("verify", ledger, "300", "--entry-size", "100")  # recovery: fence reads, LAC
    assert f"OK ledger {ledger}: 300 entries verified" in verified.stdout


def test_the_java_client_adds_and_reads_over_v2(native_cluster):
    out = native_cluster.run("bench", native_cluster.metadata_service_uri, "--seconds", "1", "--warmup-seconds", "1",
                             "--single", "20", "--window", "100", "--v2").stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["protocol"] == "v2" and result["entries"] > 0 and result["read_entries"] == result["entries"]
