"""/api/v1/autorecovery/status (BookKeeper's AutoRecoveryStatusService): GET ``{"enabled": true}``, whether
AutoRecovery is enabled for the cluster; PUT ``?enabled=true|false`` enables or disables it (nothing to do
when it already is) and answers the status after it. ``bk shell autorecovery`` reads and sets the same."""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse, RequestRefused
from bookie.http.service.cluster_service import ClusterService


class AutoRecoveryStatusService(ClusterService):
    METHODS = ("GET", "PUT")

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        manager = self.cluster.underreplication()
        if request.method == "PUT":
            if "enabled" not in request.params:
                raise RequestRefused(f"Param 'enabled' not found in {request.params}: give enabled=true or "
                                     "enabled=false")
            if request.bool_param("enabled"):
                manager.enable_ledger_replication()
            else:
                manager.disable_ledger_replication()
        return HttpServiceResponse.json({"enabled": manager.is_ledger_replication_enabled()})
