"""The bookie process (``bk bookie``): storage engine + two servers + ZooKeeper registration.

Two transports over one engine: BookKeeper's native protocol (BookieNettyServer, v3 and v2) on
``bookiePort``, as BookKeeper's bookies serve it, and this project's gRPC service on ``grpcPort``.
Both bind the same address: listeningInterface's IPv4 address, or every interface when it is unset
(BookieNettyServer). The bookie id is ``bookieId``, or ``<host>:<bookiePort>`` with the host
BookieImpl.getBookieAddress gives (advertisedAddress, else the interface's or this host's address or
name; a loopback one refused unless allowLoopback), and the registration (BookieServiceInfo) lists
both endpoints at that advertised host: ``bookie``/``bookie-rpc`` for BookKeeper's tools and clients,
``grpc``/``grpc`` for this project's client. Clients connect to what is registered, and both servers
refuse a request that names another bookie id (a registration pointing at the wrong endpoint).

Start-up, in BookKeeper's order: directory checks, cookie validation (local and in ZooKeeper), journal
replay, threads, both servers listening, then registration as ``<root>/available/<bookieId>``
(ephemeral; ``available/readonly/<bookieId>`` while read-only). Once started, the bookie
``gc.freeze()``s what start-up built: it lives as long as the process, and the read path's allocations
would otherwise trigger full collections over it again and again.

Metrics: the process's PrometheusMetricsProvider (from the configuration; None under enableStatistics=false) is
``stats_provider``; the bookie records into its root logger. Components the caller passes to ``serve`` (the HTTP
admin server: the server layer does not import bookie.http) start before the bookie does, so /heartbeat and
is_ready answer during journal replay; the endpoints they publish join the registration (BookKeeper's
ServerLifecycleComponent.publishInfo); they stop after the bookie. ``ready`` is true once the bookie has
replayed its journal, listens and is registered; ``shutting_down`` from the moment it starts to stop.

SIGTERM or SIGINT: the native server stops (answers already queued go out), then gRPC (add streams
ended, not cancelled); the bookie deregisters, drains and checkpoints, and exits 0. After a journal
failure the same stop skips the checkpoint and ``serve`` raises the failure, so ``bk bookie`` exits 2
(BookKeeper: ExitCode.BOOKIE_EXCEPTION). SIGKILL loses nothing acknowledged: the journal is replayed.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import threading
from typing import Callable, Iterable, Protocol

import grpc

from bookie.meta.bookie_service_info import BOOKIE_RPC, GRPC, Endpoint
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.bookie import Bookie
from bookie.server.conf import ConfigurationException, ServerConfiguration
from bookie.server.cookie import read_registered_cookie, write_registered_cookie
from bookie.server.native_server import BookieNettyServer
from bookie.server.request_processor import BookieServicer, add_to_server
from bookie.stats.prometheus_metrics_provider import PrometheusMetricsProvider
from bookie.stats.stats_logger import NULL_STATS_LOGGER
from bookie.util.allocator import keep_large_buffers

log = logging.getLogger(__name__)
STOP_GRACE = 2.0  # seconds each server gets, on a clean stop, to finish what it has taken


class ServerComponent(Protocol):
    """A component the bookie process runs beside the bookie (BookKeeper's ServerLifecycleComponent): started before
    the bookie, stopped after it; what it serves joins the bookie's registration."""

    async def start(self) -> object: ...

    async def stop(self) -> None: ...

    def endpoints(self, advertised_host: str) -> tuple[Endpoint, ...]: ...


class BookieServer:
    def __init__(self, conf: ServerConfiguration):
        if not conf.metadata_service_uri:
            raise ConfigurationException("metadataServiceUri is not set: a bookie registers in ZooKeeper, "
                                     "e.g. zk://127.0.0.1:2181/ledgers")
        if conf["grpcPort"] == conf["bookiePort"]:
            raise ConfigurationException(f"grpcPort and bookiePort are both {conf['bookiePort']}: BookKeeper's "
                                         "native protocol (bookiePort) and gRPC (grpcPort) need a port each")
        self.conf = conf
        self.address = conf.check_address()  # before anything starts: a bad address is a configuration error
        self.bookie_id = conf.bookie_id
        if self.address.ip is None and conf["listeningInterface"] and not _names(self.address.host, self.address.listen):
            # Right behind NAT or a port forward, a mistake otherwise: say so once, at start.
            log.warning("advertisedAddress %s is not listeningInterface %s's address %s: clients connect to %s, "
                        "the bookie listens on %s only", self.address.host, conf["listeningInterface"],
                        self.address.listen, self.address.host, self.address.listen)
        self.store: ZKMetadataStore | None = None
        self.bookie: Bookie | None = None
        self.server: grpc.aio.Server | None = None
        self.servicer: BookieServicer | None = None
        self.native_server: BookieNettyServer | None = None
        self._registered_read_only: bool | None = None
        self._registration_lock = threading.Lock()
        self.stats_provider = PrometheusMetricsProvider.from_conf(conf)
        self.components: list[ServerComponent] = []  # started by serve, before the bookie
        self.ready = False  # replayed, listening and registered
        self.shutting_down = False

    def __str__(self) -> str:
        """BookieServer.toString, which BookKeeper's compaction services quote."""
        return f"Bookie Server listening on {self.conf.bookie_address} with id {self.bookie_id}"

    async def start(self) -> None:
        keep_large_buffers()
        conf = self.conf
        if self.stats_provider is not None:
            self.stats_provider.start()
        stats_logger = self.stats_provider.get_stats_logger() if self.stats_provider is not None else NULL_STATS_LOGGER
        self.bookie = Bookie(conf, stats_logger=stats_logger)
        # ZooKeeper, cookies and journal replay in a thread: the loop meanwhile answers the components' requests
        # (the HTTP server's /heartbeat and is_ready).
        await asyncio.to_thread(self._start_bookie)
        limit = conf["nettyMaxFrameSizeBytes"]
        self.server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                               ("grpc.max_send_message_length", limit + (1 << 20)),
                                               ("grpc.so_reuseport", 0)])
        self.servicer = BookieServicer(self.bookie, bookie_id=self.bookie_id)
        add_to_server(self.servicer, self.server)
        listen, grpc_port = self.address.listen, conf["grpcPort"]
        if self.server.add_insecure_port(f"{listen}:{grpc_port}") != grpc_port:
            raise OSError(f"cannot listen on {listen}:{grpc_port} (grpcPort)")
        await self.server.start()
        self.native_server = BookieNettyServer(self.bookie, conf["bookiePort"], host=listen,
                                               max_frame_size=conf["nettyMaxFrameSizeBytes"], bookie_id=self.bookie_id,
                                               read_size=conf["byteBufAllocatorSizeMax"])
        await self.native_server.start()
        # Registration may wait for the node of our previous, SIGKILLed process to expire (up to two
        # session timeouts): a thread waits, so the event loop serves requests meanwhile. Listening on
        # both ports comes first, so the bookie is never registered as available before it can serve.
        self.bookie.add_state_listener(self._register)
        await asyncio.get_running_loop().run_in_executor(None, lambda: self._register(self.bookie.read_only))
        # What start-up built lives as long as the process: take it out of the cyclic GC's full
        # collections, which the read path's allocations otherwise trigger over and over.
        gc.collect()
        gc.freeze()
        self.ready = True
        log.info("bookie %s %s (%s)", self.bookie_id, self.describe(),
                 "read-only" if self.bookie.read_only else "writable")

    def _start_bookie(self) -> None:
        self.store = ZKMetadataStore(self.conf.metadata_service_uri, self.conf["zkTimeout"])
        instance_id = self.store.instance_id()
        registered = read_registered_cookie(self.store, self.bookie_id)
        self.bookie.start(instance_id, registered.value if registered else None, self.store)
        if registered is None:
            write_registered_cookie(self.store, self.bookie_id, self.bookie.cookie, None)

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """What the registration lists: BookKeeper's native endpoint as its bookies name it, then gRPC,
        both at the advertised host (BookieService.publishInfo: the bookie address's host), then what the
        components publish (the HTTP server's ``httpserver``)."""
        host = self.address.host
        return (Endpoint("bookie", host, self.native_server.port, BOOKIE_RPC),
                Endpoint("grpc", host, self.conf["grpcPort"], GRPC),
                *(e for component in self.components for e in component.endpoints(host)))

    def describe(self) -> str:
        """Where it listens and what it advertises, for the start-up lines."""
        listen = self.address.listen
        native, grpc_endpoint = self.endpoints[:2]
        return (f"listening on {listen}:{native.port} (BookKeeper's protocol) and {listen}:{grpc_endpoint.port} "
                f"(gRPC){'' if self.conf['listeningInterface'] else ', every interface'}; registered as "
                f"{native.address} ({native.protocol}) and {grpc_endpoint.address} ({grpc_endpoint.protocol})")

    def _register(self, read_only: bool) -> None:
        """Register as writable or read-only (moving the ephemeral node when the state changes)."""
        with self._registration_lock:
            if self._registered_read_only == read_only:
                return
            if self._registered_read_only is not None:
                self.store.unregister_bookie(self.bookie_id, self._registered_read_only)
            self.store.register_bookie(self.bookie_id, read_only, self.endpoints)
            self._registered_read_only = read_only

    async def stop(self) -> None:
        self.shutting_down = True
        if self.native_server is not None:
            # Answers already queued go out, then connections close; a client that does not read them
            # gets the gRPC grace period, not a stop that never ends.
            try:
                await asyncio.wait_for(self.native_server.stop(), STOP_GRACE)
            except asyncio.TimeoutError:
                log.warning("native connections still flushing after %.0f s; stopping anyway", STOP_GRACE)
        if self.server is not None:
            self.servicer.end_add_streams()  # clients see their streams end, not cancelled calls
            await self.server.stop(grace=STOP_GRACE)
        if self.store is not None and self._registered_read_only is not None:
            self.store.unregister_bookie(self.bookie_id, self._registered_read_only)
        if self.bookie is not None:
            await asyncio.to_thread(self.bookie.shutdown)  # drain and checkpoint; the components still answer
        if self.store is not None:
            self.store.close()
        if self.stats_provider is not None:
            self.stats_provider.stop()
        log.info("bookie %s stopped", self.bookie_id)


def _names(host: str, ip: str) -> bool:
    """Whether ``host`` (an address or a name) resolves to ``ip``."""
    try:
        return ip in {info[4][0] for info in socket.getaddrinfo(host, None, socket.AF_INET)}
    except OSError:
        return False


async def serve(conf: ServerConfiguration, ready: Callable[[BookieServer], None] | None = None,
                components: Callable[[BookieServer], Iterable[ServerComponent]] | None = None) -> None:
    """Run a bookie until SIGTERM or SIGINT. ``components(server)`` gives what runs beside it (started before the
    bookie, stopped after it); ``ready(server)`` is called once the bookie is up."""
    for notice in conf.notices():  # once, where the operator looks: the bookie's log
        log.warning(notice)
    server = BookieServer(conf)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        for component in (components(server) if components is not None else ()):
            await component.start()
            server.components.append(component)
        await server.start()
        # A failed journal stops the bookie; serve then raises its error, so the process exits non-zero
        # (BookKeeper: ExitCode.BOOKIE_EXCEPTION).
        server.bookie.add_fatal_listener(lambda error: loop.call_soon_threadsafe(stop.set))
        if ready is not None:
            ready(server)
        await stop.wait()
    finally:
        try:
            await server.stop()
        finally:
            for component in reversed(server.components):
                await component.stop()
    if server.bookie.journal_failure is not None:
        raise server.bookie.journal_failure
