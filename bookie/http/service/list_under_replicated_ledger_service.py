"""GET /api/v1/autorecovery/list_under_replicated_ledger (BookKeeper's ListUnderReplicatedLedgerService): the
ledgers marked under-replicated, as a JSON list of ids; 404 ``No under replicated ledgers found`` when none is.

``missingreplica=B`` keeps those missing a replica on B, ``excludingmissingreplica=B`` those not missing B
(a blank value: no condition); ``printmissingreplica`` answers ``{"id": ["missing bookie", ...]}`` instead.
Beyond BookKeeper's route (BookieShell's listunderreplicated ``-printreplicationworkerid``):
``printreplicationworkerid`` answers ``{"id": {"replicationWorkerId": "who holds its lock, or null"}}``,
with ``"missingReplicas"`` too when printmissingreplica is asked for. A ledger of another scope (a 128-bit
id, which BookKeeper cannot name) is listed by its qualified name."""
from __future__ import annotations

from typing import Any

from bookie.exceptions import BKException
from bookie.http.http_service import NOT_FOUND, HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService, ledger_json_id
from bookie.meta.ledger_underreplication_manager import missing_replica_filter


class ListUnderReplicatedLedgerService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        including = request.params.get("missingreplica", "").strip() or None  # StringUtils.isBlank: none
        excluding = request.params.get("excludingmissingreplica", "").strip() or None
        print_missing = request.flag_param("printmissingreplica")
        print_worker = request.flag_param("printreplicationworkerid")
        manager = self.cluster.underreplication()
        try:
            marked = list(manager.list_underreplicated(missing_replica_filter(including, excluding)))
            workers = {u.ledger: manager.lock_holder(u.ledger) for u in marked} if print_worker else {}
        except BKException as exc:
            return HttpServiceResponse.text(f"Exception when get.{exc}", NOT_FOUND)
        if not marked:
            return HttpServiceResponse.text("No under replicated ledgers found", NOT_FOUND)
        if print_worker:
            listed: dict[str, Any] = {}
            for u in marked:
                listed[str(u.ledger)] = ({"missingReplicas": list(u.replicas)} if print_missing else {})
                listed[str(u.ledger)]["replicationWorkerId"] = workers[u.ledger]
            return HttpServiceResponse.json(listed)
        if print_missing:
            return HttpServiceResponse.json({str(u.ledger): list(u.replicas) for u in marked})
        return HttpServiceResponse.json([ledger_json_id(u.ledger) for u in marked])
