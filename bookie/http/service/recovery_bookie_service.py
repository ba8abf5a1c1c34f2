"""PUT /api/v1/autorecovery/bookie (BookKeeper's RecoveryBookieService): recovers lost bookies' data, in the
background; the answer comes at once: ``Success send recovery request command.``. The body::

    {"bookie_src": ["host:port", ...], "delete_cookie": false}

Every bookie named is recovered (BookKeeperAdmin.recoverBookieData: each ledger with a fragment on one of
them gets that share copied to other bookies; an open ledger is fenced and closed first); with
``delete_cookie`` their cookies are deleted afterwards if everything was recovered. What it did, or what it
could not recover, is logged. BookKeeper 4.17 recovers the first bookie named only, and has dropped
``bookie_dest`` (the placement policy picks where data goes): an empty one is accepted, any other refused.
A body that cannot be read is answered 404 ``ERROR parameters: ...``, as BookKeeper answers it."""
from __future__ import annotations

from typing import Any

from bookie.client.bookkeeper_admin import BookKeeperAdmin
from bookie.exceptions import BKReplicationException
from bookie.http.http_service import NOT_FOUND, HttpServiceRequest, HttpServiceResponse, RequestRefused, bookie_id
from bookie.http.service.cluster_service import ClusterService

FIELDS = ("bookie_src", "bookie_dest", "delete_cookie")
EXAMPLE = '{"bookie_src": ["host:port", ...], "delete_cookie": false}'


def recovery_request(body: Any) -> tuple[list[str], bool]:
    """(bookies to recover, delete their cookies) of a request body; ValueError saying what is wrong."""
    if not isinstance(body, dict):
        raise ValueError(f"the body is a JSON object: {EXAMPLE}")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}: the body takes {', '.join(FIELDS)}")
    sources = body.get("bookie_src")
    if not isinstance(sources, list) or not sources:
        raise ValueError(f"bookie_src names no bookie (it is {sources!r}): {EXAMPLE}")
    if body.get("bookie_dest"):
        raise ValueError("bookie_dest is not supported (BookKeeper removed it): the placement policy picks the "
                         "bookies each fragment is copied to")
    delete_cookie = body.get("delete_cookie", False)
    if not isinstance(delete_cookie, bool):
        raise ValueError(f"delete_cookie is true or false, not {delete_cookie!r}")
    return [bookie_id(source, "bookie_src") for source in sources], delete_cookie


def recover(admin: BookKeeperAdmin, bookies: list[str], delete_cookie: bool) -> None:
    """The background job: recover, and raise saying what was not recovered."""
    report = admin.recover_bookie_data(bookies, delete_cookies=delete_cookie)
    if report.failed:
        raise BKReplicationException(f"not everything was recovered (the cookies are kept): {report.summary(False)}")


class RecoveryBookieService(ClusterService):
    METHODS = ("PUT",)

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        if not request.body.strip():
            raise RequestRefused("No request body provide.", NOT_FOUND)
        try:
            bookies, delete_cookie = recovery_request(request.json_body())
        except (RequestRefused, ValueError) as exc:  # a body that is not JSON, or not the one this route takes
            raise RequestRefused(f"ERROR parameters: {exc}", NOT_FOUND) from None
        admin = self.cluster.admin()
        self.cluster.run_in_background(f"recovery of bookie(s) {', '.join(bookies)}",
                                       lambda: recover(admin, bookies, delete_cookie))
        return HttpServiceResponse.text("Success send recovery request command.")
