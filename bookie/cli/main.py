"""The ``bk`` command, after BookKeeper's ``bin/bookkeeper``: ``bk shell CMD`` for operator commands.

Storage inspection (this module's first commands) works on a stopped bookie's directories:
``lastmark``, ``readjournal``, ``readlog``.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from bookie.cli import (audit_commands, autorecovery_commands, gc_commands, ledger_commands, log_commands,
                        recovery_commands, server_commands, storage_commands)
from bookie.exceptions import BKException
from bookie.server.conf import ServerConfiguration


def add_conf_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", help="bk_server.conf (Java properties, BookKeeper key names)")
    parser.add_argument("--journal-dir", help="journal directory (overrides journalDirectories)")
    parser.add_argument("--ledger-dir", help="ledger directory (overrides ledgerDirectories)")


def add_uri_args(parser: argparse.ArgumentParser) -> None:
    add_conf_args(parser)
    parser.add_argument("-u", "--metadata-service-uri", help="zk://host:port/ledgers (default: from --conf)")
    parser.add_argument("--zk-connect-timeout", type=float, default=15.0, help="seconds to wait for ZooKeeper")


def load_conf(args: argparse.Namespace) -> ServerConfiguration:
    overrides = {}
    if getattr(args, "journal_dir", None):
        overrides["journalDirectories"] = args.journal_dir
    if getattr(args, "ledger_dir", None):
        overrides["ledgerDirectories"] = args.ledger_dir
    conf = ServerConfiguration.load(args.conf, overrides) if getattr(args, "conf", None) else ServerConfiguration(overrides)
    if hasattr(args, "metadata_service_uri") and not args.metadata_service_uri:
        args.metadata_service_uri = conf["metadataServiceUri"] or None
    return conf


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bk", description="Apache BookKeeper in Python")
    commands = parser.add_subparsers(dest="command", required=True)
    server_commands.register_top(commands, add_conf_args)
    autorecovery_commands.register_top(commands, add_uri_args)
    audit_commands.register_top(commands, add_uri_args)
    shell = commands.add_parser("shell", help="operator commands (BookKeeper's bookkeeper shell)")
    shell_commands = shell.add_subparsers(dest="shell_command", required=True)
    storage_commands.register(shell_commands, add_conf_args)
    server_commands.register_shell(shell_commands, add_uri_args)
    ledger_commands.register_shell(shell_commands, add_uri_args)
    log_commands.register_shell(shell_commands, add_uri_args)
    gc_commands.register_shell(shell_commands, add_uri_args)
    autorecovery_commands.register_shell(shell_commands, add_uri_args)
    recovery_commands.register_shell(shell_commands, add_uri_args)
    ledger_commands.register_bench(commands, add_uri_args)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    default_level = "INFO" if args.command in ("bookie", "local", "autorecovery") else "WARNING"
    logging.basicConfig(level=os.environ.get("BK_LOG_LEVEL", default_level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)  # connection chatter while ZooKeeper starts
    try:
        return args.run(args, load_conf(args)) or 0
    # Our errors share one root; OSError is the system's (a missing file, a port in use), and ValueError a bad
    # argument value that a command parses itself (a hex id, a number).
    except (BKException, OSError, ValueError) as exc:
        print(f"bk: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
