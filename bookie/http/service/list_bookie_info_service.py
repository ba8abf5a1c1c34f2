"""GET /api/v1/bookie/list_bookie_info (BookKeeper's ListBookieInfoService): every registered bookie's free and
total disk space, then the cluster's, in BookKeeper's strings::

    {"127.0.0.1:3181": ": {Free: 81234567890(81.234GB), Total: 250000000000(250GB)},",
     "ClusterInfo: ": "{Free: ..., Total: ...}"}

A bookie that does not answer is left out (and logged); 404 when none answers."""
from __future__ import annotations

import logging
from decimal import ROUND_DOWN, Decimal

from bookie.exceptions import BKException
from bookie.http.http_service import NOT_FOUND, HttpServiceRequest, HttpServiceResponse
from bookie.http.service.cluster_service import ClusterService

log = logging.getLogger(__name__)
UNITS = ("", "KB", "MB", "GB", "TB")


def readable(value: int) -> str:
    """ListBookieInfoService.getReadable: ``(1.234GB)`` in decimal units, three decimals at most, cut (not
    rounded); "" below 1000."""
    scaled, unit = float(value), 0
    while scaled >= 1000 and unit < len(UNITS) - 1:
        scaled /= 1000
        unit += 1
    if unit == 0:
        return ""
    text = f"{Decimal(repr(scaled)).quantize(Decimal('0.001'), rounding=ROUND_DOWN):f}".rstrip("0").rstrip(".")
    return f"({text}{UNITS[unit]})"


def space(free: int, total: int) -> str:
    return f"{{Free: {free}{readable(free)}, Total: {total}{readable(total)}}}"


class ListBookieInfoService(ClusterService):
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        answered = {}
        for bookie, info in self.cluster.admin().bookie_info().items():
            if isinstance(info, BKException):
                log.error("Reading bookie info from bookie %s failed: %s", bookie, info)
            else:
                answered[bookie] = info
        if not answered:
            return HttpServiceResponse.text("Not found any Bookie info.", NOT_FOUND)
        listed = {bookie: f": {space(info.freeDiskSpace, info.totalDiskCapacity)},"
                  for bookie, info in answered.items()}
        listed["ClusterInfo: "] = space(sum(i.freeDiskSpace for i in answered.values()),
                                        sum(i.totalDiskCapacity for i in answered.values()))
        return HttpServiceResponse.json(listed)
