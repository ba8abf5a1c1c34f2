"""``bk shell recover`` and ``bk shell decommissionbookie`` (BookKeeper's RecoverCommand and
DecommissionCommand, over BookKeeperAdmin).

    bk shell recover B... [-l LEDGER] [-dr] [-sk] [-d] [-f] -u URI
        copy the lost bookies' shares of every ledger on them; -dr only lists, -sk leaves open ledgers,
        -d deletes the bookies' cookies once everything is recovered; asks first unless -f (or -dr);
        exit 1 if anything was not
    bk shell decommissionbookie -bookieid B [--timeout S] -u URI
        refused while B is registered; marks its ledgers (through the auditor if one runs), waits until
        nothing references B, deletes its cookie
"""
from __future__ import annotations

from contextlib import ExitStack

from tqdm import tqdm

from bookie.cli.cluster_conf import client
from bookie.cli.prompts import confirm
from bookie.client.bookkeeper import as_ledger_id
from bookie.client.bookkeeper_admin import DECOMMISSION_TIMEOUT_SECONDS, BookKeeperAdmin, LedgerRecovery
from bookie.replication.auditor_elector import current_auditor


def register_shell(commands, add_uri_args) -> None:
    recover = commands.add_parser("recover", help="copy lost bookies' data to other bookies (BookKeeperAdmin)")
    add_uri_args(recover)
    recover.add_argument("bookies", nargs="+", metavar="BOOKIE", help="bookie id(s) to recover")
    recover.add_argument("-l", "--ledger", help="this ledger only")
    recover.add_argument("-dr", "--dryrun", action="store_true", help="only list what would be copied")
    recover.add_argument("-sk", "--skipopenledgers", action="store_true", help="leave open ledgers alone")
    recover.add_argument("-d", "--deletecookie", action="store_true",
                         help="delete the recovered bookies' cookies afterwards")
    recover.add_argument("-f", "--force", action="store_true", help="recover without asking for confirmation")
    recover.set_defaults(run=run_recover)
    decommission = commands.add_parser("decommissionbookie",
                                       help="move a stopped bookie's ledgers elsewhere, then delete its cookie")
    add_uri_args(decommission)
    decommission.add_argument("-bookieid", "--bookieid", required=True, help="the bookie to decommission")
    decommission.add_argument("--timeout", type=float, default=DECOMMISSION_TIMEOUT_SECONDS,
                              help="seconds to wait for its ledgers to move "
                                   f"(default {DECOMMISSION_TIMEOUT_SECONDS:.0f})")
    decommission.set_defaults(run=run_decommission)


def run_recover(args, conf) -> int:
    # As BookKeeper's RecoverCommand: a recovery copies (and with -d deletes cookies) for good; a dry run only lists.
    if not (args.force or args.dryrun) and not confirm(f"Bookies: {', '.join(args.bookies)}\nAre you sure to "
                                                      "recover them?", "recover"):
        print("not recovered")
        return 1
    with client(args) as bk:
        admin = BookKeeperAdmin(bk)
        ledger = as_ledger_id(args.ledger) if args.ledger is not None else None
        with tqdm(desc="recover", unit=" ledgers", leave=False, disable=None) as bar:  # off when not a terminal
            def shown(result: LedgerRecovery) -> None:
                bar.update(1)
                if args.dryrun and result.fragments:
                    print(f"ledger {result.ledger}: would copy {result.entries} entries of "
                          + "; ".join(f"{f.first}..{f.last} from {','.join(f.bad_bookies)}" for f in result.fragments))
            report = admin.recover_bookie_data(args.bookies, ledger, args.dryrun, args.skipopenledgers, shown,
                                               delete_cookies=args.deletecookie)
        print(report.summary(args.dryrun))
        if report.failed:
            return 1
        for bookie in report.cookies_deleted:
            print(f"deleted the cookie of {bookie}")
    return 0


def run_decommission(args, conf) -> int:
    bookie = args.bookieid
    with client(args) as bk:
        auditor = current_auditor(bk.store)
        with ExitStack() as stack:
            bars = []

            def started(marked: int | None) -> None:
                # No auditor: the ledgers are marked, so replication workers (`bk autorecovery`) move them; copying
                # them here is `recover`'s job, and the marks tell a worker started later what to do.
                print(f"triggered an audit on {auditor}" if marked is None else
                      f"no auditor is running: marked {marked} ledgers under-replicated")
                bars.append(stack.enter_context(tqdm(desc=f"ledgers on {bookie}", unit=" ledgers", leave=False,
                                                     disable=None)))

            def shown(in_metadata, marked) -> None:
                bar = bars[0]
                bar.total = max(bar.total or 0, len(in_metadata))
                bar.n = bar.total - len(in_metadata)
                bar.set_postfix(marked=len(marked))
            BookKeeperAdmin(bk).decommission_bookie(bookie, auditor, conf["lostBookieRecoveryDelay"], args.timeout,
                                                    started, shown)
        print(f"bookie {bookie} decommissioned: no ledger references it; its cookie is deleted")
    return 0
