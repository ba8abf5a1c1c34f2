"""Bookie configuration: BookKeeper's ``bk_server.conf`` keys, types and defaults (ServerConfiguration).

A configuration is a Java-properties file. Keys keep BookKeeper's names so an operator's file works as
it is; unknown keys are warned about (and kept), a bad value is refused with a message naming the key.
Every key is an ``Option`` in ``OPTIONS`` with its kind and one line of meaning (docs/reference/).

The bookie's address (``resolve_bookie_address``, BookieImpl.getBookieAddress): advertisedAddress, else
listeningInterface's IPv4 address (asked of the kernel, SIOCGIFADDR) or this host's, or its canonical name
under useHostNameAsBookieID. A ``BookieAddress`` holds what both ports bind, the host the bookie id
(``bookie_id``, getBookieId) and the registration carry, and its IP; a configuration resolves it once, so
the cookie and the registration agree. ``check_address`` refuses a loopback address unless allowLoopback,
at the server's start.
"""
from __future__ import annotations

import difflib
import fcntl
import ipaddress
import logging
import os
import re
import socket
import struct
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import jproperties

from bookie.exceptions import ConfigurationException

log = logging.getLogger(__name__)


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError("expected true or false")


def _parse_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# BookieId.validateBookieId's pattern, as written there (":-_" is a range: ':' to '_').
_BOOKIE_ID = re.compile(r"[a-zA-Z0-9:-_.\-]+")


def _parse_bookie_id(text: str) -> str:
    text = text.strip()
    if text and (not _BOOKIE_ID.fullmatch(text) or text.lower() == "readonly"):
        raise ValueError("a bookie id is letters, digits and the characters :;<=>?@[\\]^_.- (BookieId), and not "
                         "'readonly'")
    return text


@dataclass(frozen=True)
class Option:
    """One key: how its text is parsed, its default, one line of meaning (docs/reference/ renders them), the
    kind of value it takes (int, float, bool, str, list, bookieid), its lowest value where it has one, and
    BookKeeper's default where it differs from this one (ServerConfiguration, 4.17)."""
    parse: Callable[[str], Any]
    default: Any
    doc: str
    minimum: float | None = None
    kind: str = "str"
    bookkeeper_default: str | None = None


def _o(kind, default, doc, minimum=None, bookkeeper_default: str | None = None) -> Option:
    parse = {"int": int, "float": float, "bool": _parse_bool, "str": str, "list": _parse_list,
             "bookieid": _parse_bookie_id}[kind]
    return Option(parse, default, doc, minimum, kind, bookkeeper_default)


OPTIONS: dict[str, Option] = {
    # Server
    "bookiePort": _o("int", 3181, "port of BookKeeper's native protocol; the bookie address's port", 0),
    "grpcPort": _o("int", 4181, "this project's key: port of the gRPC service, beside bookiePort (same address)", 0),
    # Where the bookie listens, and what its id and registration carry (BookieImpl.getBookieAddress).
    "listeningInterface": _o("str", "", "network interface to listen on, e.g. eth0: both ports bind its IPv4 "
                             "address, which (without advertisedAddress) is the bookie's address; unset: listen "
                             "on every interface (0.0.0.0) and take the address this host's name resolves to"),
    "advertisedAddress": _o("str", "", "address or host name the bookie id and the registration carry; takes "
                            "precedence over listeningInterface and useHostNameAsBookieID (and is not checked "
                            "against allowLoopback)"),
    "useHostNameAsBookieID": _o("bool", False, "the bookie's address is the canonical host name of its IP "
                                "address instead of the IP address"),
    "useShortHostName": _o("bool", False, "with useHostNameAsBookieID: the host name up to its first dot"),
    "allowLoopback": _o("bool", False, "allow a loopback address (127.x, ::1) as the bookie's address; refused "
                        "by default: on a machine whose name resolves to 127.0.0.1 every bookie would be "
                        "127.0.0.1:<port> to every client"),
    "bookieId": _o("bookieid", "", "custom bookie id (BP-41), e.g. bookie-1: its name in ledger metadata, cookies "
                   "and the registration, whose endpoints say where it listens; default: the bookie address "
                   "(host:bookiePort)"),
    "metadataServiceUri": _o("str", "", "zk://host:port/ledgers (servers separated by ';'); unset: made from "
                             "zkServers and zkLedgersRootPath"),
    "zkServers": _o("str", "", "BookKeeper's older way to name ZooKeeper: host:port,host:port; used with "
                    "zkLedgersRootPath when metadataServiceUri is unset"),
    "zkLedgersRootPath": _o("str", "/ledgers", "with zkServers: the ledgers' root znode"),
    "zkTimeout": _o("int", 10000, "ZooKeeper session timeout, ms", 1),
    "allowStorageExpansion": _o("bool", False, "allow adding ledger dirs to an existing bookie"),
    # Journal
    "journalDirectories": _o("list", [], "journal directories (entries go to journal ledgerId mod n); required "
                             "(with journalDirectory)", bookkeeper_default="journalDirectory"),
    "journalDirectory": _o("str", "", "legacy single journal directory", bookkeeper_default="/tmp/bk-txn"),
    "journalMaxSizeMB": _o("int", 2048, "roll a journal file at this size", 1),
    "journalMaxBackups": _o("int", 5, "journal files older than LastLogMark kept", 0),
    "journalPreAllocSizeMB": _o("int", 16, "journal preallocation step", 0),
    "journalAlignmentSize": _o("int", 512, "each journal flush is padded to this", 512),
    "journalMaxGroupWaitMSec": _o("float", 2.0, "longest wait to group adds into one fsync", 0),
    "journalBufferedWritesThreshold": _o("int", 524288, "flush once this many bytes are queued", 1),
    "journalBufferedEntriesThreshold": _o("int", 0, "flush once this many entries are queued (0 = off)", 0),
    "journalFlushWhenQueueEmpty": _o("bool", False, "flush as soon as the journal queue is empty"),
    "journalSyncData": _o("bool", True, "fsync each journal flush before acknowledging"),
    "journalQueueSize": _o("int", 10000, "journal queue capacity, in requests", 1),
    "journalRemoveFromPageCache": _o("bool", True, "drop journal pages from the page cache once fsynced "
                                      "(replay is the only reader)"),
    "skipReplayJournalInvalidRecord": _o("bool", False, "replay the verified journal groups after a corrupt one "
                                         "instead of refusing to start (the corrupt group's entries are lost here)"),
    # Ledger storage
    "ledgerDirectories": _o("list", [], "ledger (entry log) directories; required",
                            bookkeeper_default="/tmp/bk-data"),
    "indexDirectories": _o("list", [], "index directories; default = ledgerDirectories"),
    "entryLogSizeLimit": _o("int", 1073741824, "roll an entry log at this size (BK: logSizeLimit)", 4096),
    "writeBufferSizeBytes": _o("int", 1048576, "entry log write buffer", 4096, bookkeeper_default="65536"),
    "flushInterval": _o("int", 10000, "sync thread checkpoint interval, ms", 1),
    "flushEntrylogBytes": _o("int", 1048576, "start writing an entry log to disk every this many bytes, so a "
                             "checkpoint's fsync finds little left and the journal's fsyncs do not queue behind "
                             "it (0 = at checkpoints and rolls only)", 0, bookkeeper_default="0"),
    "entryLogRemoveFromPageCache": _o("bool", True, "this project's key: drop entry-log pages from the page "
                                      "cache once written to disk (each flushEntrylogBytes step, and rotated "
                                      "logs at the checkpoint), so writes reuse pages instead of growing the "
                                      "cache; older entries are then read from disk. BookKeeper's nearest is "
                                      "dbStorage_directIOEntryLogger, which bypasses the cache altogether"),
    "entryLogReadAheadBytes": _o("int", 4194304, "this project's key: after a range read of an entry log, "
                                 "ask the kernel to read this many bytes after it into the page cache "
                                 "(POSIX_FADV_WILLNEED), as DbLedgerStorage's read-ahead cache "
                                 "(dbStorage_readAheadCacheBatchSize) reads the entries after a miss; 0 = off", 0),
    "pageSize": _o("int", 8192, "index page size in bytes (1024 entries)", 64),
    "pageLimit": _o("int", -1, "index pages held in the ledger cache (-1 = 1/3 of 1 GiB of pages)"),
    "openFileLimit": _o("int", 20000, "index files kept open", 1),
    # Disks and read-only mode
    "diskUsageThreshold": _o("float", 0.95, "a ledger dir above this usage is full"),
    "diskUsageWarnThreshold": _o("float", 0.90, "warn above this usage"),
    "diskUsageLwmThreshold": _o("float", -1.0, "writable again below this (default = diskUsageThreshold)"),
    "diskCheckInterval": _o("int", 10000, "disk check interval, ms", 1),
    "readOnlyModeEnabled": _o("bool", True, "go read-only (not down) when disks are full"),
    "forceReadOnlyBookie": _o("bool", False, "start read-only"),
    # Request limits
    "maxPendingAddRequestsPerThread": _o("int", 10000, "queued adds before ETOOMANYREQUESTS", 1),
    "nettyMaxFrameSizeBytes": _o("int", 5242880, "largest request", 1024),
    "byteBufAllocatorSizeMax": _o("int", 1048576, "most bytes one read of a native-protocol connection takes (Netty's "
                                  "AdaptiveRecvByteBufAllocator maximum): a client's batch of adds arrives in few "
                                  "reads, each one journal record", 4096),
    # GC and compaction
    "gcWaitTime": _o("int", 600000, "GC interval, ms", 1),
    "minorCompactionThreshold": _o("float", 0.2, "minor compaction usage threshold"),
    "minorCompactionInterval": _o("int", 3600, "minor compaction interval, s"),
    "majorCompactionThreshold": _o("float", 0.8, "major compaction usage threshold"),
    "majorCompactionInterval": _o("int", 86400, "major compaction interval, s"),
    "verifyMetadataOnGC": _o("bool", False, "re-read a ledger's metadata before GC deletes it; delete only on "
                             "'no such ledger'"),
    "gcOverreplicatedLedgerWaitTime": _o("int", 86400000, "interval of the over-replicated ledger check, ms "
                                         "(CLOSED ledgers whose ensembles never include this bookie); 0 turns the check off", 0),
    "isForceGCAllowWhenNoSpace": _o("bool", False, "disks full: force GC and compaction every gcWaitTime "
                                    "(false: compaction is suspended until space comes back)"),
    "gcMetadataOpRateLimit": _o("int", 1000, "metadata reads per second GC makes (verify and over-replication "
                                "checks)", 1),
    # Compaction throttle (AbstractLogCompactor.Throttler): entries/s, or bytes/s with isThrottleByBytes
    "compactionRateByEntries": _o("int", 1000, "entries copied per second by compaction", 1),
    "compactionRateByBytes": _o("int", 1000000, "bytes copied per second by compaction (isThrottleByBytes)", 1),
    "isThrottleByBytes": _o("bool", False, "throttle compaction by bytes instead of entries"),
    # AutoRecovery
    "autoRecoveryDaemonEnabled": _o("bool", False, "run the auditor and replication worker in the bookie"),
    "openLedgerRereplicationGracePeriod": _o("int", 30000, "ms before an open ledger is fenced for rereplication"),
    "lostBookieRecoveryDelay": _o("int", 0, "seconds before a lost bookie's ledgers are re-replicated", 0),
    "rereplicationEntryBatchSize": _o("int", 10, "entries a replication worker reads and writes at a time (this "
                                      "project reads them with one range read)", 1),
    "lockReleaseOfFailedLedgerGracePeriod": _o("int", 300000, "ms: longest backoff before a replication worker "
                                               "releases a ledger it failed to re-replicate", 0),
    "rwRereplicateBackoffMs": _o("int", 5000, "ms a replication worker waits after an unexpected error", 0),
    "auditorPeriodicBookieCheckInterval": _o("int", 86400, "seconds between the auditor's audits of lost bookies "
                                             "(0: off)", 0),
    "auditorPeriodicCheckInterval": _o("int", 604800, "seconds between the auditor's checks of every ledger (0: off)", 0),
    "auditorReplicasCheckInterval": _o("int", 0, "seconds between the auditor's comparisons of each bookie's entries "
                                       "with the striping; what it finds is marked (0: off)", 0),
    # HTTP admin server and metrics (BookKeeper's HttpService and PrometheusMetricsProvider)
    "httpServerEnabled": _o("bool", False, "serve BookKeeper's HTTP admin API and /metrics (bookie/http)"),
    "httpServerPort": _o("int", 8080, "port of the HTTP admin server (0: any free port, printed at start)", 0),
    "httpServerHost": _o("str", "0.0.0.0", "address the HTTP admin server binds"),
    "enableStatistics": _o("bool", True, "record metrics (/metrics); false: nothing is recorded"),
    "prometheusStatsLatencyRolloverSeconds": _o("int", 60, "seconds over which /metrics' latency quantiles are "
                                                "computed before they start again", 1),
}

# BookKeeper settings this bookie cannot honour: the value it does honour, and what it does instead.
UNSUPPORTED = {
    "ledgerStorageClass": ("InterleavedLedgerStorage",
                           "this bookie stores ledgers as InterleavedLedgerStorage does (entry logs and .idx index "
                           "files); DbLedgerStorage (RocksDB) and SortedLedgerStorage are not implemented"),
}

# Other spellings of a key: BookKeeper's own key where ours differs (ServerConfiguration's ENTRY_LOG_SIZE_LIMIT),
# and the spelling of its setter.
ALIASES = {"logSizeLimit": "entryLogSizeLimit", "verifyMetadataOnGc": "verifyMetadataOnGC"}


class ServerConfiguration(Mapping[str, Any]):
    """Typed, validated configuration keyed by BookKeeper's names: ``conf["journalMaxSizeMB"]``."""

    def __init__(self, values: Mapping[str, Any] | None = None):
        self._values: dict[str, Any] = {key: option.default for key, option in OPTIONS.items()}
        self.unknown: dict[str, str] = {}
        self._address: BookieAddress | None = None  # resolved once: the cookie and the registration must agree
        if values:
            self.update(values)

    @classmethod
    def load(cls, path: str | os.PathLike, overrides: Mapping[str, Any] | None = None) -> "ServerConfiguration":
        conf = cls(read_properties(path))
        if overrides:
            conf.update(overrides)
        return conf

    def update(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            self.set(key, value)

    def set(self, key: str, value: Any) -> None:
        key = ALIASES.get(key, key)
        option = OPTIONS.get(key)
        if option is None:
            self.unknown[key] = value  # said once by notices(), at a server's start, not by every command
            return
        try:
            parsed = option.parse(value) if isinstance(value, str) else _coerce(option, value)
        except (TypeError, ValueError) as exc:
            raise ConfigurationException(f"{key}={value!r} is not valid: {exc} ({option.doc})") from None
        if option.minimum is not None and parsed < option.minimum:
            raise ConfigurationException(f"{key}={value!r} is not valid: must be at least {option.minimum} ({option.doc})")
        self._values[key] = parsed
        if key in ADDRESS_KEYS:
            self._address = None

    def __getitem__(self, key: str) -> Any:
        return self._values[ALIASES.get(key, key)]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    # Derived values, named as BookKeeper's getters.
    def notices(self) -> list[str]:
        """What this configuration asks that is not done, one line each: a BookKeeper setting this bookie cannot
        honour and what it does instead; the keys it does not know (a misspelt one with the key it resembles)."""
        lines = []
        for key, (honoured, instead) in UNSUPPORTED.items():
            value = self.unknown.get(key)
            if value is not None and str(value).rsplit(".", 1)[-1] != honoured:
                lines.append(f"{key}={value} is not supported: {instead}")
        others = [k for k in self.unknown if k not in UNSUPPORTED]
        if others:
            named = [k + (f" (did you mean {close[0]}?)" if (close := difflib.get_close_matches(k, OPTIONS, 1, 0.85))
                          else "") for k in sorted(others)]
            lines.append(f"configuration keys this bookie does not use (kept, no effect): {', '.join(named)}")
        return lines

    @property
    def metadata_service_uri(self) -> str:
        """metadataServiceUri, else the URI zkServers and zkLedgersRootPath make (BookKeeper's
        AbstractConfiguration.getMetadataServiceUri); "" when neither is set."""
        if self["metadataServiceUri"] or not self["zkServers"]:
            return self["metadataServiceUri"]
        servers = ";".join(s.strip() for s in self["zkServers"].split(",") if s.strip())
        return f"zk://{servers}{self['zkLedgersRootPath']}"  # the layout: the cluster's LAYOUT znode

    @property
    def journal_dirs(self) -> list[str]:
        dirs = self["journalDirectories"] or ([self["journalDirectory"]] if self["journalDirectory"] else [])
        if not dirs:
            raise ConfigurationException("journalDirectories is not set: give at least one journal directory")
        return dirs

    @property
    def ledger_dirs(self) -> list[str]:
        if not self["ledgerDirectories"]:
            raise ConfigurationException("ledgerDirectories is not set: give at least one ledger directory")
        return self["ledgerDirectories"]

    @property
    def index_dirs(self) -> list[str]:
        return self["indexDirectories"] or self.ledger_dirs

    @property
    def disk_lwm_threshold(self) -> float:
        lwm = self["diskUsageLwmThreshold"]
        return self["diskUsageThreshold"] if lwm < 0 else lwm

    @property
    def address(self) -> "BookieAddress":
        """Where the bookie listens and what it advertises (resolved on first use, then kept)."""
        if self._address is None:
            self._address = resolve_bookie_address(self)
        return self._address

    @property
    def bookie_address(self) -> str:
        """``host:bookiePort`` as BookieImpl.getBookieAddress gives it (no loopback check: ``check_address``)."""
        return f"{self.address.host}:{self['bookiePort']}"

    @property
    def bookie_id(self) -> str:
        """BookieImpl.getBookieId: ``bookieId`` if set, else the bookie address."""
        return self["bookieId"] or self.bookie_address

    def check_address(self) -> "BookieAddress":
        """The address, refused if it is a loopback one and allowLoopback is false (what BookKeeper's
        getBookieAddress refuses, at the same point: an address derived from the host or listeningInterface,
        never an explicit advertisedAddress)."""
        address = self.address
        if address.loopback and not self["allowLoopback"]:
            source = (f"listeningInterface={self['listeningInterface']}" if self["listeningInterface"]
                      else f"this host's name ({socket.gethostname()}), listeningInterface being unset")
            raise ConfigurationException(
                f"the bookie's address {address.ip} (from {source}) is a loopback address: refused unless "
                f"allowLoopback=true, since every client would take 127.0.0.1:{self['bookiePort']} for a bookie on "
                f"its own machine. Set listeningInterface to a network interface ({', '.join(interface_names())} "
                "here) or advertisedAddress, or allowLoopback=true for a cluster on one machine")
        return address


# The keys BookieImpl.getBookieAddress reads (with bookiePort, which joins the host at the end).
ADDRESS_KEYS = ("listeningInterface", "advertisedAddress", "useHostNameAsBookieID", "useShortHostName")
WILDCARD = "0.0.0.0"  # every IPv4 interface: where a bookie without listeningInterface listens
_SIOCGIFADDR = 0x8915
_IFNAMSIZ = 16


@dataclass(frozen=True)
class BookieAddress:
    """``listen``: the address both ports bind; ``host``: the host the bookie id and the registration carry;
    ``ip``: the IP address ``host`` stands for (None for an advertisedAddress, taken as given)."""

    listen: str
    host: str
    ip: str | None

    @property
    def loopback(self) -> bool:
        return self.ip is not None and ipaddress.ip_address(self.ip).is_loopback


def interface_names() -> list[str]:
    return [name for _, name in socket.if_nameindex()]


def interface_address(name: str) -> str:
    """The IPv4 address of network interface ``name`` (its primary one: the kernel's SIOCGIFADDR). Asked of
    the kernel, not of ``ip`` or DNS: the answer is the address the bookie can bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            if len(name.encode()) >= _IFNAMSIZ:
                raise OSError(19, "name too long")
            answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()))
        except OSError as exc:
            if exc.errno == 99:  # EADDRNOTAVAIL
                raise ConfigurationException(f"listeningInterface={name}: the interface has no IPv4 address") from None
            raise ConfigurationException(f"listeningInterface={name}: no such network interface (this machine has "
                                         f"{', '.join(interface_names())})") from None
    return socket.inet_ntoa(answer[20:24])


def _host_address() -> str:
    """This host's address, as InetAddress.getLocalHost (DNS.cachedHostname): its name resolved, or
    localhost's address when the name does not resolve."""
    for name in (socket.gethostname(), "localhost"):
        try:
            return socket.gethostbyname(name)
        except OSError:
            continue
    return "127.0.0.1"


def _canonical_name(ip: str) -> str:
    """InetAddress.getCanonicalHostName: the address's name by reverse lookup, or the address itself."""
    try:
        return socket.gethostbyaddr(ip)[0]
    except OSError:
        return ip


def resolve_bookie_address(conf: "ServerConfiguration") -> BookieAddress:
    """BookieImpl.getBookieAddress and BookieNettyServer's bind address. advertisedAddress wins; otherwise
    the IPv4 address of listeningInterface (unset: of this host's name), or its canonical host name under
    useHostNameAsBookieID (cut at the first dot under useShortHostName). The ports bind listeningInterface's
    address, or every interface when it is unset. Unlike BookKeeper, whose listeningInterface binds the
    advertised host and names the interface's address by a DNS server's reverse lookup (else this host's
    name), the interface's own address is used: what is bound is what the interface has."""
    iface = conf["listeningInterface"]
    listen = interface_address(iface) if iface else WILDCARD
    advertised = conf["advertisedAddress"].strip()
    if advertised:
        return BookieAddress(listen, advertised, None)
    ip = listen if iface else _host_address()
    host = ip
    if conf["useHostNameAsBookieID"]:
        host = _canonical_name(ip)
        if conf["useShortHostName"]:
            host = host.split(".", 1)[0]
    return BookieAddress(listen, host, ip)


def _coerce(option: Option, value: Any) -> Any:
    if isinstance(option.default, bool):
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value
    if isinstance(option.default, list):
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        raise ValueError("expected a comma-separated list")
    if isinstance(option.default, str):
        return option.parse(str(value))
    return type(option.default)(value)


def read_properties(path: str | os.PathLike) -> dict[str, str]:
    """A Java-properties file read as java.util.Properties reads it (jproperties): ``key=value``, ``key: value``
    and ``key value``, ``#``/``!`` comments, ``\\`` continuations and escapes (``key\\:x=1`` is the key ``key:x``)."""
    properties = jproperties.Properties()
    with open(path, "rb") as f:
        try:
            properties.load(f, "utf-8")
        except jproperties.ParseError as exc:
            raise ConfigurationException(f"{path} is not a Java properties file: {exc}") from None
    return {key: value.data for key, value in properties.items()}
