"""The cluster-wide services of the HTTP admin API (bookie/http/service), called in-process on a real cluster
(real ZooKeeper, real bookie processes) through a ClusterContext made from a bookie's configuration, as the
HTTP server calls them: ``await service.handle(HttpServiceRequest(...))``.

The JSON shapes expected here are BookKeeper 4.17.4's, written from its services (ListLedgerService,
GetLedgerMetaService, ReadLedgerEntryService, ListBookiesService, ListBookieInfoService, ClusterInfoService,
AutoRecoveryStatusService, ListUnderReplicatedLedgerService, ...) and from what its JsonUtil writes for a
LedgerMetadata; so are the status codes and messages: a wrong method is 404 naming the allowed ones, a
missing parameter is BookKeeper's 404, a malformed one 400. A ledger's password appears in no answer.
"""
from __future__ import annotations

import asyncio
import base64
import json
import re

import pytest

from bookie.client import BookKeeper
from bookie.http.cluster_context import ClusterContext
from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.autorecovery_status_service import AutoRecoveryStatusService
from bookie.http.service.cluster_info_service import ClusterInfoService
from bookie.http.service.decommission_service import DecommissionService
from bookie.http.service.delete_ledger_service import DeleteLedgerService
from bookie.http.service.get_ledger_meta_service import GetLedgerMetaService
from bookie.http.service.list_bookie_info_service import ListBookieInfoService, readable
from bookie.http.service.list_bookies_service import ListBookiesService
from bookie.http.service.list_ledger_service import ListLedgerService
from bookie.http.service.list_under_replicated_ledger_service import ListUnderReplicatedLedgerService
from bookie.http.service.lost_bookie_recovery_delay_service import LostBookieRecoveryDelayService
from bookie.http.service.read_ledger_entry_service import ReadLedgerEntryService
from bookie.http.service.recovery_bookie_service import RecoveryBookieService
from bookie.http.service.trigger_audit_service import TriggerAuditService
from bookie.http.service.who_is_auditor_service import WhoIsAuditorService
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LOST_BOOKIE_RECOVERY_DELAY_PATH, LedgerUnderreplicationManager
from bookie.replication.auditor_elector import current_auditor
from bookie.replication.replication_worker import ReplicationSettings, ReplicationWorker
from bookie.server.conf import ServerConfiguration
from bookie.util.processes import stop_process
from tests.helpers.replication import CLIENT, assert_fully_replicated, names, payloads, unregistered
from tests.helpers.shell import bk_shell
from tests.helpers.waiting import wait_for

PASSWORD = b"s3cret-http-pw"
SECRETS = (PASSWORD.decode(), base64.b64encode(PASSWORD).decode())
CONTENT = b"Apache BookKeeper is cool!"  # TestHttpService's entries
# BookKeeper 4.17's JsonUtil.toJson(LedgerMetadata), less "password".
METADATA_FIELDS = ["ledgerId", "metadataFormatVersion", "ensembleSize", "writeQuorumSize", "ackQuorumSize", "state",
                   "length", "lastEntryId", "ctime", "digestType", "customMetadata", "closed", "ctoken",
                   "allEnsembles"]
CLUSTER_INFO_FIELDS = ["auditorElected", "auditorId", "clusterUnderReplicated", "ledgerReplicationEnabled",
                       "totalBookiesCount", "writableBookiesCount", "readonlyBookiesCount", "unavailableBookiesCount"]
NO_LEDGER_ID = "Not ledger found. Should provide ledger_id=<id>"


def context(cluster) -> ClusterContext:
    """The services' view of ``cluster``, from a bookie's configuration."""
    return ClusterContext(ServerConfiguration({"metadataServiceUri": cluster.metadata_service_uri, "zkTimeout": 2000}))


def call(service, method: str, params: dict[str, str] | None = None, body: object = None) -> HttpServiceResponse:
    """``service.handle`` on a request; a body that is not bytes is sent as its JSON."""
    raw = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    response = asyncio.run(service.handle(HttpServiceRequest(method, params or {}, raw)))
    for secret in SECRETS:
        assert secret not in response.body, f"the ledger password is in the answer: {response.body[:200]}"
    return response


def ok_json(response: HttpServiceResponse):
    assert response.code == 200, response.body
    assert response.content_type == "application/json"
    return json.loads(response.body)


def refused(response: HttpServiceResponse, code: int, message: str, prefix: bool = False) -> None:
    """``response`` refuses with ``code`` and, as plain text, ``message`` (with ``prefix``: a message starting so)."""
    assert (response.code, response.content_type) == (code, "text/plain"), (response.code, response.body)
    assert response.body.startswith(message) if prefix else response.body == message, response.body


@pytest.fixture(scope="module")
def ctx(shared_cluster):
    c = context(shared_cluster)
    yield c
    c.close()


@pytest.fixture(scope="module")
def bk(shared_cluster):
    with BookKeeper(shared_cluster.metadata_service_uri, CLIENT) as client:
        yield client


def closed_ledger(bk: BookKeeper, entries: list[bytes], ensemble: int = 3, custom: dict | None = None,
                  bookies: list[str] | None = None) -> int:
    handle = bk.create_ledger(ensemble, 2, 2, password=PASSWORD, custom_metadata=custom, bookies=bookies)
    if entries:
        handle.append_batch(entries).result(120)
    handle.close()
    return handle.ledger_id


# -- methods ------------------------------------------------------------------------------------------------------
ALLOWED = {DeleteLedgerService: "DELETE", ListLedgerService: "GET", GetLedgerMetaService: "GET",
           ReadLedgerEntryService: "GET", ListBookiesService: "GET", ListBookieInfoService: "GET",
           ClusterInfoService: "GET", AutoRecoveryStatusService: "GET or PUT", RecoveryBookieService: "PUT",
           ListUnderReplicatedLedgerService: "GET", WhoIsAuditorService: "GET", TriggerAuditService: "PUT",
           LostBookieRecoveryDelayService: "GET or PUT", DecommissionService: "PUT"}


def test_a_method_a_route_does_not_take_is_404_naming_those_it_takes(ctx):
    for service, allowed in ALLOWED.items():
        for method in ("GET", "PUT", "POST", "DELETE"):
            if method in allowed.split(" or "):
                continue
            response = call(service(ctx), method, {"ledger_id": "1"}, {"bookie_src": "x:1"})
            assert (response.code, response.body) == (404, f"Not found method. Should be {allowed} method"), service


# -- ledgers ------------------------------------------------------------------------------------------------------
def test_ledger_metadata_is_bookkeepers_json_without_the_password(ctx, bk, shared_cluster):
    entries = payloads("m", 10)
    lid = closed_ledger(bk, entries, custom={"owner": b"spark", "blob": b"\x00\xff"})
    md = bk.ledger_metadata(lid)
    expected = {"ledgerId": lid, "metadataFormatVersion": 3, "ensembleSize": 3, "writeQuorumSize": 2,
                "ackQuorumSize": 2, "state": "CLOSED", "length": sum(map(len, entries)), "lastEntryId": 9,
                "ctime": md.ctime, "digestType": "CRC32C",
                "customMetadata": {"blob": "AP8=", "owner": "c3Bhcms="}, "closed": True, "ctoken": md.ctoken,
                "allEnsembles": {"0": [{"id": b} for b in md.ensembles[0][1]]}}
    answer = ok_json(call(GetLedgerMetaService(ctx), "GET", {"ledger_id": str(lid)}))
    assert answer == {str(lid): expected}
    assert list(answer[str(lid)]) == METADATA_FIELDS

    # list: ids only; with metadata as BookKeeper gives it by default (the serialized znode as text, here with
    # no password in it); decode_meta=true: GetLedgerMetaService's objects.
    listed = ok_json(call(ListLedgerService(ctx), "GET"))
    assert listed[str(lid)] is None and all(v is None for v in listed.values())
    assert list(listed) == [str(x) for x in bk.list_ledgers()]
    raw = ok_json(call(ListLedgerService(ctx), "GET", {"print_metadata": "true"}))[str(lid)]
    assert raw.startswith("BookieMetadataFormatVersion\t3\n") and "owner" in raw
    decoded = ok_json(call(ListLedgerService(ctx), "GET", {"print_metadata": "true", "decode_meta": "true"}))
    assert decoded[str(lid)] == expected

    refused(call(GetLedgerMetaService(ctx), "GET"), 404, NO_LEDGER_ID)
    refused(call(GetLedgerMetaService(ctx), "GET", {"ledger_id": "12x"}), 400,
            "ledger_id='12x': a ledger id is a decimal number from 0 to 2^63-1 (or a 128-bit id as 32 hex digits)")
    missing = call(GetLedgerMetaService(ctx), "GET", {"ledger_id": "987654321"})
    assert missing.code == 404 and "ledger 987654321 does not exist" in missing.body
    refused(call(ListLedgerService(ctx), "GET", {"print_metadata": "yes"}), 400,
            "print_metadata='yes': give print_metadata=true or print_metadata=false")


def test_list_ledgers_pages_as_bookkeeper_does(ctx, bk):
    while len(bk.list_ledgers()) < 430:  # TestHttpService's count
        closed_ledger(bk, [], ensemble=2)
    ids = [str(x) for x in bk.list_ledgers()]

    def page(n: int) -> list[str]:
        return list(ok_json(call(ListLedgerService(ctx), "GET", {"print_metadata": "true", "page": str(n)})))

    pages = [page(n) for n in range(1, len(ids) // 100 + 2)]
    # ListLedgerService's positions: page 1 holds the first 99 ledgers, each later page the next 100.
    assert [len(p) for p in pages[:2]] == [99, 100]
    assert sum(pages, []) == ids
    assert len(pages[-1]) == len(ids) - 100 * (len(pages) - 1) + 1  # 430 ledgers: page 5 holds 31
    assert page(len(pages) + 1) == []
    assert len(ok_json(call(ListLedgerService(ctx), "GET", {"page": "2"}))) == len(ids)  # page needs print_metadata
    refused(call(ListLedgerService(ctx), "GET", {"print_metadata": "true", "page": "two"}), 400,
            "page='two' is not an integer")


def test_read_returns_the_written_entries_within_a_cap(ctx, bk):
    lid = closed_ledger(bk, [CONTENT] * 100)
    read = ReadLedgerEntryService(ctx)
    every = ok_json(call(read, "GET", {"ledger_id": str(lid)}))
    assert every == {str(i): CONTENT.decode() for i in range(100)}
    some = ok_json(call(read, "GET", {"ledger_id": str(lid), "start_entry_id": "1", "end_entry_id": "77"}))
    assert sorted(map(int, some)) == list(range(1, 78)) and some["17"] == CONTENT.decode()
    past = ok_json(call(read, "GET", {"ledger_id": str(lid), "start_entry_id": "95", "end_entry_id": "500"}))
    assert list(past) == ["95", "96", "97", "98", "99"]  # as BookKeeperAdmin.readEntries: up to the end
    assert ok_json(call(read, "GET", {"ledger_id": str(lid), "start_entry_id": "100"})) == {}
    paged = ok_json(call(read, "GET", {"ledger_id": str(lid), "page": "1", "start_entry_id": "98"}))
    assert paged == {"Entries for page: ": "1", "98": CONTENT.decode(), "99": CONTENT.decode()}

    # Bytes beyond ASCII are read as US-ASCII reads them (U+FFFD).
    binary = closed_ledger(bk, [b"caf\xc3\xa9\x00"])
    assert ok_json(call(read, "GET", {"ledger_id": str(binary)})) == {"0": "caf\ufffd\ufffd\x00"}

    big = closed_ledger(bk, [b"e%d" % i for i in range(1001)])
    refused(call(read, "GET", {"ledger_id": str(big)}), 400,
            f"entries 0..1000 of ledger {big} are 1001 entries; one request reads at most 1000: narrow "
            "start_entry_id/end_entry_id, or read page=1, 2, ... (1000 entries each)")
    assert ok_json(call(read, "GET", {"ledger_id": str(big), "page": "2"})) == \
        {"Entries for page: ": "2", "1000": "e1000"}
    assert len(ok_json(call(read, "GET", {"ledger_id": str(big), "end_entry_id": "999"}))) == 1000

    refused(call(read, "GET"), 404, NO_LEDGER_ID)
    refused(call(read, "GET", {"ledger_id": str(lid), "start_entry_id": "9", "end_entry_id": "3"}), 400,
            "start_entry_id 9 is past end_entry_id 3")
    refused(call(read, "GET", {"ledger_id": str(lid), "start_entry_id": "-2"}), 400,
            "start_entry_id=-2, end_entry_id=-1: entry ids start at 0 (end_entry_id -1: to the ledger's last entry)")
    refused(call(read, "GET", {"ledger_id": str(lid), "end_entry_id": "ten"}), 400,
            "end_entry_id='ten' is not an integer")


def test_delete_really_deletes(ctx, bk):
    lid = closed_ledger(bk, [CONTENT] * 5)
    delete = DeleteLedgerService(ctx)
    refused(call(delete, "DELETE"), 404, NO_LEDGER_ID)
    assert ok_json(call(delete, "DELETE", {"ledger_id": str(lid)})) == f"Deleted ledger: {lid}"
    assert LedgerId(0, lid) not in bk.list_ledgers()
    assert str(lid) not in ok_json(call(ListLedgerService(ctx), "GET"))
    again = call(delete, "DELETE", {"ledger_id": str(lid)})
    assert again.code == 404 and f"ledger {lid} does not exist" in again.body


# -- bookies and the cluster ------------------------------------------------------------------------------------
def test_list_bookies_and_their_disk(ctx, shared_cluster):
    ids = sorted(b.bookie_id for b in shared_cluster.bookies)
    assert ok_json(call(ListBookiesService(ctx), "GET")) == {b: None for b in ids}
    assert ok_json(call(ListBookiesService(ctx), "GET", {"type": "rw", "print_hostnames": "true"})) == \
        {b: "127.0.0.1" for b in ids}
    assert ok_json(call(ListBookiesService(ctx), "GET", {"type": "ro"})) == {}
    refused(call(ListBookiesService(ctx), "GET", {"type": "all"}), 400,
            "type='all': list type=rw (writable bookies) or type=ro (read-only bookies)")

    info = ok_json(call(ListBookieInfoService(ctx), "GET"))
    assert list(info) == ids + ["ClusterInfo: "]
    space = r"\{Free: (\d+)(\(\d+(\.\d{1,3})?[KMGT]B\))?, Total: (\d+)(\(\d+(\.\d{1,3})?[KMGT]B\))?\}"
    per_bookie = [re.fullmatch(f": {space},", info[b]) for b in ids]
    assert all(per_bookie), info
    total = re.fullmatch(space, info["ClusterInfo: "])
    assert int(total[1]) == sum(int(m[1]) for m in per_bookie) and int(total[4]) == sum(int(m[4]) for m in per_bookie)


def test_readable_is_bookkeepers_getreadable():
    assert [readable(v) for v in (0, 999, 1000, 1234567, 81_234_567_890, 250 * 10**9, 5 * 10**15)] == \
        ["", "", "(1KB)", "(1.234MB)", "(81.234GB)", "(250GB)", "(5000TB)"]


def test_cluster_info_counts_the_bookies_and_the_auditor(ctx, shared_cluster):
    info = ok_json(call(ClusterInfoService(ctx), "GET"))
    assert list(info) == CLUSTER_INFO_FIELDS
    assert info == {"auditorElected": False, "auditorId": "", "clusterUnderReplicated": False,
                    "ledgerReplicationEnabled": True, "totalBookiesCount": 4, "writableBookiesCount": 4,
                    "readonlyBookiesCount": 0, "unavailableBookiesCount": 0}


# -- AutoRecovery ---------------------------------------------------------------------------------------------
def test_autorecovery_status_toggles_what_the_shell_shows(ctx, shared_cluster):
    status = AutoRecoveryStatusService(ctx)
    assert ok_json(call(status, "GET")) == {"enabled": True}
    try:
        assert ok_json(call(status, "PUT", {"enabled": "false"})) == {"enabled": False}
        assert bk_shell(shared_cluster, "autorecovery").strip() == "AutoRecovery is disabled"
        assert ok_json(call(status, "GET")) == {"enabled": False}
        assert ok_json(call(status, "PUT", {"enabled": "false"})) == {"enabled": False}  # already: nothing to do
        assert ok_json(call(ClusterInfoService(ctx), "GET"))["ledgerReplicationEnabled"] is False
    finally:
        assert ok_json(call(status, "PUT", {"enabled": "TRUE"})) == {"enabled": True}
    assert bk_shell(shared_cluster, "autorecovery").strip() == "AutoRecovery is enabled"
    refused(call(status, "PUT"), 400, "Param 'enabled' not found in {}: give enabled=true or enabled=false")
    refused(call(status, "PUT", {"enabled": "maybe"}), 400, "enabled='maybe': give enabled=true or enabled=false")


def test_lost_bookie_recovery_delay_round_trips(ctx, shared_cluster):
    delay = LostBookieRecoveryDelayService(ctx)
    stored = ctx.underreplication().get_lost_bookie_recovery_delay()
    shown = call(delay, "GET")
    assert (shown.code, shown.body) == (200, f"lostBookieRecoveryDelay value: {0 if stored is None else stored}")
    put = call(delay, "PUT", body={"delay_seconds": 17})
    assert (put.code, put.body) == (200, "Success set lostBookieRecoveryDelay to 17")
    assert call(delay, "GET").body == "lostBookieRecoveryDelay value: 17"
    assert bk_shell(shared_cluster, "lostbookierecoverydelay", "-get").strip() == "LostBookieRecoveryDelay value: 17"
    bk_shell(shared_cluster, "lostbookierecoverydelay", "-set", "5")
    assert call(delay, "GET").body == "lostBookieRecoveryDelay value: 5"

    refused(call(delay, "PUT"), 404, "Null request body for lostBookieRecoveryDelay.")
    refused(call(delay, "PUT", body={"delay": 3}), 404, "Request body not contains lostBookieRecoveryDelay.")
    for bad in (-1, "10", 1.5, True, 2**31):
        refused(call(delay, "PUT", body={"delay_seconds": bad}), 400,
                f"delay_seconds is a whole number of seconds from 0 to 2147483647, not {bad!r}")
    refused(call(delay, "PUT", body=b"{delay"), 400, "the request body is not JSON", prefix=True)
    refused(call(delay, "PUT", body=[17]), 400, "the request body is JSON list, not a JSON object ({...})")
    assert call(delay, "GET").body == "lostBookieRecoveryDelay value: 5"


def test_list_under_replicated_ledgers_filters_and_prints_as_bookkeeper(ctx, shared_cluster):
    listing = ListUnderReplicatedLedgerService(ctx)
    refused(call(listing, "GET"), 404, "No under replicated ledgers found")
    manager = LedgerUnderreplicationManager(ctx.store(), "worker-http")
    # Ledgers that do not exist, marked by hand (as TestHttpService marks them): no worker runs on this cluster.
    marks = {10**12 + 1: ["a:1"], 10**12 + 2: ["a:1", "b:2"], 10**12 + 3: ["b:2"]}
    scoped = LedgerId(5, 7)
    try:
        for lid, missing in marks.items():
            manager.mark_ledger_underreplicated(lid, missing)
        manager.mark_ledger_underreplicated(scoped, ["c:3"])
        every = list(marks) + [scoped.qualified_name]
        assert ok_json(call(listing, "GET")) == every
        assert ok_json(call(listing, "GET", {"missingreplica": "a:1"})) == [10**12 + 1, 10**12 + 2]
        assert ok_json(call(listing, "GET", {"excludingmissingreplica": "a:1"})) == [10**12 + 3, scoped.qualified_name]
        assert ok_json(call(listing, "GET", {"missingreplica": "b:2", "excludingmissingreplica": "a:1"})) == \
            [10**12 + 3]
        assert ok_json(call(listing, "GET", {"missingreplica": " ", "excludingmissingreplica": ""})) == every
        refused(call(listing, "GET", {"missingreplica": "z:9"}), 404, "No under replicated ledgers found")
        assert ok_json(call(listing, "GET", {"printmissingreplica": "", "missingreplica": "b:2"})) == \
            {str(10**12 + 2): ["a:1", "b:2"], str(10**12 + 3): ["b:2"]}
        assert manager.acquire_underreplicated_ledger(10**12 + 3)
        assert ok_json(call(listing, "GET", {"printreplicationworkerid": "true", "missingreplica": "b:2"})) == \
            {str(10**12 + 2): {"replicationWorkerId": None}, str(10**12 + 3): {"replicationWorkerId": "worker-http"}}
        assert ok_json(call(listing, "GET", {"printreplicationworkerid": "", "printmissingreplica": "",
                                             "missingreplica": "b:2"}))[str(10**12 + 3)] == \
            {"missingReplicas": ["b:2"], "replicationWorkerId": "worker-http"}
        assert ok_json(call(listing, "GET", {"printmissingreplica": "false"})) == every
        refused(call(listing, "GET", {"printmissingreplica": "please"}), 400,
                "printmissingreplica='please': give printmissingreplica=true or printmissingreplica=false")
        assert ok_json(call(ClusterInfoService(ctx), "GET"))["clusterUnderReplicated"] is True
    finally:
        manager.release_underreplicated_ledger(10**12 + 3)
        for lid in [*marks, scoped]:
            manager.mark_ledger_replicated(lid)
    refused(call(listing, "GET"), 404, "No under replicated ledgers found")


def test_auditor_is_named_and_an_audit_is_triggered_only_with_one_elected(ctx, shared_cluster):
    who, trigger = WhoIsAuditorService(ctx), TriggerAuditService(ctx)
    refused(call(who, "GET"), 404, "No auditor elected")
    refused(call(trigger, "PUT"), 404,
            "Exception when do operation.No auditor elected, though Autorecovery is enabled. So giving up.")
    quiet = {"zkTimeout": 2000, "lostBookieRecoveryDelay": 3600, "auditorPeriodicCheckInterval": 0,
             "auditorPeriodicBookieCheckInterval": 0, "auditorReplicasCheckInterval": 0}
    participant = shared_cluster.start_autorecovery("ar-http", **quiet)
    try:
        store = ctx.store()
        wait_for(lambda: current_auditor(store) == "ar-http", "the auditor")
        auditor = call(who, "GET")
        assert (auditor.code, auditor.body) == (200, "Auditor: ar-http")
        info = ok_json(call(ClusterInfoService(ctx), "GET"))
        assert (info["auditorElected"], info["auditorId"]) == (True, "ar-http")
        wait_for(lambda: store.read_node(LOST_BOOKIE_RECOVERY_DELAY_PATH) is not None, "the stored delay")
        before = store.read_node(LOST_BOOKIE_RECOVERY_DELAY_PATH)
        done = call(trigger, "PUT")
        assert (done.code, done.body) == (200, "Success trigger audit.")
        after = store.read_node(LOST_BOOKIE_RECOVERY_DELAY_PATH)  # rewritten as it was: the auditor's watch fires
        assert after.version == before.version + 1 and after.value == before.value
        assert ok_json(call(AutoRecoveryStatusService(ctx), "PUT", {"enabled": "false"})) == {"enabled": False}
        try:
            refused(call(trigger, "PUT"), 404, "Exception when do operation.Autorecovery is disabled. So giving up!")
        finally:
            call(AutoRecoveryStatusService(ctx), "PUT", {"enabled": "true"})
    finally:
        stop_process(participant)
    wait_for(lambda: current_auditor(ctx.store()) is None, "the auditor's vote to go")


# -- recovery and decommission (each kills a bookie: a cluster of its own) ---------------------------------------
def test_recovery_moves_a_lost_bookies_data_and_deletes_its_cookie(bk_cluster):
    cluster, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    written = {closed_ledger(bk, payloads(f"r{i}", 30), bookies=bookies): payloads(f"r{i}", 30)
               for i, bookies in enumerate([[b[0], b[1], b[2]], [b[0], b[3], b[1]]])}
    ctx = context(cluster)
    try:
        recovery = RecoveryBookieService(ctx)
        refused(call(recovery, "PUT"), 404, "No request body provide.")
        refused(call(recovery, "PUT", body=b"[1,"), 404, "ERROR parameters: the request body is not JSON", prefix=True)
        refused(call(recovery, "PUT", body={"bookie_src": []}), 404,
                'ERROR parameters: bookie_src names no bookie (it is []): {"bookie_src": ["host:port", ...], '
                '"delete_cookie": false}')
        refused(call(recovery, "PUT", body={"bookie_src": [b[0]], "bookie_dest": [b[3]]}), 404,
                "ERROR parameters: bookie_dest is not supported (BookKeeper removed it): the placement policy picks "
                "the bookies each fragment is copied to")
        refused(call(recovery, "PUT", body={"bookie_src": [b[0]], "delete_cookies": True}), 404,
                "ERROR parameters: unknown field(s) delete_cookies: the body takes bookie_src, bookie_dest, "
                "delete_cookie")
        refused(call(recovery, "PUT", body={"bookie_src": ["a/b"]}), 404, "ERROR parameters: bookie_src 'a/b': ",
                prefix=True)
        refused(call(recovery, "PUT", body={"bookie_src": [b[0]], "delete_cookie": "yes"}), 404,
                "ERROR parameters: delete_cookie is true or false, not 'yes'")
        assert all(names(bk, lid, b[0]) for lid in written)  # nothing was started

        cluster.kill_bookie(0)
        wait_for(unregistered(bk, b[0]), f"{b[0]} to leave the registration")
        sent = call(recovery, "PUT", body={"bookie_src": [b[0]], "bookie_dest": [], "delete_cookie": True})
        assert (sent.code, sent.body) == (200, "Success send recovery request command.")
        wait_for(lambda: bk.store.read_cookie(b[0]) is None, f"the recovery of {b[0]} to end with its cookie")
        for lid, data in written.items():
            assert not names(bk, lid, b[0])
            assert_fully_replicated(bk, lid)
            with bk.open_ledger(lid, PASSWORD) as reader:
                assert [e.payload for e in reader.read(0, len(data) - 1)] == data
    finally:
        ctx.close()


def test_decommission_answers_at_once_and_moves_the_bookies_ledgers(bk_cluster):
    cluster, bk = bk_cluster(4, client_conf=CLIENT)
    b = [x.bookie_id for x in cluster.bookies]
    written = [closed_ledger(bk, payloads(f"d{i}", 20), bookies=bookies)
               for i, bookies in enumerate([[b[0], b[1], b[2]], [b[2], b[3], b[0]]])]
    ctx = context(cluster)
    worker_bk = BookKeeper(cluster.metadata_service_uri, CLIENT)
    worker = ReplicationWorker(worker_bk, LedgerUnderreplicationManager(worker_bk.store, "worker"),
                               ReplicationSettings(rw_rereplicate_backoff_ms=200))
    try:
        decommission = DecommissionService(ctx)
        refused(call(decommission, "PUT"), 404, "Null request body for DecommissionService.")
        refused(call(decommission, "PUT", body={"bookie": b[2]}), 404, "Request body not contains bookie_src.")
        refused(call(decommission, "PUT", body=b"bookie_src"), 400, "the request body is not JSON", prefix=True)
        refused(call(decommission, "PUT", body={"bookie_src": b[2]}), 404,
                f"Exception when send decommission command.bookie {b[2]} is registered as writable: stop it before "
                "decommissioning it")
        refused(call(decommission, "PUT", body={"bookie_src": 3181}), 404,
                "Exception when send decommission command.bookie_src is a bookie id", prefix=True)
        assert bk.store.read_cookie(b[2]) is not None

        cluster.kill_bookie(2)
        wait_for(unregistered(bk, b[2]), f"{b[2]} to leave the registration")
        sent = call(decommission, "PUT", body={"bookie_src": b[2]})
        assert (sent.code, sent.body) == (200, f"Success send decommission Bookie command {b[2]}")
        # No auditor: the job marks the ledgers itself; the worker moves them; then the cookie goes.
        worker.start()
        wait_for(lambda: bk.store.read_cookie(b[2]) is None, f"the decommission of {b[2]} to end with its cookie",
                 timeout=300)
        for lid in written:
            assert not names(bk, lid, b[2])
            assert_fully_replicated(bk, lid)
        assert list(LedgerUnderreplicationManager(bk.store).list_underreplicated()) == []
    finally:
        worker.shutdown()
        worker_bk.close()
        ctx.close()
