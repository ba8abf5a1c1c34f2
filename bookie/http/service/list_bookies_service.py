"""GET /api/v1/bookie/list_bookies?type=rw|ro[&print_hostnames=true] (BookKeeper's ListBookiesService): the
writable (``rw``, the default) or read-only (``ro``) bookies as ``{"bookieId": null}``, or with
print_hostnames ``{"bookieId": "host"}``: the host of the address its registration gives
(BookieAddressResolver.resolve(...).getHostName())."""
from __future__ import annotations

from bookie.http.http_service import HttpServiceRequest, HttpServiceResponse, RequestRefused
from bookie.http.service.cluster_service import ClusterService
from bookie.meta.bookie_service_info import bookie_address

TYPES = {"rw": False, "ro": True}  # type -> read-only


class ListBookiesService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        kind = request.params.get("type", "rw")
        if kind not in TYPES:
            raise RequestRefused(f"type={kind!r}: list type=rw (writable bookies) or type=ro (read-only bookies)")
        hostnames = request.bool_param("print_hostnames")
        store = self.cluster.store()
        listed: dict[str, str | None] = {}
        for bookie in store.bookies(read_only=TYPES[kind]):
            listed[bookie] = (bookie_address(store.bookie_service_info(bookie), bookie).rpartition(":")[0]
                              if hostnames else None)
        return HttpServiceResponse.json(listed)
