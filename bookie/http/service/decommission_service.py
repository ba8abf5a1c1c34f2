"""PUT /api/v1/autorecovery/decommission with ``{"bookie_src": "host:port"}`` (BookKeeper's DecommissionService):
decommissions a stopped bookie in the background (BookKeeperAdmin.decommissionBookie: its ledgers handed to
AutoRecovery, through the auditor if one is elected; the wait until nothing references it; its cookie
deleted) and answers at once: ``Success send decommission Bookie command <id>``. A bookie still registered is
refused at once (404, as BookKeeper answers what fails before the job starts); the job's end is logged."""
from __future__ import annotations

from bookie.exceptions import BKException
from bookie.http.http_service import NOT_FOUND, HttpServiceRequest, HttpServiceResponse, RequestRefused, bookie_id
from bookie.http.service.cluster_service import ClusterService
from bookie.replication.auditor_elector import current_auditor


class DecommissionService(ClusterService):
    METHODS = ("PUT",)

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        body = request.json_object(empty=RequestRefused("Null request body for DecommissionService.", NOT_FOUND))
        if "bookie_src" not in body:
            raise RequestRefused("Request body not contains bookie_src.", NOT_FOUND)
        try:
            bookie = bookie_id(body["bookie_src"], "bookie_src")
            admin = self.cluster.admin()
            admin.ensure_down(bookie)
        except (ValueError, BKException) as exc:
            raise RequestRefused(f"Exception when send decommission command.{exc}", NOT_FOUND) from None
        store, delay = self.cluster.store(), self.cluster.conf["lostBookieRecoveryDelay"]
        self.cluster.run_in_background(
            f"decommission of bookie {bookie}",
            lambda: admin.decommission_bookie(bookie, current_auditor(store), delay))
        return HttpServiceResponse.text(f"Success send decommission Bookie command {bookie}")
