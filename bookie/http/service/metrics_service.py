"""GET /metrics (BookKeeper's MetricsService): every metric of the process's provider in Prometheus' text format
0.0.4; with statistics disabled (enableStatistics=false) a 500 that says so, as BookKeeper answers without a
stats provider."""
from __future__ import annotations

from bookie.http.http_service import (FORBIDDEN, INTERNAL_ERROR, OK, HttpEndpointService, HttpServiceRequest,
                                      HttpServiceResponse)

PROMETHEUS_CONTENT_TYPE_004 = "text/plain; version=0.0.4; charset=utf-8"


class MetricsService(HttpEndpointService):
    WRONG_METHOD = "{method} is forbidden. Should be GET method"
    WRONG_METHOD_CODE = FORBIDDEN

    def __init__(self, conf, stats_provider=None):
        self.conf = conf
        self.stats_provider = stats_provider  # a PrometheusMetricsProvider, None when statistics are disabled

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        if self.stats_provider is None:
            return HttpServiceResponse.text("Stats provider is not enabled. Please enable it by setting "
                                            "enableStatistics=true in the bookie configuration", INTERNAL_ERROR)
        text = self.stats_provider.write_all()  # a scrape samples every gauge: on a worker thread
        return HttpServiceResponse(OK, text, PROMETHEUS_CONTENT_TYPE_004)
