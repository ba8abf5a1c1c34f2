"""PUT /api/v1/autorecovery/trigger_audit (BookKeeper's TriggerAuditService over BookKeeperAdmin.triggerAudit):
makes the auditor audit every lost bookie now, by rewriting lostBookieRecoveryDelay, which it watches. Refused
(404, BookKeeper's messages) while AutoRecovery is disabled or no auditor is elected: no one would audit."""
from __future__ import annotations

from bookie.http.http_service import NOT_FOUND, HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService
from bookie.replication.auditor_elector import current_auditor


class TriggerAuditService(ClusterService):
    METHODS = ("PUT",)

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        manager = self.cluster.underreplication()
        if not manager.is_ledger_replication_enabled():
            return HttpServiceResponse.text("Exception when do operation.Autorecovery is disabled. So giving up!",
                                            NOT_FOUND)
        if current_auditor(self.cluster.store()) is None:
            return HttpServiceResponse.text("Exception when do operation.No auditor elected, though Autorecovery is "
                                            "enabled. So giving up.", NOT_FOUND)
        manager.trigger_audit(self.cluster.conf["lostBookieRecoveryDelay"])
        return HttpServiceResponse.text("Success trigger audit.")
