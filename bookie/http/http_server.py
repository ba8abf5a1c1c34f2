"""The HTTP admin server (BookKeeper's HttpServer, VertxHttpServer) on aiohttp, on the running event loop.

It binds ``httpServerHost:httpServerPort`` (port 0: any free port; ``port`` gives the bound one) and answers every
request through one handler that asks the router for the path's service:
- a path no route has: 404 naming the routes there are;
- GET, PUT, POST and DELETE only (the methods BookKeeper's routes bind): any other method 405;
- a body over ``max_body_bytes`` (1 MiB): 413, before any service sees it;
- a service's refusal (RequestRefused, e.g. bad parameters: 400) is answered by the service itself
  (HttpEndpointService.handle), with its code and message;
- any other error of a service: 500 with the error's message, logged once with its traceback; the server goes on.
Services run on the loop and put their blocking work in threads (HttpEndpointService), so the bookie's requests,
also served by this loop, are never held by an admin request.
"""
from __future__ import annotations

import asyncio
import logging
import os

from aiohttp import web

from bookie.http.http_router import HttpRouter
from bookie.http.http_service import (HTTP_METHODS, INTERNAL_ERROR, METHOD_NOT_ALLOWED, HttpServiceRequest,
                                      HttpServiceResponse)
from bookie.meta.bookie_service_info import HTTP, Endpoint

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # an admin request is a small JSON map; anything larger is refused (413)
ENDPOINT_ID = "httpserver"  # HttpService.publishInfo's endpoint id
WILDCARD = "0.0.0.0"
PAYLOAD_TOO_LARGE = 413


class HttpServer:
    def __init__(self, router: HttpRouter, host: str, port: int, max_body_bytes: int = MAX_BODY_BYTES):
        self.router = router
        self.host = host
        self.requested_port = port
        self.max_body_bytes = max_body_bytes
        self.port = 0  # the bound port, once started
        self._runner: web.AppRunner | None = None

    async def start(self) -> "HttpServer":
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_route("*", "/{path:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.requested_port).start()
        except OSError as exc:
            await runner.cleanup()
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)  # "address already in use"
            raise OSError(exc.errno, f"cannot listen on {self.host}:{self.requested_port} (httpServerHost, "
                                     f"httpServerPort): {reason}") from None
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("HTTP admin server listening on %s", self.address)
        return self

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def endpoints(self, advertised_host: str) -> tuple[Endpoint, ...]:
        """What the registration lists for it (HttpService.publishInfo): the bound port at the host it binds, or
        at the bookie's advertised host when it binds every interface."""
        host = advertised_host if self.host in (WILDCARD, "") else self.host
        return (Endpoint(ENDPOINT_ID, host, self.port, HTTP),)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await asyncio.to_thread(self.router.close)  # the services' ZooKeeper sessions and clients
        log.info("HTTP admin server stopped")

    async def _handle(self, request: web.Request) -> web.Response:
        path = request.path
        if request.method not in HTTP_METHODS:
            return _response(HttpServiceResponse.text(
                f"method {request.method} is not allowed on {path}: the routes take {', '.join(HTTP_METHODS)}",
                METHOD_NOT_ALLOWED))
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _response(HttpServiceResponse.text(
                f"the request body is larger than {self.max_body_bytes} bytes, the most this server takes",
                PAYLOAD_TOO_LARGE))
        # The last value of a repeated parameter, as BookKeeper's servers give them.
        service_request = HttpServiceRequest(request.method, dict(request.query.items()), body)
        try:
            answer = await self.router.handle(path, service_request)
        except Exception as exc:  # a failing service answers 500; the server goes on
            log.error("HTTP %s %s failed", request.method, path, exc_info=exc)
            answer = HttpServiceResponse.text(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
                                              INTERNAL_ERROR)
        return _response(answer)


def _response(answer: HttpServiceResponse) -> web.Response:
    # The content type goes in as a header: aiohttp's content_type= takes no parameters (version=, charset=).
    content_type = answer.content_type
    if "charset" not in content_type:
        content_type += "; charset=utf-8"
    return web.Response(status=answer.code, body=answer.body.encode(), headers={"Content-Type": content_type})
