"""What every HTTP endpoint service takes and gives (BookKeeper's HttpServiceRequest, HttpServiceResponse and
HttpEndpointService), apart from the web server that carries them, and what every service does around its own
work, which BookKeeper's services each repeat:

- a method the service does not take is answered with the service's own BookKeeper message (by default 404
  ``Not found method. Should be GET method``, naming those it takes);
- its work, which waits on disk, ZooKeeper or bookies, runs on a worker thread, never on the event loop that
  also serves the bookie's requests;
- a request it refuses (RequestRefused: bad parameters, a missing body, a bookie not started) is answered with
  the refusal's code and message; the parameters and bodies are read here, each refused naming what was wrong
  and what is allowed.

Anything else a service raises (ZooKeeper down, a bookie failing) goes to the server, which answers 500, as
BookKeeper's server does for what its services throw.
"""
from __future__ import annotations

import abc
import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from bookie.client.bookkeeper import as_ledger_id
from bookie.exceptions import BKIncorrectParameterException
from bookie.ledger_id import LedgerId
from bookie.server.conf import OPTIONS

log = logging.getLogger(__name__)

# HttpServer.StatusCode: the codes BookKeeper's services answer with.
OK = 200
BAD_REQUEST = 400
FORBIDDEN = 403
NOT_FOUND = 404
METHOD_NOT_ALLOWED = 405
INTERNAL_ERROR = 500
SERVICE_UNAVAILABLE = 503

HTTP_METHODS = ("GET", "PUT", "POST", "DELETE")  # HttpServer.Method: what VertxHttpServer binds each route to
# DeleteLedgerService's answer to a request without a ledger (the ledger services all give it).
NO_LEDGER_ID = "Not ledger found. Should provide ledger_id=<id>"
_INTEGER = re.compile(r"[+-]?[0-9]+")  # Long.parseLong's form


class RequestRefused(Exception):
    """A request a service will not carry out, raised rather than returned: answered ``code`` (400 unless said
    otherwise) with the message, and logged as a refusal, not as a failure."""

    def __init__(self, message: str, code: int = BAD_REQUEST):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class HttpServiceRequest:
    """A request as a service sees it: the method (``GET``, ``PUT``, ``POST``, ``DELETE``), the query
    parameters (the last value of a repeated one, as BookKeeper's servers give them) and the raw body."""
    method: str
    params: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    # -- query parameters ----------------------------------------------------------------------------------
    def ledger_param(self, name: str = "ledger_id") -> LedgerId | None:
        """The ledger the parameter names (BookKeeper's decimal id, or a 128-bit id as 32 hex digits); None
        when it is absent."""
        text = self.params.get(name)
        if text is None:
            return None
        try:
            return as_ledger_id(text.strip())
        except (BKIncorrectParameterException, ValueError):
            raise RequestRefused(f"{name}={text!r}: a ledger id is a decimal number from 0 to 2^63-1 (or a "
                                 "128-bit id as 32 hex digits)") from None

    def required_ledger(self) -> LedgerId:
        """The ``ledger_id`` parameter; refused 404 (BookKeeper's answer) when it is absent."""
        ledger = self.ledger_param()
        if ledger is None:
            raise RequestRefused(NO_LEDGER_ID, NOT_FOUND)
        return ledger

    def int_param(self, name: str, default: int) -> int:
        """An integer parameter (``default`` when absent)."""
        text = self.params.get(name)
        if text is None:
            return default
        if not _INTEGER.fullmatch(text.strip()):
            raise RequestRefused(f"{name}={text!r} is not an integer")
        return int(text)

    def bool_param(self, name: str, default: bool = False) -> bool:
        """A parameter that is ``true`` or ``false`` (any case); ``default`` when absent."""
        text = self.params.get(name)
        return default if text is None else _boolean(text, f"{name}={text!r}: give {name}=true or {name}=false")

    def flag_param(self, name: str) -> bool:
        """A parameter that asks for something by being there (``?name`` or ``?name=true``; BookKeeper looks at
        its presence only); ``name=false`` does not ask."""
        if self.params.get(name, "false").strip() == "":
            return True
        return self.bool_param(name)

    # -- bodies ----------------------------------------------------------------------------------------------
    def json_body(self) -> Any:
        """The body parsed as JSON; refused (400) naming the problem when it is not JSON."""
        try:
            return json.loads(self.body or b"null")
        except ValueError as e:
            raise RequestRefused(f"the request body is not JSON: {e}") from None

    def json_object(self, expected: str | None = None, empty: RequestRefused | None = None) -> dict[str, Any]:
        """The body as a JSON object (a map of keys). An empty body is refused with ``empty`` (BookKeeper's
        answer to a null body, where the route has one), any other body that is not a JSON object 400, naming
        ``expected`` (what the route takes, e.g. '{"readOnly": true}') when given."""
        if not self.body.strip():
            raise empty or RequestRefused(f"the request body is empty: expected {expected or 'a JSON object'}")
        value = self.json_body()
        if not isinstance(value, dict):
            shape = f"an object: expected {expected}" if expected else "a JSON object ({...})"
            raise RequestRefused(f"the request body is JSON {type(value).__name__}, not {shape}")
        return value


def _boolean(value: Any, refusal: str) -> bool:
    """``value`` as a boolean: JSON true/false, or the strings "true"/"false" in any case (Boolean.parseBoolean's
    spellings, which BookKeeper's services accept); refused (400) with ``refusal`` when it is neither."""
    if isinstance(value, bool):
        return value
    parsed = {"true": True, "false": False}.get(value.strip().lower()) if isinstance(value, str) else None
    if parsed is None:
        raise RequestRefused(refusal)
    return parsed


def bool_field(values: Mapping[str, Any], key: str, default: bool | None = None) -> bool | None:
    """``values[key]`` (a field of a JSON body) as a boolean; ``default`` when absent; refused (400) when it
    is not true or false."""
    value = values.get(key)
    return default if value is None else _boolean(value, f"{key}={json.dumps(value)} is not valid: expected true "
                                                          "or false")


def bookie_id(value: Any, name: str) -> str:
    """``value`` as a bookie id (BookieId.parse's rules: the ``bookieId`` option's parser); ValueError naming
    ``name`` otherwise (each route words its own refusal of it)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} is a bookie id (\"host:port\", or a custom bookieId), not {value!r}")
    try:
        return OPTIONS["bookieId"].parse(value)
    except ValueError as exc:
        raise ValueError(f"{name} {value!r}: {exc}") from None


@dataclass(frozen=True)
class HttpServiceResponse:
    """What a service answers: a status code and a body (JSON text, or plain text for messages)."""
    code: int = OK
    body: str = ""
    content_type: str = "application/json"

    @classmethod
    def json(cls, value: Any, code: int = OK) -> "HttpServiceResponse":
        """A JSON body as BookKeeper's JsonUtil writes it (pretty-printed)."""
        return cls(code, json.dumps(value, indent=2, default=str))

    @classmethod
    def text(cls, message: str, code: int = OK) -> "HttpServiceResponse":
        return cls(code, message, "text/plain")


class HttpEndpointService(abc.ABC):
    """One route's service. It takes the methods in METHODS; another is answered WRONG_METHOD_CODE with
    WRONG_METHOD, the service's BookKeeper message (``{method}`` stands for the method asked; empty: "Not found
    method. Should be GET or PUT method", naming METHODS). ``serve`` answers the others: on a worker thread, or,
    where it never blocks (BLOCKING False), on the event loop itself, so that a probe answers even while every
    worker thread waits on ZooKeeper."""
    METHODS: tuple[str, ...] = ("GET",)
    WRONG_METHOD = ""
    WRONG_METHOD_CODE = NOT_FOUND
    BLOCKING = True

    async def handle(self, request: HttpServiceRequest) -> HttpServiceResponse:
        if request.method not in self.METHODS:
            message = self.WRONG_METHOD or f"Not found method. Should be {' or '.join(self.METHODS)} method"
            return HttpServiceResponse.text(message.format(method=request.method), self.WRONG_METHOD_CODE)
        try:
            return await self.answer(request)
        except RequestRefused as refused:
            log.info("%s refused a %s request (%d): %s", type(self).__name__, request.method, refused.code,
                     refused)
            return HttpServiceResponse.text(str(refused), refused.code)

    async def answer(self, request: HttpServiceRequest) -> HttpServiceResponse:
        """``serve``, where BLOCKING says; a service that must wait on the loop first (a lock) extends this."""
        if self.BLOCKING:
            return await asyncio.to_thread(self.serve, request)
        return self.serve(request)

    @abc.abstractmethod
    def serve(self, request: HttpServiceRequest) -> HttpServiceResponse:
        """The answer to ``request`` (its method is one of METHODS)."""
