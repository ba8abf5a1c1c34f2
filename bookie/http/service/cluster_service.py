"""The base of the cluster-wide services of the HTTP admin API (those over ledgers, bookies and AutoRecovery):
each works through the process's ClusterContext, on a worker thread (HttpEndpointService), and answers a ledger
that does not exist with 404, as BookKeeper's ledger services do."""
from __future__ import annotations

from bookie.exceptions import BKNoSuchLedgerExistsException
from bookie.http.cluster_context import ClusterContext
from bookie.http.http_service import (NOT_FOUND, HttpEndpointService, HttpServiceRequest, HttpServiceResponse,
                                      RequestRefused)
from bookie.ledger_id import LedgerId


class ClusterService(HttpEndpointService):
    """A service over the cluster (``cluster``)."""

    def __init__(self, cluster: ClusterContext):
        self.cluster = cluster

    async def answer(self, request: HttpServiceRequest) -> HttpServiceResponse:
        try:
            return await super().answer(request)
        except BKNoSuchLedgerExistsException as missing:
            raise RequestRefused(str(missing), NOT_FOUND) from None


def ledger_json_id(ledger: LedgerId) -> int | str:
    """A ledger id where BookKeeper writes one as a JSON number: that number (scope 0); a ledger of another
    scope, which BookKeeper cannot name, as its qualified name."""
    return ledger.ledger_id if ledger.scope_id == 0 else ledger.qualified_name
