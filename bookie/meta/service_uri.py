"""``metadataServiceUri``: ``zk://zk1:2181;zk2:2181;zk3:2181/ledgers`` (also ``zk+hierarchical://``,
``zk+longhierarchical://``, ``zk+flat://``), as in BookKeeper's configuration.

The servers are separated by ``;`` (BookKeeper's documented form) or ``,`` (a ZooKeeper connect string's);
each is ``host:port``. The path is the ledgers root, at any depth (``/ledgers``, ``/chroot/ledgers``): as in
BookKeeper (ZKMetadataDriverBase), every znode path starts with it, and no ZooKeeper chroot is involved.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from bookie.exceptions import ConfigurationException

LAYOUTS = {"": None, "hierarchical": "hierarchical", "longhierarchical": "longhierarchical", "flat": "flat"}
ALLOWED = ("zk://host:port[;host:port...]/ledgers (servers separated by ';' or ','; the path may go deeper, "
           "e.g. /chroot/ledgers; schemes zk+hierarchical://, zk+longhierarchical://, zk+flat:// choose a layout)")
SERVER_ALLOWED = "host:port, the host a name or an IPv4 address, or an IPv6 address in brackets, the port 1-65535"
HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?")
IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?\]")


def parse_server(server: str) -> str:
    """``host:port`` checked, or ConfigurationException naming what a server may be."""
    host, colon, port = server.strip().rpartition(":")
    if not colon or not (HOST_NAME.fullmatch(host) or IPV6.fullmatch(host)):
        raise ConfigurationException(f"metadataServiceUri server {server!r} is not {SERVER_ALLOWED}; "
                                     f"expected {ALLOWED}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationException(f"metadataServiceUri server {server!r}: port {port!r} is not 1-65535; "
                                     f"expected {ALLOWED}")
    return f"{host}:{int(port)}"


def parse_root(uri: str, path: str) -> str:
    """The ledgers root: an absolute path of one or more names (a trailing ``/`` dropped)."""
    parts = path.strip("/").split("/")
    if not path.strip("/") or any(part in ("", ".", "..") for part in parts):
        raise ConfigurationException(f"metadataServiceUri {uri!r}: root path {path!r} must be /name[/name...], "
                                     f"e.g. /ledgers or /chroot/ledgers; expected {ALLOWED}")
    return "/" + "/".join(parts)


@dataclass(frozen=True)
class MetadataServiceUri:
    hosts: str  # "h1:p1,h2:p2": the ZooKeeper connect string kazoo takes
    root: str  # "/ledgers", "/chroot/ledgers"
    layout: str | None  # None: whatever the cluster's LAYOUT says (hierarchical for a new cluster)

    @classmethod
    def parse(cls, uri: str) -> "MetadataServiceUri":
        if not uri or "://" not in uri:
            raise ConfigurationException(f"metadataServiceUri {uri!r} is not a URI; expected {ALLOWED}")
        scheme, rest = uri.split("://", 1)
        backend, _, layout = scheme.partition("+")
        if backend != "zk" or layout not in LAYOUTS:
            raise ConfigurationException(f"metadataServiceUri scheme {scheme!r} is not supported; expected {ALLOWED}")
        hosts, slash, path = rest.partition("/")
        if not hosts or not slash or not path.strip("/"):
            raise ConfigurationException(f"metadataServiceUri {uri!r} needs servers and a root path; "
                                         f"expected {ALLOWED}")
        servers = re.split(r"[;,]", hosts)
        if any(not s.strip() for s in servers):
            raise ConfigurationException(f"metadataServiceUri {uri!r} has an empty server between separators; "
                                         f"expected {ALLOWED}")
        return cls(",".join(parse_server(s) for s in servers), parse_root(uri, "/" + path), LAYOUTS[layout])

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(self.hosts.split(","))

    def __str__(self) -> str:
        scheme = "zk" if self.layout is None else f"zk+{self.layout}"
        return f"{scheme}://{';'.join(self.servers)}{self.root}"
