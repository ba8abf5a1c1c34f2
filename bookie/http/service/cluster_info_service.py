"""GET /api/v1/bookie/cluster_info (BookKeeper's ClusterInfoService): ClusterInfo's eight fields::

    {"auditorElected": true, "auditorId": "127.0.0.1:3181", "clusterUnderReplicated": false,
     "ledgerReplicationEnabled": true, "totalBookiesCount": 3, "writableBookiesCount": 3,
     "readonlyBookiesCount": 0, "unavailableBookiesCount": 0}

(``bk shell clusterinfo`` adds two beyond them; a Java reader of ClusterInfo refuses unknown fields, so this
route does not.) An auditor that cannot be read is no auditor, as BookKeeper has it."""
from __future__ import annotations

import logging

from bookie.exceptions import BKException
from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService
from bookie.meta.cluster_info import cluster_info
from bookie.replication.auditor_elector import current_auditor

log = logging.getLogger(__name__)


class ClusterInfoService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        store = self.cluster.store()
        try:
            auditor = current_auditor(store)
        except BKException as exc:
            log.error("Could not get Auditor info: %s", exc)
            auditor = None
        return HttpServiceResponse.json(cluster_info(store, auditor))
