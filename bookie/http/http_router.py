"""BookKeeper's HTTP routes (HttpRouter, 4.17: 30 paths) and the service each path leads to.

The table maps every path to its ApiType (HttpServer.ApiType); a provider (BKHttpServiceProvider) gives the
service of each type once, when the router is built. A path outside the table is answered 404, naming
the paths there are (all public); a route this bookie cannot serve answers through
``UnsupportedService`` what it does not do and why, never a success that did nothing.
"""
from __future__ import annotations

import enum
from typing import Protocol

from bookie.http.http_service import (HTTP_METHODS, NOT_FOUND, HttpEndpointService, HttpServiceRequest,
                                      HttpServiceResponse)


class ApiType(enum.Enum):
    """HttpServer.ApiType: what a route does, whatever its path."""
    HEARTBEAT = enum.auto()
    SERVER_CONFIG = enum.auto()
    METRICS = enum.auto()
    # ledger
    DELETE_LEDGER = enum.auto()
    LIST_LEDGER = enum.auto()
    GET_LEDGER_META = enum.auto()
    READ_LEDGER_ENTRY = enum.auto()
    # bookie
    LIST_BOOKIES = enum.auto()
    LIST_BOOKIE_INFO = enum.auto()
    LAST_LOG_MARK = enum.auto()
    LIST_DISK_FILE = enum.auto()
    EXPAND_STORAGE = enum.auto()
    GC = enum.auto()
    GC_DETAILS = enum.auto()
    BOOKIE_STATE = enum.auto()
    BOOKIE_SANITY = enum.auto()
    BOOKIE_STATE_READONLY = enum.auto()
    BOOKIE_IS_READY = enum.auto()
    BOOKIE_INFO = enum.auto()
    CLUSTER_INFO = enum.auto()
    SUSPEND_GC_COMPACTION = enum.auto()
    RESUME_GC_COMPACTION = enum.auto()
    TRIGGER_ENTRY_LOCATION_COMPACT = enum.auto()
    # autorecovery
    AUTORECOVERY_STATUS = enum.auto()
    RECOVERY_BOOKIE = enum.auto()
    LIST_UNDER_REPLICATED_LEDGER = enum.auto()
    WHO_IS_AUDITOR = enum.auto()
    TRIGGER_AUDIT = enum.auto()
    LOST_BOOKIE_RECOVERY_DELAY = enum.auto()
    DECOMMISSION = enum.auto()


class HttpServiceProvider(Protocol):
    """BookKeeper's HttpServiceProvider: the service of each route."""

    def provide_http_endpoint_service(self, api_type: ApiType) -> HttpEndpointService: ...

    def close(self) -> None: ...


class UnsupportedService(HttpEndpointService):
    """A BookKeeper route this bookie has no counterpart of: 404, whatever the method, with what it would do and
    why it cannot."""
    METHODS = HTTP_METHODS
    BLOCKING = False

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        return HttpServiceResponse.text(f"{self.path} is not supported by this bookie: {self.reason}", NOT_FOUND)


class HttpRouter:
    # The paths, as HttpRouter names them.
    HEARTBEAT = "/heartbeat"
    SERVER_CONFIG = "/api/v1/config/server_config"
    METRICS = "/metrics"
    # ledger
    DELETE_LEDGER = "/api/v1/ledger/delete"
    LIST_LEDGER = "/api/v1/ledger/list"
    GET_LEDGER_META = "/api/v1/ledger/metadata"
    READ_LEDGER_ENTRY = "/api/v1/ledger/read"
    # bookie
    LIST_BOOKIES = "/api/v1/bookie/list_bookies"
    LIST_BOOKIE_INFO = "/api/v1/bookie/list_bookie_info"
    LAST_LOG_MARK = "/api/v1/bookie/last_log_mark"
    LIST_DISK_FILE = "/api/v1/bookie/list_disk_file"
    EXPAND_STORAGE = "/api/v1/bookie/expand_storage"
    GC = "/api/v1/bookie/gc"
    GC_DETAILS = "/api/v1/bookie/gc_details"
    SUSPEND_GC_COMPACTION = "/api/v1/bookie/gc/suspend_compaction"
    RESUME_GC_COMPACTION = "/api/v1/bookie/gc/resume_compaction"
    BOOKIE_STATE = "/api/v1/bookie/state"
    BOOKIE_SANITY = "/api/v1/bookie/sanity"
    BOOKIE_STATE_READONLY = "/api/v1/bookie/state/readonly"
    BOOKIE_IS_READY = "/api/v1/bookie/is_ready"
    BOOKIE_INFO = "/api/v1/bookie/info"
    CLUSTER_INFO = "/api/v1/bookie/cluster_info"
    ENTRY_LOCATION_COMPACT = "/api/v1/bookie/entry_location_compact"
    # autorecovery
    AUTORECOVERY_STATUS = "/api/v1/autorecovery/status"
    RECOVERY_BOOKIE = "/api/v1/autorecovery/bookie"
    LIST_UNDER_REPLICATED_LEDGER = "/api/v1/autorecovery/list_under_replicated_ledger"
    WHO_IS_AUDITOR = "/api/v1/autorecovery/who_is_auditor"
    TRIGGER_AUDIT = "/api/v1/autorecovery/trigger_audit"
    LOST_BOOKIE_RECOVERY_DELAY = "/api/v1/autorecovery/lost_bookie_recovery_delay"
    DECOMMISSION = "/api/v1/autorecovery/decommission"

    ENDPOINTS: dict[str, ApiType] = {
        HEARTBEAT: ApiType.HEARTBEAT, SERVER_CONFIG: ApiType.SERVER_CONFIG, METRICS: ApiType.METRICS,
        DELETE_LEDGER: ApiType.DELETE_LEDGER, LIST_LEDGER: ApiType.LIST_LEDGER,
        GET_LEDGER_META: ApiType.GET_LEDGER_META, READ_LEDGER_ENTRY: ApiType.READ_LEDGER_ENTRY,
        LIST_BOOKIES: ApiType.LIST_BOOKIES, LIST_BOOKIE_INFO: ApiType.LIST_BOOKIE_INFO,
        LAST_LOG_MARK: ApiType.LAST_LOG_MARK, LIST_DISK_FILE: ApiType.LIST_DISK_FILE,
        EXPAND_STORAGE: ApiType.EXPAND_STORAGE, GC: ApiType.GC, GC_DETAILS: ApiType.GC_DETAILS,
        BOOKIE_STATE: ApiType.BOOKIE_STATE, BOOKIE_SANITY: ApiType.BOOKIE_SANITY,
        BOOKIE_STATE_READONLY: ApiType.BOOKIE_STATE_READONLY, BOOKIE_IS_READY: ApiType.BOOKIE_IS_READY,
        BOOKIE_INFO: ApiType.BOOKIE_INFO, CLUSTER_INFO: ApiType.CLUSTER_INFO,
        SUSPEND_GC_COMPACTION: ApiType.SUSPEND_GC_COMPACTION, RESUME_GC_COMPACTION: ApiType.RESUME_GC_COMPACTION,
        ENTRY_LOCATION_COMPACT: ApiType.TRIGGER_ENTRY_LOCATION_COMPACT,
        AUTORECOVERY_STATUS: ApiType.AUTORECOVERY_STATUS, RECOVERY_BOOKIE: ApiType.RECOVERY_BOOKIE,
        LIST_UNDER_REPLICATED_LEDGER: ApiType.LIST_UNDER_REPLICATED_LEDGER,
        WHO_IS_AUDITOR: ApiType.WHO_IS_AUDITOR, TRIGGER_AUDIT: ApiType.TRIGGER_AUDIT,
        LOST_BOOKIE_RECOVERY_DELAY: ApiType.LOST_BOOKIE_RECOVERY_DELAY, DECOMMISSION: ApiType.DECOMMISSION,
    }

    def __init__(self, provider: HttpServiceProvider):
        self.provider = provider
        self._services = {path: provider.provide_http_endpoint_service(api) for path, api in self.ENDPOINTS.items()}

    @property
    def paths(self) -> list[str]:
        return list(self._services)

    def service(self, path: str) -> HttpEndpointService | None:
        """The service of ``path`` (None: no route has it)."""
        return self._services.get(path)

    async def handle(self, path: str, request: HttpServiceRequest) -> HttpServiceResponse:
        """The answer of ``path``'s service, or the 404 of a path no route has."""
        service = self._services.get(path)
        if service is None:
            return HttpServiceResponse.text(f"no such endpoint: {path}. This server answers: "
                                            f"{', '.join(sorted(self._services))}", NOT_FOUND)
        return await service.handle(request)

    def close(self) -> None:
        """What the services hold (the provider's clients), as HttpServer.stopServer closes the provider."""
        self.provider.close()
