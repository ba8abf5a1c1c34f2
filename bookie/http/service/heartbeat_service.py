"""GET /heartbeat (BookKeeper's HeartbeatService): "OK" while the server answers, whatever the bookie's state."""
from __future__ import annotations

from bookie.http.http_service import HTTP_METHODS, HttpEndpointService, HttpServiceRequest, HttpServiceResponse

HEARTBEAT = "OK\n"


class HeartbeatService(HttpEndpointService):
    METHODS = HTTP_METHODS  # any: BookKeeper's answers every method
    BLOCKING = False

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        return HttpServiceResponse.text(HEARTBEAT)
