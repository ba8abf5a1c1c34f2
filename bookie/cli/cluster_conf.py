"""Where a ``bk`` command finds its configuration and its cluster when no flag says: BookKeeper's environment
(bin/common.sh: ``BOOKIE_CONF``, else ``$BK_HOME/conf/bk_server.conf``), and ``METADATA_SERVICE_URI`` (which
the notebooks read too). Flags win over the environment, the environment over the configuration file."""
from __future__ import annotations

import argparse
import os

from bookie.client import BookKeeper
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.server.conf import ConfigurationException, ServerConfiguration

BOOKIE_CONF = "BOOKIE_CONF"
BK_HOME = "BK_HOME"
METADATA_SERVICE_URI = "METADATA_SERVICE_URI"


def add_conf_args(parser: argparse.ArgumentParser, *aliases: str, dirs: bool = True) -> None:
    parser.add_argument("--conf", "-conf", *aliases,
                        help=f"bk_server.conf (Java properties, BookKeeper key names; default: ${BOOKIE_CONF}, else "
                             f"${BK_HOME}/conf/bk_server.conf)")
    if dirs:
        parser.add_argument("--journal-dir", help="journal directory (overrides journalDirectories)")
        parser.add_argument("--ledger-dir", help="ledger directory (overrides ledgerDirectories)")


def add_uri_args(parser: argparse.ArgumentParser, dirs: bool = True) -> None:
    add_conf_args(parser, dirs=dirs)
    parser.add_argument("-u", "--metadata-service-uri",
                        help=f"zk://host:port/ledgers (default: ${METADATA_SERVICE_URI}, else the configuration's)")
    parser.add_argument("--zk-connect-timeout", type=float, default=15.0, help="seconds to wait for ZooKeeper")


def conf_path(args: argparse.Namespace) -> str | None:
    """The configuration file a command reads: its flag (after the verb, or ``bk shell -conf F`` before it),
    else $BOOKIE_CONF, else $BK_HOME/conf/bk_server.conf when that exists; None: BookKeeper's defaults."""
    path = getattr(args, "conf", None) or getattr(args, "shell_conf", None)
    if path:
        return path
    if os.environ.get(BOOKIE_CONF):
        if not os.path.isfile(os.environ[BOOKIE_CONF]):
            raise ConfigurationException(f"{BOOKIE_CONF}={os.environ[BOOKIE_CONF]} is not a file: point it at a "
                                         "bk_server.conf, or unset it")
        return os.environ[BOOKIE_CONF]
    home = os.environ.get(BK_HOME)
    default = os.path.join(home, "conf", "bk_server.conf") if home else None
    return default if default and os.path.isfile(default) else None


def load_conf(args: argparse.Namespace) -> ServerConfiguration:
    if getattr(args, "no_conf", False):  # bk local: its own --conf is for the bookies it starts
        return ServerConfiguration()
    overrides = {}
    if getattr(args, "journal_dir", None):
        overrides["journalDirectories"] = args.journal_dir
    if getattr(args, "ledger_dir", None):
        overrides["ledgerDirectories"] = args.ledger_dir
    path = conf_path(args)
    conf = ServerConfiguration.load(path, overrides) if path else ServerConfiguration(overrides)
    if hasattr(args, "metadata_service_uri") and not args.metadata_service_uri:
        args.metadata_service_uri = os.environ.get(METADATA_SERVICE_URI) or conf.metadata_service_uri or None
    return conf


def _cluster_uri(args: argparse.Namespace) -> str:
    if not args.metadata_service_uri:
        raise ConfigurationException(f"no metadata service: pass -u zk://host:port/ledgers, set {METADATA_SERVICE_URI}, "
                                     "or give a bk_server.conf with metadataServiceUri (--conf or $BOOKIE_CONF)")
    return args.metadata_service_uri


def metadata_store(args: argparse.Namespace) -> ZKMetadataStore:
    """The metadata store of the cluster a command names (load_conf has filled in its URI)."""
    return ZKMetadataStore(_cluster_uri(args), connect_timeout=args.zk_connect_timeout)


def client(args: argparse.Namespace, client_conf: dict | None = None) -> BookKeeper:
    """A BookKeeper client of the cluster a command names (``client_conf``: ClientConfiguration keys)."""
    return BookKeeper(_cluster_uri(args), client_conf, zkConnectTimeout=args.zk_connect_timeout)
