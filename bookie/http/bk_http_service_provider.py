"""The service of every route (BookKeeper's BKHttpServiceProvider), for a bookie (``bk bookie``) or for an
AutoRecovery process (``bk autorecovery``), which has no bookie.

The cluster routes (ledgers, bookies, AutoRecovery) share one ClusterContext: a metadata store, client and admin
on the configuration's metadataServiceUri, opened on first use and closed with the provider. The bookie routes
read the BookieServer: its bookie, its state, its garbage collector. In a process without a bookie those that
need one answer 500, as BookKeeper's do there (its provider fails building them); those that read the
configuration only (last_log_mark, list_disk_file, sanity) answer from it, as BookKeeper's.

Two BookKeeper routes have nothing behind them here and say so (404): expand_storage (allowStorageExpansion is
not implemented) and entry_location_compact (DbLedgerStorage's RocksDB index; the storage is
InterleavedLedgerStorage).
"""
from __future__ import annotations

from bookie.http.cluster_context import ClusterContext
from bookie.http.http_router import ApiType, HttpRouter, UnsupportedService
from bookie.http.http_service import (HTTP_METHODS, INTERNAL_ERROR, HttpEndpointService, HttpServiceRequest,
                                      HttpServiceResponse)
from bookie.http.service.autorecovery_status_service import AutoRecoveryStatusService
from bookie.http.service.bookie_info_service import BookieInfoService
from bookie.http.service.bookie_is_ready_service import BookieIsReadyService
from bookie.http.service.bookie_sanity_service import BookieSanityService
from bookie.http.service.bookie_state_read_only_service import BookieStateReadOnlyService
from bookie.http.service.bookie_state_service import BookieStateService
from bookie.http.service.cluster_info_service import ClusterInfoService
from bookie.http.service.configuration_service import ConfigurationService
from bookie.http.service.decommission_service import DecommissionService
from bookie.http.service.delete_ledger_service import DeleteLedgerService
from bookie.http.service.gc_details_service import GCDetailsService
from bookie.http.service.get_last_log_mark_service import GetLastLogMarkService
from bookie.http.service.get_ledger_meta_service import GetLedgerMetaService
from bookie.http.service.heartbeat_service import HeartbeatService
from bookie.http.service.list_bookie_info_service import ListBookieInfoService
from bookie.http.service.list_bookies_service import ListBookiesService
from bookie.http.service.list_disk_files_service import ListDiskFilesService
from bookie.http.service.list_ledger_service import ListLedgerService
from bookie.http.service.list_under_replicated_ledger_service import ListUnderReplicatedLedgerService
from bookie.http.service.lost_bookie_recovery_delay_service import LostBookieRecoveryDelayService
from bookie.http.service.metrics_service import MetricsService
from bookie.http.service.read_ledger_entry_service import ReadLedgerEntryService
from bookie.http.service.recovery_bookie_service import RecoveryBookieService
from bookie.http.service.resume_compaction_service import ResumeCompactionService
from bookie.http.service.suspend_compaction_service import SuspendCompactionService
from bookie.http.service.trigger_audit_service import TriggerAuditService
from bookie.http.service.trigger_gc_service import TriggerGCService
from bookie.http.service.who_is_auditor_service import WhoIsAuditorService

# The routes that read the bookie itself.
BOOKIE_ROUTES = {ApiType.GC, ApiType.GC_DETAILS, ApiType.BOOKIE_STATE, ApiType.BOOKIE_STATE_READONLY,
                 ApiType.BOOKIE_IS_READY, ApiType.BOOKIE_INFO, ApiType.SUSPEND_GC_COMPACTION,
                 ApiType.RESUME_GC_COMPACTION}
CLUSTER_SERVICES = {
    ApiType.DELETE_LEDGER: DeleteLedgerService, ApiType.LIST_LEDGER: ListLedgerService,
    ApiType.GET_LEDGER_META: GetLedgerMetaService, ApiType.READ_LEDGER_ENTRY: ReadLedgerEntryService,
    ApiType.LIST_BOOKIES: ListBookiesService, ApiType.LIST_BOOKIE_INFO: ListBookieInfoService,
    ApiType.CLUSTER_INFO: ClusterInfoService, ApiType.AUTORECOVERY_STATUS: AutoRecoveryStatusService,
    ApiType.RECOVERY_BOOKIE: RecoveryBookieService,
    ApiType.LIST_UNDER_REPLICATED_LEDGER: ListUnderReplicatedLedgerService,
    ApiType.WHO_IS_AUDITOR: WhoIsAuditorService, ApiType.TRIGGER_AUDIT: TriggerAuditService,
    ApiType.LOST_BOOKIE_RECOVERY_DELAY: LostBookieRecoveryDelayService, ApiType.DECOMMISSION: DecommissionService,
}
UNSUPPORTED = {
    ApiType.EXPAND_STORAGE: (HttpRouter.EXPAND_STORAGE, "its storage (InterleavedLedgerStorage) is not expanded at "
                             "run time: allowStorageExpansion is not implemented. Add ledger directories to a stopped "
                             "bookie's configuration (a new cookie is needed) or add a bookie"),
    ApiType.TRIGGER_ENTRY_LOCATION_COMPACT: (HttpRouter.ENTRY_LOCATION_COMPACT, "it compacts DbLedgerStorage's "
                                             "RocksDB entry-location index, and this bookie's storage is "
                                             "InterleavedLedgerStorage (entry logs and .idx index files), which has "
                                             "no such index"),
}


class NoBookieService(HttpEndpointService):
    """A bookie route in a process that runs no bookie (``bk autorecovery``): 500, whatever the method, as
    BookKeeper answers there."""
    METHODS = HTTP_METHODS
    BLOCKING = False

    def __init__(self, api_type: ApiType):
        self.api_type = api_type

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        return HttpServiceResponse.text(f"this process runs no bookie (bk autorecovery): {self.api_type.name} needs "
                                        "one; ask the HTTP server of a bookie", INTERNAL_ERROR)


class BKHttpServiceProvider:
    def __init__(self, conf, bookie_server=None, autorecovery=None, stats_provider=None,
                 cluster: ClusterContext | None = None):
        self.conf = conf
        self.bookie_server = bookie_server  # a BookieServer; None in bk autorecovery
        self.autorecovery = autorecovery  # the process's AutoRecoveryMain, if it runs one
        self.stats_provider = stats_provider  # a PrometheusMetricsProvider; None when statistics are disabled
        self.cluster = cluster if cluster is not None else ClusterContext(conf)

    def provide_http_endpoint_service(self, api_type: ApiType) -> HttpEndpointService:
        conf, server = self.conf, self.bookie_server
        if api_type in CLUSTER_SERVICES:
            return CLUSTER_SERVICES[api_type](self.cluster)
        if api_type in UNSUPPORTED:
            return UnsupportedService(*UNSUPPORTED[api_type])
        if api_type in BOOKIE_ROUTES and server is None:
            return NoBookieService(api_type)
        services = {
            ApiType.HEARTBEAT: lambda: HeartbeatService(),
            ApiType.SERVER_CONFIG: lambda: ConfigurationService(conf),
            ApiType.METRICS: lambda: MetricsService(conf, self.stats_provider),
            ApiType.LAST_LOG_MARK: lambda: GetLastLogMarkService(conf, server),
            ApiType.LIST_DISK_FILE: lambda: ListDiskFilesService(conf),
            ApiType.BOOKIE_SANITY: lambda: BookieSanityService(conf, server),
            ApiType.GC: lambda: TriggerGCService(conf, server),
            ApiType.GC_DETAILS: lambda: GCDetailsService(conf, server),
            ApiType.BOOKIE_STATE: lambda: BookieStateService(conf, server),
            ApiType.BOOKIE_STATE_READONLY: lambda: BookieStateReadOnlyService(conf, server),
            ApiType.BOOKIE_IS_READY: lambda: BookieIsReadyService(conf, server),
            ApiType.BOOKIE_INFO: lambda: BookieInfoService(conf, server),
            ApiType.SUSPEND_GC_COMPACTION: lambda: SuspendCompactionService(conf, server),
            ApiType.RESUME_GC_COMPACTION: lambda: ResumeCompactionService(conf, server),
        }
        return services[api_type]()

    def close(self) -> None:
        self.cluster.close()
