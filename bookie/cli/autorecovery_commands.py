"""``bk autorecovery`` (BookKeeper's ``bin/bookkeeper autorecovery``) and the AutoRecovery verbs of
``bk shell`` with BookKeeper's names and flags: ``autorecovery -enable|-disable``, ``whoisauditor``,
``triggeraudit``, ``lostbookierecoverydelay -get|-set N``, ``listunderreplicated [-mr B] [-emr B] [-pmr] [-c]``
(each ledger with its state and reason, beyond BookKeeper), ``queryautorecoverystatus`` and
``forceauditchecks [-calc] [-ppc] [-rc]`` (ForceAuditorChecksCmd: the last run time of those checks is set 21
days back, so that an auditor runs them when it starts)."""
from __future__ import annotations

import asyncio
import datetime
import logging
import signal
import time
from typing import Callable, NamedTuple

from bookie.cli.cluster_conf import metadata_store
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager, missing_replica_filter
from bookie.server.conf import ConfigurationException


def register_top(commands, add_uri_args) -> None:
    main = commands.add_parser("autorecovery", help="run an AutoRecovery participant (auditor election, auditor) "
                                                    "until SIGTERM")
    add_uri_args(main)
    main.add_argument("--id", help="this participant's id in the election (default: bookieId, or "
                                   "advertisedAddress:bookiePort of the configuration)")
    main.set_defaults(run=run_autorecovery)


def register_shell(commands, add_uri_args) -> None:
    def verb(name: str, help_text: str, run):
        parser = commands.add_parser(name, help=help_text)
        add_uri_args(parser)
        parser.set_defaults(run=run)
        return parser

    toggle = verb("autorecovery", "enable or disable AutoRecovery for the cluster (no flag: say which)",
                  run_toggle).add_mutually_exclusive_group()
    toggle.add_argument("-enable", "--enable", action="store_true", help="enable AutoRecovery")
    toggle.add_argument("-disable", "--disable", action="store_true", help="disable AutoRecovery")
    verb("whoisauditor", "print the auditor's id", run_whoisauditor)
    verb("triggeraudit", "make the auditor audit every lost bookie now", run_triggeraudit)
    delay = verb("lostbookierecoverydelay", "get or set lostBookieRecoveryDelay (seconds)",
                 run_delay).add_mutually_exclusive_group(required=True)
    delay.add_argument("-get", "--get", action="store_true", help="print the delay")
    delay.add_argument("-set", "--set", type=int, metavar="N", help="set the delay to N seconds")
    listing = verb("listunderreplicated", "list the under-replicated ledgers with their state and reason",
                   run_listunderreplicated)
    listing.add_argument("-mr", "--missingreplica", metavar="BOOKIE", help="only ledgers missing this replica")
    listing.add_argument("-emr", "--excludingmissingreplica", metavar="BOOKIE",
                         help="only ledgers not missing this replica")
    listing.add_argument("-pmr", "--printmissingreplica", action="store_true", help="print the missing replicas")
    listing.add_argument("-c", "--onlydisplayledgercount", action="store_true", help="print the count only")
    verb("queryautorecoverystatus", "the ledgers being re-replicated now, by whom, and their state",
         run_queryautorecoverystatus)
    checks = verb("forceauditchecks", "reset the last run time of auditor checks, so that the auditor runs them "
                                      "when it next starts (restart the current one)", run_forceauditchecks)
    for check in FORCED_CHECKS:
        checks.add_argument(f"-{check.flag}", f"--{check.name}", dest=check.flag, action="store_true",
                            help=f"reset {check.ctime}: the {check.name} audit runs upon the next auditor start")


class ForcedCheck(NamedTuple):
    """A flag of ForceAuditorChecksCmd and the auditor check time it resets."""
    flag: str
    name: str
    ctime: str
    set_ctime: Callable[[LedgerUnderreplicationManager, int], None]


FORCED_CHECKS = (
    ForcedCheck("calc", "checkallledgerscheck", "CheckAllLedgersCTime",
                LedgerUnderreplicationManager.set_check_all_ledgers_ctime),
    ForcedCheck("ppc", "placementpolicycheck", "PlacementPolicyCheckCTime",
                LedgerUnderreplicationManager.set_placement_policy_check_ctime),
    ForcedCheck("rc", "replicascheck", "ReplicasCheckCTime", LedgerUnderreplicationManager.set_replicas_check_ctime))
FORCED_CHECK_AGE_MS = 21 * 24 * 3600 * 1000  # how far back: more than any check's interval, as BookKeeper chose


def run_autorecovery(args, conf) -> int:
    """AutoRecoveryMain until SIGTERM or SIGINT, with its own metrics provider and, under httpServerEnabled, the HTTP
    admin server (BookKeeper's autorecovery-server components: stats, AutoRecovery, HTTP; the bookie routes answer
    that this process runs no bookie)."""
    if args.metadata_service_uri:
        conf.set("metadataServiceUri", args.metadata_service_uri)
    if not conf.metadata_service_uri:
        raise ConfigurationException("no metadata service: pass -u zk://host:port/ledgers, or --conf with metadataServiceUri")
    for notice in conf.notices():
        logging.getLogger(__name__).warning(notice)
    asyncio.run(_serve_autorecovery(conf, args.id))
    return 0


async def _serve_autorecovery(conf, participant_id: str | None) -> None:
    from bookie.cli.server_commands import http_admin_server
    from bookie.replication.autorecovery_main import AutoRecoveryMain
    from bookie.stats.prometheus_metrics_provider import PrometheusMetricsProvider
    from bookie.stats.stats_logger import NULL_STATS_LOGGER
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stats = PrometheusMetricsProvider.from_conf(conf)
    http = None
    main = None
    try:
        root = NULL_STATS_LOGGER
        if stats is not None:
            root = stats.start().get_stats_logger()
        main = await asyncio.to_thread(lambda: AutoRecoveryMain(conf, participant_id, stats_logger=root).start())
        if conf["httpServerEnabled"]:
            http = await http_admin_server(conf, autorecovery=main, stats_provider=stats).start()
        print(f"autorecovery {main.id} is up (metadata {conf.metadata_service_uri})"
              + (f"; HTTP admin on http://{http.address}" if http is not None else ""), flush=True)
        await stop.wait()
    finally:
        if http is not None:
            await http.stop()
        if main is not None:
            await asyncio.to_thread(main.shutdown)
        if stats is not None:
            stats.stop()


def run_toggle(args, conf) -> int:
    with metadata_store(args) as store:
        manager = LedgerUnderreplicationManager(store)
        if args.enable:
            manager.enable_ledger_replication()
        elif args.disable:
            manager.disable_ledger_replication()
        print(f"AutoRecovery is {'enabled' if manager.is_ledger_replication_enabled() else 'disabled'}")
    return 0


def run_whoisauditor(args, conf) -> int:
    from bookie.replication.auditor_elector import current_auditor
    with metadata_store(args) as store:
        auditor = current_auditor(store)
    if auditor is None:
        print("No auditor elected")
        return 1
    print(f"Auditor: {auditor}")
    return 0


def run_triggeraudit(args, conf) -> int:
    with metadata_store(args) as store:
        manager = LedgerUnderreplicationManager(store)
        manager.trigger_audit(conf["lostBookieRecoveryDelay"])
    print("Triggered audit")
    return 0


def run_delay(args, conf) -> int:
    with metadata_store(args) as store:
        manager = LedgerUnderreplicationManager(store)
        if args.set is not None:
            manager.set_lost_bookie_recovery_delay(args.set)
            print(f"Successfully set LostBookieRecoveryDelay value to: {args.set}")
        else:
            print(f"LostBookieRecoveryDelay value: "
                  f"{manager.get_lost_bookie_recovery_delay(conf['lostBookieRecoveryDelay'])}")
    return 0


def run_listunderreplicated(args, conf) -> int:
    wanted = missing_replica_filter(args.missingreplica, args.excludingmissingreplica)
    with metadata_store(args) as store:
        manager = LedgerUnderreplicationManager(store)
        count = 0
        for ledger in manager.list_underreplicated(wanted):
            count += 1
            if args.onlydisplayledgercount:
                continue
            state = manager.get_state(ledger.ledger)
            line = f"{ledger.ledger}"  # scope 0: BookKeeper's id; another scope: the qualified name
            if state is not None:
                line += f"\tstate: {state.state}" + (f" ({state.reason})" if state.reason else "")
            print(line)
            if args.printmissingreplica:
                print(f"\tMissing replicas: {', '.join(ledger.replicas)}")
        print(f"Number of under-replicated ledgers: {count}" if args.onlydisplayledgercount or count else
              "No under-replicated ledgers found")
    return 0


def run_queryautorecoverystatus(args, conf) -> int:
    with metadata_store(args) as store:
        manager = LedgerUnderreplicationManager(store)
        busy = 0
        for ledger in manager.list_underreplicated():
            holder = manager.lock_holder(ledger.ledger)
            if holder is None:
                continue
            busy += 1
            state = manager.get_state(ledger.ledger)
            detail = "" if state is None else f", state {state.state}" + (f" ({state.reason})" if state.reason else "")
            print(f"ledger {ledger.ledger}: re-replicated by {holder}{detail}")
        if not busy:
            print("No ledgers are being re-replicated")
    return 0


def run_forceauditchecks(args, conf) -> int:
    from bookie.replication.auditor_elector import current_auditor
    wanted = [check for check in FORCED_CHECKS if getattr(args, check.flag)]
    if not wanted:
        raise ConfigurationException("forceauditchecks needs at least one check to reset: -calc, -ppc or -rc; "
                                     "nothing was changed")
    ctime = int(time.time() * 1000) - FORCED_CHECK_AGE_MS
    with metadata_store(args) as store:
        manager = LedgerUnderreplicationManager(store)
        for check in wanted:
            print(f"Resetting {check.ctime} to : {_java_timestamp(ctime)}")
            check.set_ctime(manager, ctime)
        auditor = current_auditor(store)
    if any(check.flag == "ppc" for check in wanted):
        print("(this project's auditor has no placement policy check: a BookKeeper auditor reads that time)")
    if auditor is None:
        print("No auditor elected: the next one runs the checks when it starts")
    else:
        print(f"An auditor reads these times when it starts: restart the current one ({auditor}) for it to run "
              "the checks now")
    return 0


def _java_timestamp(ms: int) -> str:
    """java.sql.Timestamp.toString of ``ms`` (local time): yyyy-mm-dd hh:mm:ss.f, the fraction without its
    trailing zeros."""
    when = datetime.datetime.fromtimestamp(ms / 1000)
    return f"{when:%Y-%m-%d %H:%M:%S}.{f'{ms % 1000:03d}'.rstrip('0') or '0'}"
