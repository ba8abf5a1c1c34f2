"""The base of the HTTP services over this process's bookie (the BookieServer a BookKeeper service is given):
the bookie's state, its garbage collector, its journals, its disks. In ``bk autorecovery`` there is no
BookieServer: the routes that need one are not built on this base there (BKHttpServiceProvider answers them
500), and those that do not (last_log_mark, sanity) answer from the configuration."""
from __future__ import annotations

from bookie.http.http_service import SERVICE_UNAVAILABLE, HttpEndpointService, RequestRefused
from bookie.server.conf import ServerConfiguration

NOT_STARTED = "Bookie is not fully started yet"  # BookieIsReadyService's answer while the bookie starts


class BookieServerService(HttpEndpointService):
    """A service over ``bookie_server`` (a bookie.server.bookie_server.BookieServer; None in a process without
    one) and the process's configuration ``conf``."""

    def __init__(self, conf: ServerConfiguration, bookie_server=None):
        self.conf = conf
        self.bookie_server = bookie_server

    def bookie_if_running(self):
        """The bookie once it has replayed its journal and registered; None before, and without a bookie."""
        bookie = self.bookie_server.bookie if self.bookie_server is not None else None
        return bookie if bookie is not None and bookie.running else None

    def running_bookie(self):
        """The running bookie, for a route that needs it; refused 503 (NOT_STARTED) before it runs."""
        bookie = self.bookie_if_running()
        if bookie is None:
            raise RequestRefused(NOT_STARTED, SERVICE_UNAVAILABLE)
        return bookie
