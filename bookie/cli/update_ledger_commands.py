"""The verbs of ``bk shell`` that replace a bookie's id in ledger metadata, after BookKeeper 4.17's BookieShell:
``updateledgers`` (UpdateLedgerCmd over bookie.FlipBookieIdCommand) and ``updateBookieInLedger``
(UpdateBookieInLedgerCmd over bookie.UpdateBookieInLedgerCommand), both over UpdateLedgerOp
(bookie.client.update_ledger_op).

    bk shell updateledgers --conf F -b hostname|ip [-s 5] [-r 25] [-l N] [-v] [-p 10]
        the id the bookie of F had with the other useHostNameAsBookieID becomes the id F gives it, in every
        ledger (the step after ``updatecookie -bookieId``; F says useHostNameAsBookieID=true for hostname)
    bk shell updateBookieInLedger -u URI -sb SRC -db DEST [-s 5] [-r 25] [-l N] [-v] [-p 10]
        SRC becomes DEST in every ledger (a bookie moved to another address)

-s: ledger updates a second; -r: metadata reads at a time (default five times -s); -l: at most that many
ledgers looked at; -v: each ledger updated, and the counts every -p seconds (BookieShell's ``-v true`` works
too). Both refuse while the id being replaced is registered: a running bookie under it would lose its ledgers'
traffic to an id no bookie serves yet (BookKeeper refuses so for updateBookieInLedger only).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

from bookie.cli.cookie_commands import HOSTNAME, IP, checked_bookie_id, switched_ids, ensure_stopped
from bookie.cli.cluster_conf import metadata_store
from bookie.client.update_ledger_op import UpdateProgress, update_bookie_id_in_ledgers
from bookie.exceptions import ConfigurationException
from bookie.ledger_id import LedgerId
from bookie.server.conf import ServerConfiguration

DEFAULT_UPDATES_PER_SEC = 5
DEFAULT_PRINT_PROGRESS = 10  # seconds
READS_PER_UPDATE = 5  # -r's default: five times -s, as BookKeeper's


def register_shell(commands: argparse._SubParsersAction,
                   add_uri_args: Callable[[argparse.ArgumentParser], None]) -> None:
    flip = commands.add_parser("updateledgers", help="update the bookie id in ledgers to its host name or IP form "
                                                     "(this may take a long time)")
    add_uri_args(flip)
    flip.add_argument("-b", "-bookieId", "--bookieId", dest="bookie_id_kind", required=True, choices=(HOSTNAME, IP),
                      help="the form the configuration's bookie id takes now (its useHostNameAsBookieID must say "
                           "the same); the other form is replaced by it")
    _add_update_args(flip)
    flip.set_defaults(run=run_updateledgers)

    move = commands.add_parser("updateBookieInLedger", help="replace a bookie by another in ledger metadata, e.g. "
                                                            "after a re-IP of its host (this may take a long time)")
    add_uri_args(move)
    move.add_argument("-sb", "-srcBookie", "--srcBookie", dest="src_bookie", required=True,
                      help="the bookie id replaced (address:port, or a bookieId); it must not be registered")
    move.add_argument("-db", "-destBookie", "--destBookie", dest="dest_bookie", required=True,
                      help="the bookie id that replaces it")
    _add_update_args(move)
    move.set_defaults(run=run_update_bookie_in_ledger)


def _add_update_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-s", "-updatespersec", "--updatespersec", "--updatepersec", dest="updates_per_sec",
                        type=int, default=DEFAULT_UPDATES_PER_SEC,
                        help=f"ledgers updated per second (default {DEFAULT_UPDATES_PER_SEC})")
    parser.add_argument("-r", "-maxOutstandingReads", "--maxOutstandingReads", dest="max_outstanding_reads",
                        type=int, help="ledger metadata reads at a time (default: 5 x --updatespersec)")
    parser.add_argument("-l", "-limit", "--limit", type=int, help="look at this many ledgers at most (default: all)")
    parser.add_argument("-v", "-verbose", "--verbose", nargs="?", const=True, default=False, type=_true_or_false,
                        metavar="true|false", help="print each ledger updated, and the counts every --printprogress "
                                                   "seconds")
    parser.add_argument("-p", "-printprogress", "--printprogress", type=int,
                        help=f"seconds between two counts, with -v (default {DEFAULT_PRINT_PROGRESS})")


def _true_or_false(text: str) -> bool:
    """BookieShell's ``-v VALUE``: true or false, in any case."""
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return text.lower() == "true"


def run_updateledgers(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    """FlipBookieIdCommand: the configuration's bookie id, as it is with the other useHostNameAsBookieID,
    becomes the id it gives."""
    use_host_name = args.bookie_id_kind == HOSTNAME
    if conf["useHostNameAsBookieID"] != use_host_name:
        raise ConfigurationException(f"-bookieId {args.bookie_id_kind} expects useHostNameAsBookieID="
                                     f"{str(use_host_name).lower()} in the configuration: nothing was updated")
    old, new = switched_ids(conf, use_host_name)
    return _update_ledgers(args, old, new)


def run_update_bookie_in_ledger(args: argparse.Namespace, conf: ServerConfiguration) -> int:
    """UpdateBookieInLedgerCommand: ``-sb`` becomes ``-db`` in every ledger."""
    old, new = checked_bookie_id(args.src_bookie), checked_bookie_id(args.dest_bookie)
    if old == new:
        raise ConfigurationException("srcBookie and destBookie can't be the same: nothing was updated")
    return _update_ledgers(args, old, new)


def _update_ledgers(args: argparse.Namespace, old: str, new: str) -> int:
    rate, reads = args.updates_per_sec, args.max_outstanding_reads
    if reads is None:
        reads = READS_PER_UPDATE * rate
    for name, value in (("updatespersec", rate), ("maxOutstandingReads", reads), ("limit", args.limit)):
        if value is not None and value <= 0:
            raise ConfigurationException(f"Invalid {name} {value}, should be > 0: nothing was updated")
    if args.printprogress is not None and not args.verbose:
        print("Ignoring option 'printprogress', this is applicable when 'verbose' is true", file=sys.stderr)
    with metadata_store(args) as store:
        ensure_stopped(store, old, f"replacing it by {new} in ledger metadata")
        progress = update_bookie_id_in_ledgers(store, old, new, rate, reads, args.limit,
                                               _reporter(args, old, new) if args.verbose else None)
    print(f"Total number of ledgers issued={progress.issued} updated={progress.updated}")
    return 0


def _reporter(args: argparse.Namespace, old: str, new: str) -> Callable[[LedgerId, UpdateProgress], None]:
    """-v: a line per ledger updated (UpdateLedgerOp's), the counts every --printprogress seconds (the
    UpdateLedgerNotifier's)."""
    every = DEFAULT_PRINT_PROGRESS if args.printprogress is None else args.printprogress
    last = time.monotonic()

    def report(ledger: LedgerId, progress: UpdateProgress) -> None:
        nonlocal last
        print(f"Updated ledger {ledger} metadata, replacing {old} with {new}", flush=True)
        if every > 0 and time.monotonic() - last >= every:
            print(f"Number of ledgers issued={progress.issued}, updated={progress.updated}", flush=True)
            last = time.monotonic()

    return report
