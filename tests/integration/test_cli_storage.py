"""`bk shell lastmark / readjournal / readlog` on the files of a stopped bookie."""
from __future__ import annotations

import subprocess
import sys

from bookie.server.journal import list_journal_ids
from tests.helpers.disk_faults import flip_byte
from tests.helpers.engine_ops import engine_settings, run_then_sigkill
from tests.helpers.journal_files import journal_with_groups
from tests.procs import ROOT


def bk(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", *args], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_inspection_commands(tmp_path):
    settings = engine_settings(tmp_path)
    run_then_sigkill(settings, [["add", 0, 5, 3], ["checkpoint", 0, 0, 0], ["fence", 0, 5, 0], ["add", 2, 6, 2]])
    dirs = ["--journal-dir", settings["journalDirectories"], "--ledger-dir", settings["ledgerDirectories"]]
    journal_id = list_journal_ids(settings["journalDirectories"])[-1]

    assert f"Journal Id - {journal_id:x}" in bk("shell", "lastmark", *dirs)
    dump = bk("shell", "readjournal", f"{journal_id:x}", *dirs)
    assert "Ledger: 5  ledger key" in dump and "Ledger: 5  fence" in dump and "Entry: 2" in dump
    assert "Ledger: 00000000000000020000000000000006  Entry: 1" in dump
    log = bk("shell", "readlog", "0", *dirs)
    assert log.count("Lid=5,") == 3 and "Eid=2," in log
    assert bk("shell", "readlog", "0", "-e", "1", *dirs).count("Lid=") == 1


def test_readjournal_shows_mid_journal_corruption_and_what_follows_it(tmp_path):
    settings, path, ends = journal_with_groups(tmp_path, 3)
    flip_byte(path, ends[0] + 60, 0x04)  # inside group 2 of 3: corruption, not a torn tail
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", "shell", "readjournal", path], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"CORRUPT: {path} is corrupt at byte {ends[0]}" in out.stdout
    assert "Entry: 9" in out.stdout and "Entry: 29" in out.stdout and "Entry: 15" not in out.stdout
