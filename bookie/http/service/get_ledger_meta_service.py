"""GET /api/v1/ledger/metadata?ledger_id=N (BookKeeper's GetLedgerMetaService): ``{"N": metadata}``, the
metadata as BookKeeper's JsonUtil writes a LedgerMetadata (Jackson over LedgerMetadataImpl's getters) but
without its ``password``: the digest type says how entries are checked; the password is no one's business."""
from __future__ import annotations

import base64
from typing import Any

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService, ledger_json_id
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import CURRENT_FORMAT_VERSION, LedgerMetadata


def ledger_metadata_json(ledger: LedgerId, md: LedgerMetadata) -> dict[str, Any]:
    """``md`` as BookKeeper 4.17's JsonUtil.toJson(LedgerMetadata) gives it, its fields in its order, less the
    password: bookies as ``{"id": ...}`` (BookieId), custom metadata values in base64 (byte[])."""
    return {"ledgerId": ledger_json_id(ledger), "metadataFormatVersion": CURRENT_FORMAT_VERSION,
            "ensembleSize": md.ensemble_size, "writeQuorumSize": md.write_quorum_size,
            "ackQuorumSize": md.ack_quorum_size, "state": md.state.name, "length": md.length,
            "lastEntryId": md.last_entry_id, "ctime": md.ctime, "digestType": md.digest_type.name,
            "customMetadata": {key: base64.b64encode(value).decode() for key, value in md.custom_metadata},
            "closed": md.is_closed, "ctoken": md.ctoken,
            "allEnsembles": {str(first): [{"id": bookie} for bookie in bookies] for first, bookies in md.ensembles}}


class GetLedgerMetaService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        ledger = request.required_ledger()
        md = self.cluster.store().read_ledger(ledger).value
        return HttpServiceResponse.json({str(ledger): ledger_metadata_json(ledger, md)})
