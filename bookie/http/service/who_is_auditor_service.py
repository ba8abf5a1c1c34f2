"""GET /api/v1/autorecovery/who_is_auditor (BookKeeper's WhoIsAuditorService): ``Auditor: <bookie id>``, or 404
``No auditor elected``."""
from __future__ import annotations

from bookie.exceptions import BKException
from bookie.http.http_service import NOT_FOUND, HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService
from bookie.replication.auditor_elector import current_auditor


class WhoIsAuditorService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        try:
            auditor = current_auditor(self.cluster.store())
        except BKException as exc:
            return HttpServiceResponse.text(f"Exception when get.{exc}", NOT_FOUND)
        if auditor is None:
            return HttpServiceResponse.text("No auditor elected", NOT_FOUND)
        return HttpServiceResponse.text(f"Auditor: {auditor}")
