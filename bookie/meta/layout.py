"""Where things live in ZooKeeper: BookKeeper's layout under the ledgers root (BookKeeperConstants, the ledger managers' paths).

Ledger znodes, scope 0 (BookKeeper's ledger managers):
- flat: ``<root>/L%010d``;
- hierarchical (default): ids below 2^31-1 ``<root>/s[0:2]/s[2:6]/L s[6:10]`` with ``s = %010d``,
  larger ids the long path;
- long hierarchical: ``<root>/s[0:3]/s[3:7]/s[7:11]/s[11:15]/L s[15:19]`` with ``s = %019d``.

Ledgers of other scopes (BP-35 leaves the ZooKeeper layout open): the 32-hex-digit qualified name
``q`` split in eight levels of four digits, ``<root>/scoped/q[0:4]/…/q[24:28]/L q[28:32]``. The
first four levels are the scope, so one scope is one subtree, and no znode has more than 65,536
children even when scopes are random (UUID ids).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from bookie.ledger_id import LedgerId

LAYOUT_ZNODE = "LAYOUT"
INSTANCEID = "INSTANCEID"
AVAILABLE_NODE = "available"
READONLY = "readonly"
COOKIE_NODE = "cookies"
UNDER_REPLICATION_NODE = "underreplication"
IDGEN = "idgen"
IDGEN_LONG = "idgen-long"
SCOPED = "scoped"
LEDGER_NODE_PREFIX = "L"
LAYOUT_FORMAT_VERSION = 2
FACTORIES = {
    "flat": "org.apache.bookkeeper.meta.FlatLedgerManagerFactory",
    "hierarchical": "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory",
    "longhierarchical": "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory",
}
MAX_SHORT_ID = (1 << 31) - 1  # Integer.MAX_VALUE
# The children of the root a ledger tree starts with (StringUtils' FLAT_LEDGER_NODE_REGEX and
# HIERARCHICAL_LEDGER_PARENT_NODE_REGEX, which covers the legacy and the long hierarchical managers), and this
# project's scoped ledgers.
_LEDGER_TREE = re.compile(r"L\d{10}|\d{2,3}")
LEDGER_ID_GEN_PREFIX = "ID-"  # ZkLedgerIdGenerator.LEDGER_ID_GEN_PREFIX
# Beyond BookKeeper, under the root: the Spark connector's logs (bookie.meta.log_metadata.LOGS_NODE) and its
# writers' heartbeats (spark_bookkeeper.log.RUNNING_NODE).
CONNECTOR_NODES = ("logs", "log-writers")


@dataclass(frozen=True)
class LedgerLayout:
    manager: str  # "flat" | "hierarchical" | "longhierarchical"
    manager_version: int = 1

    def encode(self) -> bytes:
        return f"{LAYOUT_FORMAT_VERSION}\n{FACTORIES[self.manager]}:{self.manager_version}".encode()

    @classmethod
    def decode(cls, data: bytes) -> "LedgerLayout":
        lines = data.decode().strip().splitlines()
        if len(lines) != 2 or not lines[0].strip().isdigit():
            raise ValueError(f"LAYOUT {data!r} is not '<version>\\n<factory>:<version>'")
        factory, _, version = lines[1].rpartition(":")
        for manager, name in FACTORIES.items():
            if factory == name:
                return cls(manager, int(version))
        raise ValueError(f"LAYOUT names ledger manager factory {factory!r}, which is not supported "
                         f"(supported: {', '.join(FACTORIES.values())})")


def is_ledger_tree(name: str) -> bool:
    """A child of the root that holds ledgers (AbstractZkLedgerManager.isLedgerParentNode, any manager), or
    this project's scoped-ledger tree."""
    return name == SCOPED or _LEDGER_TREE.fullmatch(name) is not None


def is_id_generator(name: str) -> bool:
    """AbstractZkLedgerManager.isLeadgerIdGeneratorZnode."""
    return name in (IDGEN, IDGEN_LONG) or name.startswith(LEDGER_ID_GEN_PREFIX)


def is_cluster_node(name: str) -> bool:
    """A child of the root that BookKeeper (AbstractZkLedgerManager.isSpecialZnode, a ledger tree) or this
    project puts there; anything else is a stranger's, which nukeexistingcluster refuses to delete."""
    return (name in (AVAILABLE_NODE, COOKIE_NODE, LAYOUT_ZNODE, INSTANCEID, UNDER_REPLICATION_NODE, *CONNECTOR_NODES)
            or is_id_generator(name) or is_ledger_tree(name))


def ledger_path(root: str, manager: str, ledger: LedgerId) -> str:
    scope, lid = ledger
    if scope != 0:
        q = ledger.qualified_name
        return "/".join([root, SCOPED, *(q[i: i + 4] for i in range(0, 28, 4)), LEDGER_NODE_PREFIX + q[28:]])
    if manager == "flat":
        return f"{root}/{LEDGER_NODE_PREFIX}{lid:010d}"
    if manager == "hierarchical" and lid < MAX_SHORT_ID:
        s = f"{lid:010d}"
        return f"{root}/{s[0:2]}/{s[2:6]}/{LEDGER_NODE_PREFIX}{s[6:10]}"
    s = f"{lid:019d}"
    return f"{root}/{s[0:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/{LEDGER_NODE_PREFIX}{s[15:19]}"


def parse_ledger_path(root: str, path: str) -> LedgerId:
    """The ledger a znode path names (inverse of ``ledger_path``)."""
    parts = path[len(root):].strip("/").split("/")
    if not parts[-1].startswith(LEDGER_NODE_PREFIX):
        raise ValueError(f"{path} is not a ledger znode")
    parts[-1] = parts[-1][1:]
    if parts[0] == SCOPED:
        q = "".join(parts[1:])
        return LedgerId.from_qualified_name(q)
    return LedgerId(0, int("".join(parts)))


UNDER_REPLICATED_PREFIX = "urL"  # ZkLedgerUnderreplicationManager's urL%010d
SCOPED_UNDER_REPLICATED_PREFIX = "urS"  # beyond BookKeeper: urS + the 32-hex-digit qualified name
UNDER_REPLICATED_LEDGERS = f"{UNDER_REPLICATION_NODE}/ledgers"
# Scoped (BP-35) ledgers have no place in BookKeeper's 64-bit tree; a tree of their own, which BookKeeper's
# tools never walk, split as the scoped ledger tree is (seven levels of four hex digits).
SCOPED_UNDER_REPLICATED_LEDGERS = f"{UNDER_REPLICATION_NODE}/scopedledgers"


def under_replication_name(ledger: LedgerId | int) -> str:
    """A ledger's node name in the under-replication tree, its lock and its state: ``urL%010d`` for a
    scope-0 ledger (BookKeeper's), ``urS<qualified name>`` for another scope."""
    ledger = LedgerId.coerce(ledger)
    if ledger.scope_id == 0:
        return f"{UNDER_REPLICATED_PREFIX}{ledger.ledger_id:010d}"
    return SCOPED_UNDER_REPLICATED_PREFIX + ledger.qualified_name


def parse_under_replication_name(name: str) -> LedgerId:
    """The ledger an ``urL…``/``urS…`` node names (inverse of ``under_replication_name``)."""
    if name.startswith(SCOPED_UNDER_REPLICATED_PREFIX):
        return LedgerId.from_qualified_name(name[len(SCOPED_UNDER_REPLICATED_PREFIX):])
    if name.startswith(UNDER_REPLICATED_PREFIX) and name[len(UNDER_REPLICATED_PREFIX):].isdigit():
        return LedgerId.of(int(name[len(UNDER_REPLICATED_PREFIX):]))
    raise ValueError(f"{name!r} is not an under-replicated ledger's node name (urL<id> or urS<qualified name>)")


def under_replicated_ledger_path(ledger: LedgerId | int) -> str:
    """Where the auditor marks a ledger under-replicated, relative to the root. Scope 0 (an int is a scope-0
    id): ZkLedgerUnderreplicationManager's four levels of 16 id bits, then ``urL%010d``; other scopes: the
    scoped tree, seven levels of the qualified name, then ``urS<qualified name>``."""
    ledger = LedgerId.coerce(ledger)
    name = under_replication_name(ledger)
    if ledger.scope_id != 0:
        q = ledger.qualified_name
        return "/".join([SCOPED_UNDER_REPLICATED_LEDGERS, *(q[i: i + 4] for i in range(0, 28, 4)), name])
    levels = [f"{(ledger.ledger_id >> shift) & 0xFFFF:04x}" for shift in (48, 32, 16, 0)]
    return "/".join([UNDER_REPLICATED_LEDGERS, *levels, name])


def under_replication_lock_path(ledger: LedgerId | int) -> str:
    """The lock a replication worker holds while it re-replicates a ledger, relative to the root."""
    return f"{UNDER_REPLICATION_NODE}/locks/{under_replication_name(ledger)}"
