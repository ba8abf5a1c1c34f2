"""BookKeeper's HTTP admin API (bookie.http) served by real bookie processes and by ``bk autorecovery``: every
bookie-local route answers with the JSON its BookKeeper service writes; unknown routes, methods and bad bodies are
refused with BookKeeper's codes and a clear message, the server serving on; a bookie switched read-only under writes
moves its registration and the writes to the other bookies, losing nothing acknowledged; is_ready says 503 while the
journal replays and while the bookie stops; the registration lists the httpserver endpoint; ``bk local`` prints each
bookie's HTTP address.

The tests share one cluster (module scope) and run in order: the later ones restart its last bookie.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

import pytest

from bookie.client import BookKeeper
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.util.processes import free_port, free_ports, port_taken, stop_process
from tests.helpers.held_bookie import RELEASE, Hold
from tests.helpers.waiting import wait_for
from tests.integration.test_cli_local import read_until
from tests.procs import child_env

SECRET = "hunter2"
SETTINGS = {"zkTimeout": 2000, "httpServerEnabled": True, "httpServerPort": 0,
            "httpServerKeystorePassword": SECRET}  # BookKeeper's key, unknown here: kept, and shown masked

# The JSON each route writes, from BookKeeper 4.17.4's classes.
STATE = {"running", "readOnly", "shuttingDown", "availableForHighPriorityWrites"}  # BookieStateService.BookieState
INFO = {"freeSpace", "totalSpace"}  # BookieInfoService.BookieInfo
SANITY = {"passed", "readOnly"}  # BookieSanityService.BookieSanity
READ_ONLY = {"readOnly"}  # BookieStateReadOnlyService.ReadOnlyState
GC_STATUS = {"forceCompacting", "majorCompacting", "minorCompacting", "lastMajorCompactionTime",
             "lastMinorCompactionTime", "lastEntryLocationCompactionTime", "majorCompactionCounter",
             "minorCompactionCounter", "entryLocationCompactionCounter"}  # GarbageCollectionStatus
SUSPENDED = {"isMajorGcSuspended", "isMinorGcSuspended"}  # SuspendCompactionService's GET
DISK_FILES = {"journal files", "entrylog files", "index files"}  # ListDiskFilesService
LAST_LOG_MARK_KEY = re.compile(r"LastLogMark: Journal Id - (\d+)\(([0-9a-f]+)\.txn\)")  # GetLastLogMarkService
LAST_LOG_MARK_VALUE = re.compile(r"Pos - (\d+)")
PROMETHEUS_004 = "text/plain; version=0.0.4; charset=utf-8"  # MetricsService.PROMETHEUS_CONTENT_TYPE_004
NOT_STARTED = "Bookie is not fully started yet"  # BookieIsReadyService


@dataclass
class Answer:
    code: int
    content_type: str
    text: str

    def json(self):
        assert self.content_type.startswith("application/json"), (self.code, self.content_type, self.text)
        return json.loads(self.text)


def call(address: str, path: str, method: str = "GET", body=None, params: dict | None = None) -> Answer:
    """One request; ``body`` bytes as they are, anything else as JSON."""
    url = f"http://{address}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return Answer(response.status, response.headers["Content-Type"], response.read().decode())
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.headers["Content-Type"], error.read().decode())


def answers(address: str, path: str = "/heartbeat") -> bool:
    try:
        return call(address, path).code == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def http_cluster(module_cluster):
    """Four bookies serving HTTP, each on a port of its own."""
    return module_cluster(4, **SETTINGS)


@pytest.fixture(scope="module")
def bk(http_cluster):
    with BookKeeper(http_cluster.metadata_service_uri, {"addEntryTimeout": 5.0, "readTimeout": 5.0}) as client:
        yield client


@pytest.fixture(scope="module")
def store(http_cluster):
    with ZKMetadataStore(http_cluster.metadata_service_uri) as s:
        yield s


def write_on(bk, bookies: list[str], count: int = 20) -> int:
    lh = bk.create_ledger(len(bookies), len(bookies), len(bookies), password=b"pw", bookies=bookies)
    for future in [lh.append_async(b"entry %d" % i) for i in range(count)]:
        future.result()
    lh.close()
    return lh.ledger_id


def mark_of(address: str) -> tuple[int, int]:
    marks = call(address, "/api/v1/bookie/last_log_mark").json()
    assert len(marks) == 1, marks  # one journal directory
    (key, value), = marks.items()
    log_id, hex_id = LAST_LOG_MARK_KEY.fullmatch(key).groups()
    assert int(hex_id, 16) == int(log_id)
    return int(log_id), int(LAST_LOG_MARK_VALUE.fullmatch(value).group(1))


def test_bookie_routes_answer_with_bookkeepers_json(http_cluster, bk):
    bookie = http_cluster.bookies[0]
    address = bookie.http_address
    assert call(address, "/heartbeat").text == "OK\n"
    ready = call(address, "/api/v1/bookie/is_ready")
    assert (ready.code, ready.text) == (200, "OK")
    state = call(address, "/api/v1/bookie/state").json()
    assert set(state) == STATE
    assert state == {"running": True, "readOnly": False, "shuttingDown": False, "availableForHighPriorityWrites": True}
    assert call(address, "/api/v1/bookie/state/readonly").json() == {"readOnly": False}
    info = call(address, "/api/v1/bookie/info").json()
    assert set(info) == INFO and 0 < info["freeSpace"] <= info["totalSpace"]

    # The live LastLogMark moves with what the journal fsyncs.
    before = mark_of(address)
    write_on(bk, [bookie.bookie_id])
    assert mark_of(address) > before

    files = call(address, "/api/v1/bookie/list_disk_file").json()
    assert set(files) == DISK_FILES
    journals = files["journal files"].split("\t")
    assert journals[-1] == "" and journals[:-1] and all(name.endswith(".txn") for name in journals[:-1])
    assert files["entrylog files"].endswith(".log\t")
    assert call(address, "/api/v1/bookie/list_disk_file", params={"file_type": "journal"}).json() == \
        {"journal files": files["journal files"]}

    metrics = call(address, "/metrics")
    assert (metrics.code, metrics.content_type) == (200, PROMETHEUS_004)
    written = re.search(r"^bookie_WRITE_BYTES (\d+)", metrics.text, re.M)
    assert "# TYPE bookie_WRITE_BYTES counter" in metrics.text and written and int(written.group(1)) > 0

    config = call(address, "/api/v1/config/server_config").json()
    assert config["bookiePort"] == str(bookie.port) and config["httpServerEnabled"] == "true"
    assert config["httpServerKeystorePassword"] == "******" and SECRET not in json.dumps(config)
    assert all(isinstance(value, str) for value in config.values())

    assert call(address, "/api/v1/bookie/sanity").json() == {"passed": True, "readOnly": False}

    for path in ("/api/v1/bookie/expand_storage", "/api/v1/bookie/entry_location_compact"):
        unsupported = call(address, path, "PUT", {})
        assert unsupported.code == 404 and "not supported by this bookie" in unsupported.text
        assert "InterleavedLedgerStorage" in unsupported.text


def test_gc_and_compaction_routes(http_cluster):
    bookie = http_cluster.bookies[1]
    address = bookie.http_address
    server = f"Bookie Server listening on {bookie.bookie_id} with id {bookie.bookie_id}"  # BookieServer.toString
    details = call(address, "/api/v1/bookie/gc_details").json()
    assert len(details) == 1 and GC_STATUS <= set(details[0])
    passes = details[0]["passes"]
    assert call(address, "/api/v1/bookie/gc").json() in ({"is_in_force_gc": "false"}, {"is_in_force_gc": "true"})
    forced = call(address, "/api/v1/bookie/gc", "PUT", {"forceMajor": True, "forceMinor": "false"})
    assert (forced.code, forced.json()) == (200, f"Triggered GC on BookieServer: {bookie.bookie_id}")
    wait_for(lambda: call(address, "/api/v1/bookie/gc_details").json()[0]["passes"] > passes, "the forced GC pass")
    wait_for(lambda: call(address, "/api/v1/bookie/gc").json() == {"is_in_force_gc": "false"},
             "the forced pass to be over")

    suspended = "/api/v1/bookie/gc/suspend_compaction"
    assert call(address, suspended).json() == {"isMajorGcSuspended": "false", "isMinorGcSuspended": "false"}
    assert set(call(address, suspended).json()) == SUSPENDED
    answer = call(address, suspended, "PUT", {"suspendMajor": True, "suspendMinor": True})
    assert answer.json() == f"Suspend majorGC on BookieServer: {server}, Suspend minorGC on BookieServer: {server}"
    assert call(address, suspended).json() == {"isMajorGcSuspended": "true", "isMinorGcSuspended": "true"}
    assert call(address, "/api/v1/bookie/gc_details").json()[0]["majorCompactionSuspended"] is True
    answer = call(address, "/api/v1/bookie/gc/resume_compaction", "PUT", {"resumeMinor": True})
    assert answer.json() == f", Resume minorGC on BookieServer: {server}"  # BookKeeper's text, leading comma
    assert call(address, suspended).json() == {"isMajorGcSuspended": "true", "isMinorGcSuspended": "false"}
    call(address, "/api/v1/bookie/gc/resume_compaction", "PUT", {"resumeMajor": True, "resumeMinor": False})
    assert call(address, suspended).json() == {"isMajorGcSuspended": "false", "isMinorGcSuspended": "false"}

    nothing = call(address, suspended, "PUT", {})
    assert (nothing.code, nothing.text) == (400, "No suspendMajor or suspendMinor params found")
    empty = call(address, "/api/v1/bookie/gc/resume_compaction", "PUT", b"")
    assert (empty.code, empty.text) == (400, "Empty request body")
    bad = call(address, suspended, "PUT", {"suspendMajor": "soon"})
    assert bad.code == 400 and "suspendMajor" in bad.text and "true or false" in bad.text
    bad = call(address, "/api/v1/bookie/gc", "PUT", b"{not json")
    assert bad.code == 400
    assert bad.text.startswith("Failed to handle the request, exception: the request body is not JSON")
    assert call(address, "/api/v1/bookie/gc", "DELETE").code == 405


def test_refusals_name_what_is_wrong_and_the_server_serves_on(http_cluster):
    address = http_cluster.bookies[0].http_address
    unknown = call(address, "/api/v1/bookie/no_such_route")
    assert unknown.code == 404 and "no such endpoint: /api/v1/bookie/no_such_route" in unknown.text
    assert "/api/v1/bookie/is_ready" in unknown.text and SECRET not in unknown.text
    patch = call(address, "/heartbeat", "PATCH")
    assert patch.code == 405 and "PATCH" in patch.text and "GET, PUT, POST, DELETE" in patch.text
    large = call(address, "/api/v1/config/server_config", "PUT", b"{" + b" " * (1 << 20) + b"}")
    assert large.code == 413 and "1048576" in large.text
    assert call(address, "/metrics", "PUT").code == 403  # MetricsService: "PUT is forbidden. Should be GET method"
    assert call(address, "/api/v1/bookie/state", "PUT").code == 404  # BookieStateService: GET only
    assert call(address, "/api/v1/bookie/info", "DELETE").text == "Only GET is supported."

    readonly = "/api/v1/bookie/state/readonly"
    for body, expected in ((b"{nope", "not JSON"), (b"[true]", "not an object"), ({"readOnly": 3}, "true or false"),
                           ({"readonly": True}, "unknown field readonly"), ({}, "readOnly is missing")):
        refused = call(address, readonly, "PUT", body)
        assert refused.code == 400 and expected in refused.text, (body, refused)

    config = "/api/v1/config/server_config"
    for body, expected in (({"gcWaitTme": 5}, "unknown configuration key gcWaitTme (did you mean gcWaitTime?)"),
                           ({"gcWaitTime": "soon"}, "gcWaitTime='soon' is not valid"),
                           ({"gcWaitTime": -1}, "must be at least 1"), ({"gcWaitTime": None}, "not null")):
        refused = call(address, config, "PUT", body)
        assert refused.code == 400 and expected in refused.text, (body, refused)
    assert call(address, config).json()["gcWaitTime"] == "600000"  # nothing set by a refused map
    changed = call(address, config, "PUT", {"gcWaitTime": 1234, "minorCompactionThreshold": "0.3"})
    assert (changed.code, changed.text) == (200, "Success set server config.")
    assert {k: call(address, config).json()[k] for k in ("gcWaitTime", "minorCompactionThreshold")} == \
        {"gcWaitTime": "1234", "minorCompactionThreshold": "0.3"}
    assert call(address, "/heartbeat").code == 200 and call(address, "/api/v1/bookie/is_ready").code == 200


def test_read_only_switch_under_writes_moves_registration_and_writes(http_cluster, bk, store):
    b = http_cluster.bookies
    address = b[0].http_address
    lh = bk.create_ledger(3, 3, 3, password=b"pw", bookies=[b[0].bookie_id, b[1].bookie_id, b[2].bookie_id])
    acknowledged: list[int] = []
    stop, failure = threading.Event(), []

    def writer() -> None:
        try:
            while not stop.is_set():
                acknowledged.append(lh.append(b"entry %d" % len(acknowledged)))
        except Exception as exc:  # the test fails on it below
            failure.append(exc)

    thread = threading.Thread(target=writer, name="writer")
    thread.start()
    try:
        wait_for(lambda: len(acknowledged) >= 20 or failure, "the first writes")
        assert call(address, "/api/v1/bookie/state/readonly", "PUT", {"readOnly": True}).json() == {"readOnly": True}
        # Answered once the registration has moved.
        assert b[0].bookie_id in store.bookies(read_only=True) and b[0].bookie_id not in store.bookies()
        assert call(address, "/api/v1/bookie/state").json()["readOnly"] is True
        assert call(address, "/api/v1/bookie/sanity").json() == {"passed": False, "readOnly": True}
        wait_for(lambda: b[0].bookie_id not in bk.ledger_metadata(lh.ledger_id).ensembles[-1][1] or failure,
                 "the writes to leave the read-only bookie")
        moved = len(acknowledged)
        wait_for(lambda: len(acknowledged) >= moved + 20 or failure, "writes on the new ensemble")

        # readOnlyModeEnabled=false (set at run time through the configuration route) refuses going read-only.
        back = call(address, "/api/v1/bookie/state/readonly", "PUT", {"readOnly": False})
        assert back.json() == {"readOnly": False}
        assert b[0].bookie_id in store.bookies() and b[0].bookie_id not in store.bookies(read_only=True)
        call(address, "/api/v1/config/server_config", "PUT", {"readOnlyModeEnabled": False})
        refused = call(address, "/api/v1/bookie/state/readonly", "PUT", {"readOnly": True})
        assert (refused.code, refused.text) == \
            (400, "Bookie is disabled ReadOnly mode, cannot transit to readOnly mode")
        call(address, "/api/v1/config/server_config", "PUT", {"readOnlyModeEnabled": True})
        assert call(address, "/api/v1/bookie/state/readonly").json() == {"readOnly": False}
    finally:
        stop.set()
        thread.join(60)
    assert not failure, failure
    lh.close()
    assert acknowledged == list(range(len(acknowledged)))
    with bk.open_ledger(lh.ledger_id, b"pw") as reader:
        assert reader.last_add_confirmed >= acknowledged[-1]
        assert [e.payload for e in reader.read(0, acknowledged[-1])] == [b"entry %d" % i for i in acknowledged]


def test_registration_lists_the_http_endpoint(http_cluster, store):
    for bookie in http_cluster.bookies:
        http = store.bookie_service_info(bookie.bookie_id).endpoint("http")
        assert (http.id, http.host, http.port, http.protocol) == ("httpserver", "127.0.0.1", bookie.http_port, "http")
    assert len({b.http_port for b in http_cluster.bookies}) == len(http_cluster.bookies)


def test_a_bookie_forced_read_only_cannot_be_made_writable(http_cluster, store):
    bookie = http_cluster.bookies[3]
    http_cluster.kill_bookie(3, signal.SIGTERM)
    http_cluster.start_bookie(3, forceReadOnlyBookie=True)
    try:
        assert bookie.bookie_id in store.bookies(read_only=True)
        refused = call(bookie.http_address, "/api/v1/bookie/state/readonly", "PUT", {"readOnly": False})
        assert (refused.code, refused.text) == (400, "Bookie is in forceReadOnly mode, cannot transit to writable mode")
        assert call(bookie.http_address, "/api/v1/bookie/state").json()["readOnly"] is True
        assert call(bookie.http_address, "/api/v1/bookie/sanity").json() == {"passed": False, "readOnly": True}
    finally:
        http_cluster.kill_bookie(3, signal.SIGTERM)
        http_cluster.start_bookie(3, forceReadOnlyBookie=False)


# A bookie process whose journal replay and whose shutdown wait for the test (tests.helpers.held_bookie's holds).
HELD = """import sys
from bookie.cli.main import main
from bookie.server.bookie import Bookie
from tests.helpers.held_bookie import held_before
replay, shutdown, conf = sys.argv[1:4]
Bookie._replay = held_before(replay, Bookie._replay, fail=False)
Bookie.shutdown = held_before(shutdown, Bookie.shutdown, fail=False)
sys.exit(main(["bookie", "--conf", conf]))
"""


def test_is_ready_is_503_during_replay_and_shutdown(http_cluster, store, tmp_path):
    index = 3
    bookie = http_cluster.bookies[index]
    address = bookie.http_address
    holds = []
    for name in ("replay", "shutdown"):
        (tmp_path / name).mkdir()
        os.mkfifo(tmp_path / name / RELEASE)
        holds.append(Hold(tmp_path / name))
    replay, shutdown = holds
    replay.arm()
    http_cluster.kill_bookie(index, signal.SIGTERM)
    with open(bookie.log_path, "ab") as log:
        bookie.proc = subprocess.Popen(
            [sys.executable, "-c", HELD, str(tmp_path / "replay"), str(tmp_path / "shutdown"), bookie.conf_path],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=child_env())
    replay.wait_holding("the bookie to hold its journal replay")
    # The HTTP server started before the bookie: it answers while the journal replays.
    assert call(address, "/heartbeat").code == 200
    not_ready = call(address, "/api/v1/bookie/is_ready")
    assert (not_ready.code, not_ready.text) == (503, NOT_STARTED)
    assert call(address, "/api/v1/bookie/state").json()["running"] is False
    assert (call(address, "/api/v1/bookie/info").code, call(address, "/api/v1/bookie/info").text) == (503, NOT_STARTED)
    assert bookie.bookie_id not in store.bookies() + store.bookies(read_only=True)
    replay.release()
    http_cluster.wait_registered(index)
    wait_for(lambda: call(address, "/api/v1/bookie/is_ready").code == 200, "is_ready once registered")

    shutdown.arm()
    os.kill(bookie.proc.pid, signal.SIGTERM)
    shutdown.wait_holding("the bookie to hold its shutdown")
    stopping = call(address, "/api/v1/bookie/is_ready")
    assert (stopping.code, stopping.text) == (503, NOT_STARTED)
    assert call(address, "/api/v1/bookie/state").json()["shuttingDown"] is True
    assert call(address, "/heartbeat").code == 200
    shutdown.release()
    assert bookie.proc.wait(timeout=60) == 0
    bookie.proc = None
    assert not answers(address)  # the HTTP server stops after the bookie


def test_autorecovery_serves_http_without_a_bookie(http_cluster):
    port = free_ports(1, http_cluster.ports + [b.http_port for b in http_cluster.bookies])[0]
    proc = http_cluster.start_autorecovery("http-participant", httpServerEnabled=True, httpServerPort=port,
                                           httpServerHost="127.0.0.1", enableStatistics=False)
    address = f"127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(address) or proc.poll() is not None, "bk autorecovery's HTTP server")
        assert proc.poll() is None
        metrics = call(address, "/metrics")
        assert metrics.code == 500 and "enableStatistics=true" in metrics.text
        state = call(address, "/api/v1/bookie/state")
        assert state.code == 500 and "runs no bookie" in state.text
        files = call(address, "/api/v1/bookie/list_disk_file")  # a service failing: 500 with its error
        assert files.code == 500 and "Directories is not set" in files.text
        # The cluster routes, through the process's own client of the cluster.
        listed = call(address, "/api/v1/bookie/list_bookies", params={"type": "rw"}).json()
        assert {b.bookie_id for b in http_cluster.bookies[:3]} <= set(listed)
        assert call(address, "/heartbeat").code == 200
    finally:
        stop_process(proc)
    assert proc.returncode == 0


def test_bk_local_prints_each_bookies_http_address(tmp_path):
    base = next(p for p in iter(free_port, None) if not port_taken("127.0.0.1", p + 1))
    conf = tmp_path / "bk_server.conf"
    conf.write_text(f"httpServerEnabled=true\nhttpServerPort={base}\nhttpServerHost=0.0.0.0\n")
    proc = subprocess.Popen([sys.executable, "-m", "bookie.cli.main", "local", "--bookies", "2", "--zk-port", "0",
                             "--dir", str(tmp_path / "cluster"), "--conf", str(conf)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=child_env())
    lines: list[str] = []
    try:
        read_until(proc, lines, "press Ctrl-C")
        out = "".join(lines)
        addresses = re.findall(r"HTTP admin http://(127\.0\.0\.1:\d+)", out)
        assert addresses == [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"], out
        assert "httpServerHost" in next(line for line in lines if line.startswith("not applied"))
        for address in addresses:
            wait_for(lambda: answers(address, "/api/v1/bookie/is_ready"), f"bookie at {address} to be ready")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        stop_process(proc)
