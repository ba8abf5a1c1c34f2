"""The reference pages under docs/reference/ are what docs/generate_reference.py renders from the code (run
`make reference` after changing a key, an option or a command), and every key, option and flag says what it
means."""
from __future__ import annotations

import argparse
import importlib.util
import os
from dataclasses import fields

import pytest

from tests.procs import ROOT

pytestmark = pytest.mark.unit


def _generator():
    spec = importlib.util.spec_from_file_location("generate_reference", os.path.join(ROOT, "docs", "generate_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_pages_are_fresh():
    assert _generator().stale() == [], "docs/reference/ is stale: run `make reference`"


def test_every_key_option_and_flag_has_a_meaning():
    from bookie.cli.audit_commands import AUDITS
    from bookie.cli.audit_commands import parser as audit_parser
    from bookie.cli.main import build_parser
    from bookie.client.conf import ClientConfiguration
    from bookie.server.conf import OPTIONS
    from spark_bookkeeper.options import READ_OPTIONS, WRITE_OPTIONS
    assert [name for name, option in OPTIONS.items() if not option.doc.strip()] == []
    assert [f.name for f in fields(ClientConfiguration) if not f.metadata.get("doc")] == []
    assert [name for name, doc in {**READ_OPTIONS, **WRITE_OPTIONS}.items() if not doc.strip()] == []
    generator = _generator()
    undocumented = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for name, help_text, sub in generator._subcommands(parser):
            if not help_text:
                undocumented.append(f"{prefix} {name}")
            walk(f"{prefix} {name}", sub)
        for action in parser._actions:
            if not action.help and not isinstance(action, argparse._SubParsersAction):
                undocumented.append(f"{prefix} {'/'.join(action.option_strings) or action.dest}")
    walk("bk", build_parser())
    for audit in AUDITS:
        walk(f"bk audit {audit}", audit_parser(audit))
    assert undocumented == []
