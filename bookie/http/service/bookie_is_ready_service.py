"""GET /api/v1/bookie/is_ready (BookKeeper's BookieIsReadyService), the readiness probe: 200 "OK" once the bookie
has replayed its journal, listens and is registered; 503 before, and again once it is shutting down."""
from __future__ import annotations

from bookie.http.http_service import SERVICE_UNAVAILABLE, HttpServiceRequest, HttpServiceResponse
from bookie.http.service.bookie_server_service import NOT_STARTED, BookieServerService


class BookieIsReadyService(BookieServerService):
    WRONG_METHOD = "Only support GET method check if bookie is ready."
    BLOCKING = False

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        server = self.bookie_server
        if server.ready and not server.shutting_down:
            return HttpServiceResponse.text("OK")
        return HttpServiceResponse.text(NOT_STARTED, SERVICE_UNAVAILABLE)
