"""DELETE /api/v1/ledger/delete?ledger_id=N (BookKeeper's DeleteLedgerService): deletes the ledger's metadata;
the bookies reclaim its space by garbage collection. Answers the JSON string ``"Deleted ledger: N"``."""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService


class DeleteLedgerService(ClusterService):
    METHODS = ("DELETE",)

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        ledger = request.required_ledger()
        self.cluster.bookkeeper().delete_ledger(ledger)
        return HttpServiceResponse.json(f"Deleted ledger: {ledger}")
