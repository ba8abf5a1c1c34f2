"""GET/PUT /api/v1/bookie/state/readonly (BookKeeper's BookieStateReadOnlyService): whether the bookie is
read-only, and switching it at run time with ``{"readOnly": true|false}``. The switch is Bookie.set_read_only,
whose state listener moves the registration between ``available`` and ``available/readonly``; the answer
comes once the registration has moved.

Refused as BookKeeper refuses them (400): going writable under forceReadOnlyBookie=true, going read-only under
readOnlyModeEnabled=false. A bookie read-only because its disks are full stays read-only: the answer says so.
"""
from __future__ import annotations

from bookie.http.http_service import BAD_REQUEST, HttpServiceRequest, HttpServiceResponse, RequestRefused, bool_field
from bookie.http.service.bookie_server_service import BookieServerService

EXPECTED = '{"readOnly": true} or {"readOnly": false}'


class BookieStateReadOnlyService(BookieServerService):
    METHODS = ("GET", "PUT")
    WRONG_METHOD = "Unsupported method. Should be GET or PUT method"

    def __init__(self, conf, bookie_server):
        super().__init__(conf, bookie_server)
        # StateManager.isForceReadOnly: the bookie was started forced read-only (a later change of the key, through
        # the configuration route, does not make it so).
        self.force_read_only = bookie_server.conf["forceReadOnlyBookie"]

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        bookie = self.running_bookie()
        if request.method == "PUT":
            wanted = _read_only_of(request)
            if bookie.read_only and not wanted:
                if self.force_read_only:
                    return HttpServiceResponse.text("Bookie is in forceReadOnly mode, cannot transit to writable "
                                                    "mode", BAD_REQUEST)
                bookie.set_read_only(False)  # re-registers: ZooKeeper calls
            elif not bookie.read_only and wanted:
                if not self.bookie_server.conf["readOnlyModeEnabled"]:
                    return HttpServiceResponse.text("Bookie is disabled ReadOnly mode, cannot transit to readOnly "
                                                    "mode", BAD_REQUEST)
                bookie.set_read_only(True)
        return HttpServiceResponse.json({"readOnly": bookie.read_only})


def _read_only_of(request: HttpServiceRequest) -> bool:
    body = request.json_object(EXPECTED)
    unknown = sorted(set(body) - {"readOnly"})
    if unknown:
        raise RequestRefused(f"unknown field {', '.join(unknown)}: expected {EXPECTED}")
    wanted = bool_field(body, "readOnly")
    if wanted is None:
        raise RequestRefused(f"readOnly is missing: expected {EXPECTED}")
    return wanted
