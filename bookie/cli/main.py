"""The ``bk`` command, after BookKeeper's ``bin/bookkeeper``: ``bk shell CMD`` for operator commands.

Storage inspection (this module's first commands) works on a stopped bookie's directories:
``lastmark``, ``readjournal``, ``readlog``.
"""
from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import logging
import os
import re
import sys

from bookie.cli import (audit_commands, autorecovery_commands, cluster_info_commands, cookie_commands,
                        format_commands, gc_commands, ledger_commands, log_commands, recovery_commands,
                        server_commands, storage_commands, update_ledger_commands)
from bookie.cli.cluster_conf import add_conf_args, add_uri_args, load_conf
from bookie.cli.interrupts import INTERRUPTED
from bookie.exceptions import BKException


BOOKKEEPER_VERSION = "4.17"  # the BookKeeper whose protocol, metadata and formats this one speaks


class BkArgumentParser(argparse.ArgumentParser):
    """argparse's parser, answering an unknown verb or choice with the closest one (every ``bk`` parser: a
    subparser is made of its parent's class)."""

    def error(self, message: str):
        wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if wrong:
            choices = re.findall(r"'([^']*)'", wrong.group(2))
            close = difflib.get_close_matches(wrong.group(1), choices, 1, 0.6)
            verbs = any(isinstance(a, argparse._SubParsersAction) and sorted(a.choices) == sorted(choices)
                        for a in self._actions)
            listed = ", ".join(choices) if len(choices) <= 10 else f"{self.prog} --help lists them"
            message = (f"unknown {'command' if verbs else 'choice'} {wrong.group(1)!r}"
                       + (f"; did you mean {close[0]!r}?" if close else "") + f" ({listed})")
        super().error(message)


def version() -> str:
    try:
        mine = importlib.metadata.version("spark-bookkeeper")
    except importlib.metadata.PackageNotFoundError:
        mine = "unknown (not installed)"
    return f"bk {mine} (spark-bookkeeper, for Apache BookKeeper {BOOKKEEPER_VERSION})"


def add_help_verb(shell: argparse.ArgumentParser, verbs) -> None:
    """``bk shell help [VERB]``: the verbs, or one verb's flags (BookKeeper's ``bookkeeper shell help``). Added
    last, so that every verb is a choice."""
    def run_help(args, conf) -> int:
        (shell if args.verb is None else verbs.choices[args.verb]).print_help()
        return 0

    helper = verbs.add_parser("help", help="list the verbs, or show one verb's flags: help [VERB]")
    helper.add_argument("verb", nargs="?", choices=sorted(verbs.choices), metavar="VERB", help="the verb to describe")
    helper.set_defaults(run=run_help, no_conf=True)


def build_parser() -> argparse.ArgumentParser:
    parser = BkArgumentParser(prog="bk", description="Apache BookKeeper in Python")
    parser.add_argument("--version", action="version", version=version())
    commands = parser.add_subparsers(dest="command", required=True)
    server_commands.register_top(commands, add_conf_args)
    autorecovery_commands.register_top(commands, add_uri_args)
    audit_commands.register_top(commands, add_uri_args)
    shell = commands.add_parser("shell", help="operator commands (BookKeeper's bookkeeper shell)")
    shell.add_argument("-conf", "--conf", dest="shell_conf", metavar="FILE",
                       help="bk_server.conf for the command that follows (BookKeeper's bookkeeper shell -conf)")
    shell_commands = shell.add_subparsers(dest="shell_command", required=True)
    storage_commands.register(shell_commands, add_conf_args)
    server_commands.register_shell(shell_commands, add_uri_args)
    ledger_commands.register_shell(shell_commands, add_uri_args)
    log_commands.register_shell(shell_commands, add_uri_args)
    gc_commands.register_shell(shell_commands, add_uri_args)
    autorecovery_commands.register_shell(shell_commands, add_uri_args)
    recovery_commands.register_shell(shell_commands, add_uri_args)
    cookie_commands.register_shell(shell_commands, add_uri_args)
    format_commands.register_shell(shell_commands, add_uri_args)
    cluster_info_commands.register_shell(shell_commands, add_uri_args)
    update_ledger_commands.register_shell(shell_commands, add_uri_args)
    add_help_verb(shell, shell_commands)
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
    except KeyboardInterrupt:  # a command that writes stops on a flag instead (bookie/cli/interrupts.py)
        print(f"bk: interrupted ({args.command}{' ' + args.shell_command if args.command == 'shell' else ''})",
              file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
