"""``bk bookie``, ``bk local`` and the cluster commands of ``bk shell`` (initnewcluster, listbookies, whatisinstanceid)."""
from __future__ import annotations

import asyncio
import signal
import socket
import threading

from bookie.cli.cluster_conf import metadata_store
from bookie.meta.bookie_service_info import bookie_address
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.conf import ServerConfiguration, read_properties
from bookie.stats.stats_logger import NULL_STATS_LOGGER


def register_top(commands, add_conf_args) -> None:
    bookie = commands.add_parser("bookie", help="run one bookie server")
    add_conf_args(bookie, "-c")  # -c: BookieServer's own flag
    bookie.add_argument("--port", type=int, help="bookiePort: BookKeeper's native protocol (and the bookie id)")
    bookie.add_argument("--grpc-port", type=int, help="grpcPort: this project's gRPC service")
    bookie.add_argument("--metadata-service-uri", help="metadataServiceUri, e.g. zk://127.0.0.1:2181/ledgers")
    bookie.set_defaults(run=run_bookie)

    local = commands.add_parser("local", help="ZooKeeper + N bookies on loopback until Ctrl-C (localbookie N)")
    local.add_argument("--bookies", type=int, default=3, help="number of bookies (default 3)")
    local.add_argument("--zk-port", type=int, default=2181, help="ZooKeeper client port (default 2181; 0 = any)")
    local.add_argument("--dir", help="data directory (default: a new temporary directory)")
    local.add_argument("--conf", dest="bookie_conf", metavar="FILE",
                       help="a bk_server.conf (BookKeeper's keys: gcWaitTime, entryLogSizeLimit, compaction "
                            "thresholds, ...) applied to every bookie it starts")
    local.add_argument("--autorecovery", action="store_true",
                       help="run AutoRecovery in every bookie (autoRecoveryDaemonEnabled=true)")
    local.set_defaults(run=run_local, no_conf=True)


def register_shell(commands, add_uri_args) -> None:
    init = commands.add_parser("initnewcluster", help="create the cluster metadata in ZooKeeper")
    add_uri_args(init)
    init.set_defaults(run=run_initnewcluster)

    # -h is BookKeeper's --hostnames here (BookieShell's ListBookiesCmd), so help is --help only.
    listbookies = commands.add_parser("listbookies", help="list the registered bookies", add_help=False)
    listbookies.add_argument("--help", action="help", help="show this help message and exit")
    add_uri_args(listbookies)
    listbookies.add_argument("-rw", "--readwrite", action="store_true", help="print writable bookies")
    listbookies.add_argument("-ro", "--readonly", action="store_true", help="print read-only bookies")
    listbookies.add_argument("-a", "--all", action="store_true", help="print all bookies (none of the three: all three)")
    listbookies.add_argument("-h", "--hostnames", action="store_true", help="also print each bookie's host name")
    listbookies.set_defaults(run=run_listbookies)

    instance = commands.add_parser("whatisinstanceid", help="print the cluster's instance id")
    add_uri_args(instance)
    instance.set_defaults(run=run_instanceid)


def run_bookie(args, conf) -> int:
    from bookie.server.bookie_server import serve
    if args.port is not None:
        conf.set("bookiePort", args.port)
    if args.grpc_port is not None:
        conf.set("grpcPort", args.grpc_port)
    if args.metadata_service_uri:
        conf.set("metadataServiceUri", args.metadata_service_uri)
    autorecovery = []
    http = []

    def components(server) -> list:
        # The HTTP admin server starts before the bookie (it answers /heartbeat and is_ready during journal replay)
        # and stops after it; started here, not by the server: the server layer does not import bookie.http.
        if conf["httpServerEnabled"]:
            http.append(http_admin_server(conf, bookie_server=server, stats_provider=server.stats_provider))
        return http

    def ready(server) -> None:
        if conf["autoRecoveryDaemonEnabled"]:
            # Started here, not by the server: the server layer does not import replication.
            from bookie.replication.autorecovery_main import AutoRecoveryMain
            root = server.stats_provider.get_stats_logger() if server.stats_provider is not None else NULL_STATS_LOGGER
            autorecovery.append(AutoRecoveryMain(conf, server.bookie_id, stats_logger=root).start())
        print(f"bookie {server.bookie_id} is up: {server.describe()}"
              + (", with AutoRecovery" if autorecovery else "")
              + "".join(f"; HTTP admin on http://{admin.address}" for admin in http), flush=True)

    try:
        asyncio.run(serve(conf, ready=ready, components=components))
    finally:
        for main in autorecovery:
            main.shutdown()
    return 0


def http_admin_server(conf: ServerConfiguration, bookie_server=None, autorecovery=None, stats_provider=None):
    """BookKeeper's HTTP admin server for this process (HttpService): the routes of BKHttpServiceProvider on
    httpServerHost:httpServerPort; started by the caller, on its event loop."""
    from bookie.http.bk_http_service_provider import BKHttpServiceProvider
    from bookie.http.http_router import HttpRouter
    from bookie.http.http_server import HttpServer
    provider = BKHttpServiceProvider(conf, bookie_server=bookie_server, autorecovery=autorecovery,
                                     stats_provider=stats_provider)
    return HttpServer(HttpRouter(provider), conf["httpServerHost"], conf["httpServerPort"])


# ``bk local`` gives each bookie its own ports, directories and id and points them at its ZooKeeper, and
# keeps every bookie on loopback (listeningInterface=lo, allowLoopback=true: LocalBookKeeper's settings; the HTTP
# admin server on 127.0.0.1, httpServerPort the first bookie's port, the next ones' following it).
LOCAL_PER_BOOKIE_KEYS = ("bookiePort", "grpcPort", "journalDirectories", "journalDirectory", "ledgerDirectories",
                         "indexDirectories", "metadataServiceUri", "zkServers", "zkLedgersRootPath", "bookieId",
                         "listeningInterface", "advertisedAddress", "useHostNameAsBookieID", "useShortHostName",
                         "allowLoopback", "httpServerHost")


def local_bookie_settings(path: str) -> tuple[dict[str, str], list[str]]:
    """The settings of a bk_server.conf for every bookie of ``bk local``, and the keys left out because
    ``bk local`` sets them per bookie (so a production bk_server.conf can be used as it is). Every value is
    checked now: a bad one fails before anything starts, naming the key."""
    values = read_properties(path)
    for notice in ServerConfiguration(values).notices():  # before anything starts (each bookie logs it too)
        print(f"{path}: {notice}", flush=True)
    ignored = sorted(k for k in values if k in LOCAL_PER_BOOKIE_KEYS)
    return {k: v for k, v in values.items() if k not in LOCAL_PER_BOOKIE_KEYS}, ignored


def run_local(args, conf) -> int:
    from bookie.testing.local_bookkeeper import LocalBookKeeper
    settings, ignored = local_bookie_settings(args.bookie_conf) if args.bookie_conf else ({}, [])
    if args.autorecovery:
        settings["autoRecoveryDaemonEnabled"] = True
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = LocalBookKeeper(args.bookies, base_dir=args.dir, zk_port=args.zk_port, bookie_settings=settings)
    if settings:
        print(f"every bookie gets {args.bookie_conf}: " + ", ".join(f"{k}={v}" for k, v in settings.items()), flush=True)
    if ignored:
        print(f"not applied (bk local gives each bookie its own ports, directories, id and ZooKeeper, all on "
              f"loopback): {', '.join(ignored)}", flush=True)
    print(f"starting ZooKeeper and {args.bookies} bookies in {cluster.base_dir} ...", flush=True)
    cluster.start()
    try:
        print(f"metadataServiceUri: {cluster.metadata_service_uri}")
        for b in cluster.bookies:
            http = f"; HTTP admin http://{b.http_address}" if b.http_address else ""
            print(f"bookie {b.bookie_id}  (gRPC {b.grpc_address}{http}; journal {b.journal_dir}, ledgers "
                  f"{b.ledger_dir}, log {b.log_path})")
        print("press Ctrl-C to stop", flush=True)
        stop.wait()
    finally:
        print("stopping ...", flush=True)
        cluster.stop()
    return 0


def run_initnewcluster(args, conf) -> int:
    with metadata_store(args) as store:
        created = store.init_new_cluster()
        print(("created cluster " if created else "cluster already exists at ") + str(store.uri)
              + f" (instance id {store.instance_id()}, layout {store.manager})")
    return 0


def run_listbookies(args, conf) -> int:
    """As BookKeeper's ListBookiesCommand: the writable, read-only and all bookies (each list only if not
    empty), each bookie with the IP and port its registration gives (and its host name with -h)."""
    wanted = (args.readwrite, args.readonly, args.all)
    readwrite, readonly, every = wanted if any(wanted) else (True, True, True)
    with metadata_store(args) as store:
        writable, read_only = store.bookies(read_only=False), store.bookies(read_only=True)
        lists = [("ReadWrite", writable, readwrite), ("Readonly", read_only, readonly),
                 ("All", sorted(set(writable) | set(read_only)), every)]
        shown = False
        for name, bookies, asked in lists:
            if asked and bookies:
                print(f"{name} Bookies :")
                for bookie_id in bookies:
                    print(describe_bookie(store, bookie_id, args.hostnames))
                shown = True
        if not shown:
            print("No bookie exists!")
    return 0


def describe_bookie(store: ZKMetadataStore, bookie_id: str, hostnames: bool) -> str:
    """``BookieID:…, IP:…, Port:…[, Hostname:…]`` (CommandHelpers.getBookieSocketAddrStringRepresentation); the
    address is the registration's ``bookie-rpc`` endpoint, UNKNOWN where it does not resolve."""
    host, _, port = bookie_address(store.bookie_service_info(bookie_id), bookie_id).rpartition(":")
    try:
        ip = socket.gethostbyname(host)
    except OSError:
        ip = "UNKNOWN"
    line = f"BookieID:{bookie_id}, IP:{ip}, Port:{port or 0}"
    if hostnames:
        line += f", Hostname:{socket.getfqdn(host) if ip != 'UNKNOWN' else 'UNKNOWN'}"
    return line


def run_instanceid(args, conf) -> int:
    with metadata_store(args) as store:
        print(f"ZKServers: {store.uri.hosts}\nZkLedgersRootPath: {store.root}\nInstanceId: {store.instance_id()}")
    return 0
