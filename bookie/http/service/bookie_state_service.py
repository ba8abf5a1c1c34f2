"""GET /api/v1/bookie/state (BookKeeper's BookieStateService): the bookie's StateManager flags."""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.bookie_server_service import BookieServerService


class BookieStateService(BookieServerService):
    WRONG_METHOD = "Only support GET method to retrieve bookie state."
    BLOCKING = False

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        server, bookie = self.bookie_server, self.bookie_if_running()
        running = bookie is not None
        # High-priority writes (recovery adds) are taken even read-only: by any running bookie not stopping.
        return HttpServiceResponse.json({
            "running": running,
            "readOnly": bookie.read_only if running else server.conf["forceReadOnlyBookie"],
            "shuttingDown": server.shutting_down,
            "availableForHighPriorityWrites": running and not server.shutting_down,
        })
