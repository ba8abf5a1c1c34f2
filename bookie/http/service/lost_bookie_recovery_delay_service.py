"""/api/v1/autorecovery/lost_bookie_recovery_delay (BookKeeper's LostBookieRecoveryDelayService): GET
``lostBookieRecoveryDelay value: N``, the seconds the auditor waits before it marks a lost bookie's ledgers
(this configuration's lostBookieRecoveryDelay while no auditor has stored one); PUT ``{"delay_seconds": N}``
sets it for the cluster: ``Success set lostBookieRecoveryDelay to N``."""
from __future__ import annotations

from bookie.exceptions import BKException
from bookie.http.http_service import NOT_FOUND, HttpServiceRequest, HttpServiceResponse, RequestRefused
from bookie.http.service.cluster_service import ClusterService

MAX_DELAY_SECONDS = 2**31 - 1  # a Java int, as BookKeeper stores and reads it


class LostBookieRecoveryDelayService(ClusterService):
    METHODS = ("GET", "PUT")

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        manager = self.cluster.underreplication()
        if request.method == "GET":
            try:
                delay = manager.get_lost_bookie_recovery_delay(self.cluster.conf["lostBookieRecoveryDelay"])
            except BKException as exc:
                return HttpServiceResponse.text(f"Exception when get lostBookieRecoveryDelay.{exc}", NOT_FOUND)
            return HttpServiceResponse.text(f"lostBookieRecoveryDelay value: {delay}")
        body = request.json_object(empty=RequestRefused("Null request body for lostBookieRecoveryDelay.", NOT_FOUND))
        if "delay_seconds" not in body:
            raise RequestRefused("Request body not contains lostBookieRecoveryDelay.", NOT_FOUND)
        delay = body["delay_seconds"]
        if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= MAX_DELAY_SECONDS:
            raise RequestRefused(f"delay_seconds is a whole number of seconds from 0 to {MAX_DELAY_SECONDS}, "
                                 f"not {delay!r}")
        manager.set_lost_bookie_recovery_delay(delay)
        return HttpServiceResponse.text(f"Success set lostBookieRecoveryDelay to {delay}")
