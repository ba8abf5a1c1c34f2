"""PUT/GET /api/v1/bookie/gc (BookKeeper's TriggerGCService): force a garbage-collection pass, with an optional
``{"forceMajor": bool, "forceMinor": bool}`` (each defaults to "that compaction is not suspended"); GET says
whether a forced pass is pending or running, as ``{"is_in_force_gc": "true"|"false"}``.

Through the bookie's GarbageCollection request (garbage_collection_request.handle), as ``bk shell gc`` forces it.
As BookKeeper's service, any failure is answered 400 "Failed to handle the request, exception: ...".
"""
from __future__ import annotations

import logging
import threading

from bookie.http.http_service import (BAD_REQUEST, INTERNAL_ERROR, METHOD_NOT_ALLOWED, HttpServiceRequest,
                                      HttpServiceResponse, RequestRefused, bool_field)
from bookie.http.service.bookie_server_service import BookieServerService
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from bookie.server import garbage_collection_request

log = logging.getLogger(__name__)
Action = pb.GarbageCollectionRequest


def garbage_collection(bookie, action: int = Action.STATUS, major: bool = False,
                       minor: bool = False) -> pb.GarbageCollectionResponse:
    """The bookie's answer to a GarbageCollection request; refused 500 with its message if the bookie refuses it
    (e.g. a bookie that runs no garbage collector)."""
    response = garbage_collection_request.handle(bookie, Action(action=action, major=major, minor=minor))
    if response.status != status.EOK:
        raise RequestRefused(f"{status.name_of(response.status)}: {response.message}", INTERNAL_ERROR)
    return response


class TriggerGCService(BookieServerService):
    METHODS = ("PUT", "GET")
    WRONG_METHOD = "Not allowed method. Should be PUT to trigger GC, Or GET to get Force GC state."
    WRONG_METHOD_CODE = METHOD_NOT_ALLOWED

    def __init__(self, conf, bookie_server):
        super().__init__(conf, bookie_server)
        self._forced_pass = 0  # the pass the last forcing through this service waits for
        self._lock = threading.Lock()  # over _forced_pass: requests are served on worker threads

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        bookie = self.running_bookie()
        try:
            if request.method == "GET":
                state = garbage_collection(bookie)
                forced = state.passes < self._forced_pass or (state.passRunning and state.forceCompacting)
                return HttpServiceResponse.json({"is_in_force_gc": str(forced).lower()})
            major, minor = self._force_flags(bookie, request)
            response = garbage_collection(bookie, Action.FORCE, major, minor)
            with self._lock:
                self._forced_pass = max(self._forced_pass, response.forcedPass)
            return HttpServiceResponse.json(f"Triggered GC on BookieServer: {self.bookie_server.bookie_id}")
        except RequestRefused as exc:
            log.error("Failed to handle the request, method: %s: %s", request.method, exc)
            return HttpServiceResponse.text(f"Failed to handle the request, exception: {exc}", BAD_REQUEST)

    @staticmethod
    def _force_flags(bookie, request: HttpServiceRequest) -> tuple[bool, bool]:
        """(forceMajor, forceMinor): the body's, each defaulting to "not suspended" (TriggerGCService). No body:
        a pass that keeps suspended compactions suspended (LedgerStorage.forceGC())."""
        if not request.body.strip():
            return False, False
        body = request.json_object('{"forceMajor": true|false, "forceMinor": true|false}, or no body')
        unknown = sorted(set(body) - {"forceMajor", "forceMinor"})
        if unknown:
            raise RequestRefused(f"unknown field {', '.join(unknown)}: the fields are forceMajor and forceMinor")
        state = garbage_collection(bookie)
        return (bool_field(body, "forceMajor", not state.majorCompactionSuspended),
                bool_field(body, "forceMinor", not state.minorCompactionSuspended))
