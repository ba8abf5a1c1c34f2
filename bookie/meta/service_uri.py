"""``metadataServiceUri``: ``zk://host:port[,host:port]/ledgers`` (also ``zk+hierarchical://``,
``zk+longhierarchical://``, ``zk+flat://``), as in BookKeeper's configuration."""
from __future__ import annotations

from dataclasses import dataclass

from bookie.exceptions import ConfigurationException

LAYOUTS = {"": None, "hierarchical": "hierarchical", "longhierarchical": "longhierarchical", "flat": "flat"}


@dataclass(frozen=True)
class MetadataServiceUri:
    hosts: str  # "h1:p1,h2:p2"
    root: str  # "/ledgers"
    layout: str | None  # None: whatever the cluster's LAYOUT says (hierarchical for a new cluster)

    @classmethod
    def parse(cls, uri: str) -> "MetadataServiceUri":
        allowed = "zk://host:port[,host:port]/ledgers (or zk+hierarchical://, zk+longhierarchical://, zk+flat://)"
        if not uri or "://" not in uri:
            raise ConfigurationException(f"metadataServiceUri {uri!r} is not a URI; expected {allowed}")
        scheme, rest = uri.split("://", 1)
        backend, _, layout = scheme.partition("+")
        if backend != "zk" or layout not in LAYOUTS:
            raise ConfigurationException(f"metadataServiceUri scheme {scheme!r} is not supported; expected {allowed}")
        hosts, slash, path = rest.partition("/")
        if not hosts or not slash or not path.strip("/"):
            raise ConfigurationException(f"metadataServiceUri {uri!r} needs hosts and a root path; expected {allowed}")
        for host in hosts.split(","):
            name, colon, port = host.rpartition(":")
            if not colon or not name or not port.isdigit():
                raise ConfigurationException(f"metadataServiceUri host {host!r} is not host:port; expected {allowed}")
        return cls(hosts.replace(";", ","), "/" + path.strip("/"), LAYOUTS[layout])

    def __str__(self) -> str:
        scheme = "zk" if self.layout is None else f"zk+{self.layout}"
        return f"{scheme}://{self.hosts}{self.root}"
