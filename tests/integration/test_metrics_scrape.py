"""What Prometheus scrapes from bookie processes over HTTP (``/metrics``), and what the repository's Grafana
dashboard (dashboards/bookkeeper.json) queries: every name the dashboard reads is exported, with the type and
labels its query needs; the counts move with the work (adds counted = adds done, on every bookie that took
them); AutoRecovery's metrics move when a bookie is lost (the auditor marks, a worker copies).

Four bookies, each running AutoRecovery (autoRecoveryDaemonEnabled) and the HTTP server, shared by the tests
of this module, which run in order (the last one kills a bookie).
"""
from __future__ import annotations

import json
import os
import re
import threading

import pytest

from bookie.client import BookKeeper
from bookie.proto.checksum import MAC_LENGTH, DigestType
from bookie.proto.entry_format import V1_HEADER_LEN
from tests.helpers.metrics import Scrape, parse
from tests.helpers.replication import payloads, write
from tests.helpers.waiting import wait_for
from tests.integration.test_autorecovery_e2e import AUTORECOVERY
from tests.integration.test_http_admin import call

DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "dashboards", "bookkeeper.json")
SETTINGS = {**AUTORECOVERY, "httpServerEnabled": True, "httpServerPort": 0, "autoRecoveryDaemonEnabled": True,
            "prometheusStatsLatencyRolloverSeconds": 1}
ENTRIES = 200
CLIENT = {"addEntryTimeout": 10.0, "readTimeout": 10.0}

# A PromQL metric reference: a name before a selector or a range/closing paren, or a {__name__=~"re"} selector.
_NAME = re.compile(r"\b([a-zA-Z_][a-zA-Z0-9_]*)(?=\{|\[|\))")
_NAME_REGEX = re.compile(r'__name__=~"([^"]+)"')
_FUNCTIONS = {"sum", "max", "min", "avg", "count", "rate", "irate", "increase", "vector"}
_GROUPING = re.compile(r"\bby \([^)]*\)")
_RATES = re.compile(r"\b(?:rate|irate|increase)\(([a-zA-Z_][a-zA-Z0-9_]*)")


@pytest.fixture(scope="module")
def metrics_cluster(module_cluster):
    return module_cluster(4, **SETTINGS)


def scrape(bookie) -> Scrape:
    answer = call(bookie.http_address, "/metrics")
    assert answer.code == 200, answer.text
    assert answer.content_type.startswith("text/plain; version=0.0.4"), answer.content_type
    return parse(answer.text)


def total(scrapes: list[Scrape], name: str, **labels: str) -> float:
    """``name``'s samples with ``labels`` (and any others, e.g. journalIndex) summed over the bookies."""
    wanted = set(labels.items())
    return sum(v for s in scrapes for (n, lbl), v in s.samples.items() if n == name and wanted <= set(lbl))


def dashboard_queries() -> list[str]:
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    queries = [t["expr"] for p in panels for t in p["targets"]]
    assert len(queries) > 30, "the dashboard has lost its panels"
    return queries


def family(scrape: Scrape, name: str) -> tuple[str, str]:
    """The exported family a referenced name belongs to, and its type (a summary's _count and _sum are its own)."""
    if name in scrape.types:
        return name, scrape.types[name]
    for suffix in ("_count", "_sum"):
        base = name.removesuffix(suffix)
        if base != name and scrape.types.get(base) == "summary":
            return base, "summary"
    raise AssertionError(f"the dashboard queries {name}, which the bookie does not export")


def test_a_bookie_under_load_exports_what_the_dashboard_queries_and_counts_the_work(metrics_cluster):
    with BookKeeper(metrics_cluster.metadata_service_uri, CLIENT) as bk:
        check_the_dashboard_and_the_counts(metrics_cluster.bookies, bk)


def check_the_dashboard_and_the_counts(bookies, bk) -> None:
    before = [scrape(b) for b in bookies]
    # Under load: scrape while a writer appends (the in-progress gauges are there while requests are).
    handle = bk.create_ledger(3, 3, 3, password=b"pw")
    data = payloads("scraped", ENTRIES)
    writer = threading.Thread(target=write, args=(handle, data), name="writer")
    writer.start()
    during = [scrape(b) for b in bookies]
    writer.join()
    handle.close()
    reader = bk.open_ledger(handle.ledger_id, password=b"pw")
    assert [e.payload for e in reader.read(0, ENTRIES - 1)] == data
    reader.close()
    after = [scrape(b) for b in bookies]

    # Every name the dashboard reads, with the type its query needs.
    s = during[0]
    for query in dashboard_queries():
        for regex in _NAME_REGEX.findall(query):
            assert any(re.fullmatch(regex, n) for n in s.names()), f"{query}: no exported name matches {regex}"
        for name in set(_NAME.findall(_GROUPING.sub("", query))) - _FUNCTIONS:
            base, kind = family(s, name)
            if 'quantile="' in query and name == base:
                assert kind == "summary", f"{query}: {name} is a {kind}, not a summary"
        for name in _RATES.findall(query):
            base, kind = family(s, name)
            assert kind == "counter" or name != base, f"{query}: rate of {name}, a {kind}"
    # The labels the queries select on (a quantile is NaN in a window without events, but always there).
    quantiles = {dict(lbl)["quantile"] for n, lbl in s.samples
                 if n == "bookkeeper_server_ADD_ENTRY_REQUEST" and dict(lbl)["success"] == "true"}
    assert quantiles == {"0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1.0"}, quantiles
    journal = {dict(lbl).get("journalIndex") for n, lbl in s.samples if n == "bookie_journal_JOURNAL_SYNC_count"}
    assert journal == {"0"}, journal
    assert s.types["bookie_WRITE_BYTES"] == "counter" and s.types["bookie_SERVER_STATUS"] == "gauge"
    assert {s.value("bookie_SERVER_STATUS") for s in after} == {1.0}

    # Adds counted = adds done: three copies of each entry, one on each of three bookies.
    def moved(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert moved("bookkeeper_server_ADD_ENTRY_count", success="true") == 3 * ENTRIES
    assert moved("bookkeeper_server_ADD_ENTRY_REQUEST_count", success="true") == 3 * ENTRIES
    assert moved("bookkeeper_server_ADD_ENTRY_count", success="false") == 0
    # The journal also records each bookie's first add of a ledger's master key (BookKeeper's Journal does).
    assert moved("bookie_journal_JOURNAL_ADD_ENTRY_count", success="true") == 3 * (ENTRIES + 1)
    assert moved("bookie_journal_JOURNAL_SYNC_count", success="true") > 0
    # Bytes as BookKeeper counts them: each entry as stored, header (ledger id, entry id, LAC, length) and
    # digest (CRC32C, the client's default) with the payload.
    stored = sum(V1_HEADER_LEN + MAC_LENGTH[DigestType.CRC32C] + len(p) for p in data)
    assert moved("bookie_WRITE_BYTES") == 3 * stored
    # The read above read each entry once, from one bookie.
    assert moved("bookkeeper_server_READ_ENTRY_count", success="true") == ENTRIES
    assert moved("bookie_READ_BYTES") == stored


def test_autorecovery_metrics_move_when_a_bookie_is_lost(metrics_cluster):
    with BookKeeper(metrics_cluster.metadata_service_uri, CLIENT) as bk:
        check_autorecovery_metrics(metrics_cluster, bk)


def check_autorecovery_metrics(metrics_cluster, bk) -> None:
    handle = bk.create_ledger(3, 3, 3, password=b"pw")
    write(handle, payloads("recovered", 50))
    handle.close()
    lost_id = bk.ledger_metadata(handle.ledger_id).ensembles[0][1][0]
    lost = next(i for i, b in enumerate(metrics_cluster.bookies) if b.bookie_id == lost_id)
    # Every ledger here has one fragment on three of the four bookies (E = W): what the lost bookie held of
    # them is each one's every entry.
    to_copy = 0
    for ledger in bk.list_ledgers():
        md = bk.ledger_metadata(ledger)
        if lost_id in md.ensembles[0][1]:
            to_copy += md.last_entry_id + 1
    survivors = [b for i, b in enumerate(metrics_cluster.bookies) if i != lost]
    before = [scrape(b) for b in survivors]
    metrics_cluster.kill_bookie(lost)

    def counted(name: str) -> float:
        return total([scrape(b) for b in survivors], name) - total(before, name)

    # The auditor (one of the survivors) marks the lost bookie's ledgers; a worker copies this one's entries.
    wait_for(lambda: counted("auditor_NUM_UNDER_REPLICATED_LEDGERS_count") > 0, "the auditor to record a marking")
    wait_for(lambda: counted("replication_worker_NUM_ENTRIES_WRITTEN") >= to_copy,
             "the workers to record the entries they copied")
    wait_for(lambda: counted("replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED") > 0,
             "the workers to record a ledger replicated")
    assert counted("replication_worker_NUM_ENTRIES_WRITTEN") == to_copy
