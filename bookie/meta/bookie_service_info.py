"""What a bookie offers, as it registers it in ZooKeeper (BookKeeper's BookieServiceInfo).

A registration znode (``<root>/available[/readonly]/<bookieId>``) holds a ``BookieServiceInfoFormat``:
endpoints (id, host, port, protocol) and properties. BookKeeper's bookies register their native
protocol as protocol ``bookie-rpc``; this project's bookies also register ``grpc``, at the same
advertised host, and ``http`` when they serve the HTTP admin API (httpServerEnabled). A client picks
the transport a bookie offers from here, and connects to the endpoint registered for it
(DefaultBookieAddressResolver), naming the bookie id it expects there (``BOOKIE_ID_KEY``): a
registration that points at another bookie's endpoint fails that bookie.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bookie.proto.data_formats_pb2 import BookieServiceInfoFormat

BOOKIE_RPC = "bookie-rpc"  # BookKeeper's native protocol (endpoint id "bookie"), as 4.17 bookies register it
GRPC = "grpc"
HTTP = "http"  # the HTTP admin server (endpoint id "httpserver"), as BookKeeper's HttpService.publishInfo lists it
# The bookie a request is meant for: gRPC metadata on every call, and a ``requestContext`` pair (BookKeeper's
# v3 field for MDC pairs, which Java bookies ignore or log) when a native connection opens.
BOOKIE_ID_KEY = "bk-bookie-id"


@dataclass(frozen=True)
class Endpoint:
    id: str
    host: str
    port: int
    protocol: str
    auth: tuple[str, ...] = ()  # BookKeeper's auth and extensions lists (this project's bookies register none)
    extensions: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class BookieServiceInfo:
    endpoints: tuple[Endpoint, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)

    def endpoint(self, protocol: str) -> Endpoint | None:
        """The first endpoint speaking ``protocol`` (None if the bookie offers none)."""
        return next((e for e in self.endpoints if e.protocol == protocol), None)

    def native_address(self, bookie_id: str) -> str:
        """Where BookKeeper's protocol reaches the bookie: its ``bookie-rpc`` endpoint, or, for a bookie that
        lists none (older bookies register no endpoints), its id read as host:port (BookieSocketAddress's
        legacy resolution)."""
        endpoint = self.endpoint(BOOKIE_RPC)
        return endpoint.address if endpoint is not None else bookie_id

    def encode(self) -> bytes:
        info = BookieServiceInfoFormat()
        for e in self.endpoints:
            info.endpoints.add(id=e.id, host=e.host, port=e.port, protocol=e.protocol, auth=e.auth,
                               extensions=e.extensions)
        for key, value in self.properties.items():
            info.properties[key] = value
        return info.SerializeToString()

    @classmethod
    def decode(cls, data: bytes) -> "BookieServiceInfo":
        """A registration's data; empty data (older bookies register none) is a bookie with no
        endpoints listed, reached on its bookie id with the native protocol."""
        info = BookieServiceInfoFormat()
        info.ParseFromString(data)
        return cls(tuple(Endpoint(e.id, e.host, e.port, e.protocol, tuple(e.auth), tuple(e.extensions))
                         for e in info.endpoints),
                   dict(info.properties))


def bookie_address(info: BookieServiceInfo | None, bookie_id: str) -> str:
    """host:port where BookKeeper's protocol reaches ``bookie_id`` by what it registered (``info``, from
    ``bookie_service_info``; DefaultBookieAddressResolver): its ``bookie-rpc`` endpoint, or its id read as
    host:port when it is not registered (``info`` None) or lists no endpoint."""
    return info.native_address(bookie_id) if info is not None else bookie_id
