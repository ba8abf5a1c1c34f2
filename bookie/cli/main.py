"""The ``bk`` command, after BookKeeper's ``bin/bookkeeper``: ``bk shell CMD`` for operator commands.

Storage inspection (this module's first commands) works on a stopped bookie's directories:
``lastmark``, ``readjournal``, ``readlog``.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from bookie.cli import storage_commands
from bookie.server.conf import ConfigurationError, ServerConfiguration


def add_conf_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", help="bk_server.conf (Java properties, BookKeeper key names)")
    parser.add_argument("--journal-dir", help="journal directory (overrides journalDirectories)")
    parser.add_argument("--ledger-dir", help="ledger directory (overrides ledgerDirectories)")


def load_conf(args: argparse.Namespace) -> ServerConfiguration:
    overrides = {}
    if args.journal_dir:
        overrides["journalDirectories"] = args.journal_dir
    if args.ledger_dir:
        overrides["ledgerDirectories"] = args.ledger_dir
    if args.conf:
        return ServerConfiguration.load(args.conf, overrides)
    return ServerConfiguration(overrides)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bk", description="Apache BookKeeper in Python")
    commands = parser.add_subparsers(dest="command", required=True)
    shell = commands.add_parser("shell", help="operator commands (BookKeeper's bookkeeper shell)")
    shell_commands = shell.add_subparsers(dest="shell_command", required=True)
    storage_commands.register(shell_commands, add_conf_args)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("BK_LOG_LEVEL", "WARNING"), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return args.run(args, load_conf(args)) or 0
    except (ConfigurationError, OSError, ValueError) as exc:
        print(f"bk: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
