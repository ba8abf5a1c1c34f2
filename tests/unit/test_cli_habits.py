"""`bk` as BookKeeper operators type it, where no cluster is needed: --version, help, did you mean, BookKeeper's
flags and environment, confirmation before destroying."""
from __future__ import annotations

import argparse

import pytest

from bookie.cli import main as bk
from bookie.cli.cluster_conf import load_conf

pytestmark = pytest.mark.unit


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = bk.main(list(argv))
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("bk ") and "Apache BookKeeper 4.17" in out


def test_an_unknown_verb_gets_the_closest(capsys):
    code, _, err = run(capsys, "shell", "listbookie")
    assert code == 2 and "unknown command 'listbookie'; did you mean 'listbookies'?" in err
    code, _, err = run(capsys, "shel")
    assert code == 2 and "did you mean 'shell'?" in err


def test_shell_help_lists_the_verbs_or_describes_one(capsys):
    code, out, _ = run(capsys, "shell", "help")
    assert code == 0 and "listbookies" in out and "readledger" in out
    code, out, _ = run(capsys, "shell", "help", "readledger")
    assert code == 0 and out.startswith("usage: bk shell readledger") and "--firstentryid" in out


def test_audit_help_is_help(capsys):
    code, out, err = run(capsys, "audit", "--help")
    assert code == 0 and "storage" in out and "replication" in out and "required" not in err


def test_listbookies_h_means_hostnames_as_in_bookkeeper():
    args = bk.build_parser().parse_args(["shell", "listbookies", "-h", "-rw"])
    assert args.hostnames and args.readwrite


def test_recover_asks_first_and_refuses_where_no_one_can_answer(capsys):
    # pytest's stdin is not a terminal: without -f the command stops before it connects anywhere
    code, _, err = run(capsys, "shell", "recover", "10.0.0.9:3181", "-u", "zk://127.0.0.1:1/ledgers")
    assert code == 2 and "recover asks for confirmation" in err and "pass -f" in err
    assert bk.build_parser().parse_args(["shell", "recover", "b:1", "-f"]).force


def parsed(*argv: str) -> argparse.Namespace:
    args = bk.build_parser().parse_args(list(argv))
    load_conf(args)
    return args


def test_the_cluster_comes_from_flags_then_environment_then_configuration(tmp_path, monkeypatch):
    conf = tmp_path / "bk_server.conf"
    conf.write_text("metadataServiceUri=zk://from-conf:2181/ledgers\n")
    monkeypatch.delenv("METADATA_SERVICE_URI", raising=False)
    monkeypatch.setenv("BOOKIE_CONF", str(conf))
    assert parsed("shell", "listbookies").metadata_service_uri == "zk://from-conf:2181/ledgers"
    monkeypatch.setenv("METADATA_SERVICE_URI", "zk://from-env:2181/ledgers")
    assert parsed("shell", "listbookies").metadata_service_uri == "zk://from-env:2181/ledgers"
    assert parsed("shell", "listbookies", "-u", "zk://flag:2181/ledgers").metadata_service_uri == "zk://flag:2181/ledgers"
    other = tmp_path / "other.conf"
    other.write_text("metadataServiceUri=zk://other:2181/ledgers\n")
    monkeypatch.delenv("METADATA_SERVICE_URI")
    # BookKeeper's spellings: bookkeeper shell -conf F VERB, and -conf after the verb
    assert parsed("shell", "-conf", str(other), "listbookies").metadata_service_uri == "zk://other:2181/ledgers"
    assert parsed("shell", "listbookies", "-conf", str(other)).metadata_service_uri == "zk://other:2181/ledgers"


def test_bk_home_gives_the_default_configuration(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "bk_server.conf").write_text("zkServers=zk1:2181\n")
    monkeypatch.delenv("BOOKIE_CONF", raising=False)
    monkeypatch.delenv("METADATA_SERVICE_URI", raising=False)
    monkeypatch.setenv("BK_HOME", str(tmp_path))
    assert parsed("shell", "listbookies").metadata_service_uri == "zk://zk1:2181/ledgers"


def test_a_bookie_conf_that_is_not_a_file_is_named(capsys, monkeypatch):
    monkeypatch.setenv("BOOKIE_CONF", "/no/such/bk_server.conf")
    code, _, err = run(capsys, "shell", "listbookies")
    assert code == 2 and "BOOKIE_CONF=/no/such/bk_server.conf is not a file" in err
