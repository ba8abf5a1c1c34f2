"""GET/PUT /api/v1/config/server_config (BookKeeper's ConfigurationService).

GET: every key of the configuration with its value as text (AbstractConfiguration.asJson writes each value's
toString), the keys it does not know included; the value of any key that names a secret (password, passwd, secret,
digest) is masked. PUT: a JSON map of keys to values, set through the configuration's own parsing and checks, all
or none: an unknown key or a bad value is refused (400) naming the key and what it takes. As in BookKeeper, a new
value changes the configuration object; what the bookie has already built from it (threads, sizes, ports) keeps
the value it was built with.
"""
from __future__ import annotations

import difflib

from bookie.exceptions import ConfigurationException
from bookie.http.http_service import (NOT_FOUND, HttpEndpointService, HttpServiceRequest, HttpServiceResponse,
                                      RequestRefused)
from bookie.server.conf import ALIASES, OPTIONS, ServerConfiguration

SECRET_WORDS = ("password", "passwd", "secret", "digest")
MASK = "******"
NO_BODY = "Request body not found. should contains k-v pairs"


def is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def as_text(value) -> str:
    """A value as BookKeeper's configuration writes it: booleans in lower case, lists comma separated."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _doc(key: str) -> str:
    return OPTIONS[ALIASES.get(key, key)].doc


class ConfigurationService(HttpEndpointService):
    METHODS = ("GET", "PUT")
    WRONG_METHOD = NO_BODY
    BLOCKING = False  # the configuration in memory

    def __init__(self, conf: ServerConfiguration):
        self.conf = conf

    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        if request.method == "GET":
            values = {**self.conf.unknown, **dict(self.conf)}
            return HttpServiceResponse.json({key: MASK if is_secret(key) else as_text(value)
                                             for key, value in sorted(values.items())})
        changes = request.json_object('a map of configuration keys to values, e.g. {"gcWaitTime": 60000}',
                                      empty=RequestRefused(NO_BODY, NOT_FOUND))
        checked = ServerConfiguration()  # every value parsed and checked before any is set
        for key, value in changes.items():
            if ALIASES.get(key, key) not in OPTIONS:
                close = difflib.get_close_matches(key, OPTIONS, 1, 0.8)
                raise RequestRefused(f"unknown configuration key {key}"
                                     + (f" (did you mean {close[0]}?)" if close else "")
                                     + ": the keys are those GET /api/v1/config/server_config lists")
            if value is None or isinstance(value, dict):
                raise RequestRefused(f"{key}: a value is a string, number, boolean or list, not "
                                     f"{'null' if value is None else 'an object'} ({_doc(key)})")
            try:
                checked.set(key, value)
            except ConfigurationException as exc:  # names the key, the value and what the key takes
                raise RequestRefused(f"{key}: the value is not valid ({_doc(key)})" if is_secret(key)
                                     else str(exc)) from None
        for key, value in changes.items():
            self.conf.set(key, value)
        return HttpServiceResponse.text("Success set server config.")
