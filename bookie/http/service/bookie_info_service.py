"""GET /api/v1/bookie/info (BookKeeper's BookieInfoService): this bookie's free and total disk space, as the
GetBookieInfo request reports them (its ledger directories' file systems)."""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse
from bookie.http.service.bookie_server_service import BookieServerService


class BookieInfoService(BookieServerService):
    WRONG_METHOD = "Only GET is supported."

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        total, free = self.running_bookie().disk_info()
        return HttpServiceResponse.json({"freeSpace": free, "totalSpace": total})
