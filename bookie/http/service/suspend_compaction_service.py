"""PUT/GET /api/v1/bookie/gc/suspend_compaction (BookKeeper's SuspendCompactionService): PUT
``{"suspendMajor": bool, "suspendMinor": bool}`` suspends the compactions set true; GET reports
``{"isMajorGcSuspended": "true"|"false", "isMinorGcSuspended": ...}``. ``CompactionSwitchService`` is the PUT
of both this route and resume_compaction, through the bookie's GarbageCollection request."""
from __future__ import annotations

from bookie.http.http_service import BAD_REQUEST, HttpServiceRequest, HttpServiceResponse, RequestRefused, bool_field
from bookie.http.service.bookie_server_service import BookieServerService
from bookie.http.service.trigger_gc_service import Action, garbage_collection


class CompactionSwitchService(BookieServerService):
    """Suspend or resume (``verb``) the compactions a PUT body names as ``<verb>Major`` / ``<verb>Minor``."""
    METHODS = ("PUT",)
    WRONG_METHOD = ("Not found method. Should be PUT to suspend major or minor compaction, Or GET to get "
                    "compaction state.")
    verb = "suspend"
    action = Action.SUSPEND

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        bookie = self.running_bookie()
        keys = (f"{self.verb}Major", f"{self.verb}Minor")
        body = request.json_object(f'{{"{keys[0]}": true|false, "{keys[1]}": true|false}}',
                                   empty=RequestRefused("Empty request body"))
        unknown = sorted(set(body) - set(keys))
        if unknown:
            raise RequestRefused(f"unknown field {', '.join(unknown)}: the fields are {keys[0]} and {keys[1]}")
        major, minor = (bool_field(body, key) for key in keys)
        if major is None and minor is None:
            return HttpServiceResponse.text(f"No {keys[0]} or {keys[1]} params found", BAD_REQUEST)
        if major or minor:
            garbage_collection(bookie, self.action, bool(major), bool(minor))
        said, server = self.verb.capitalize(), self.bookie_server
        output = f"{said} majorGC on BookieServer: {server}" if major else ""
        if minor:
            output += f", {said} minorGC on BookieServer: {server}"  # BookKeeper's text, ", " even first
        return HttpServiceResponse.json(output)


class SuspendCompactionService(CompactionSwitchService):
    METHODS = ("GET", "PUT")

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        if request.method != "GET":
            return super().serve(request)
        state = garbage_collection(self.running_bookie())
        return HttpServiceResponse.json({"isMajorGcSuspended": str(state.majorCompactionSuspended).lower(),
                                         "isMinorGcSuspended": str(state.minorCompactionSuspended).lower()})
