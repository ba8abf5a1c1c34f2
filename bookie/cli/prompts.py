"""Questions a ``bk`` command asks before it destroys something (BookKeeper's IOUtils.confirmPrompt): asked only
on a terminal; elsewhere the command refuses and names the flag that skips the question."""
from __future__ import annotations

import sys

from bookie.exceptions import ConfigurationException


def confirm(question: str, command: str, force_flag: str = "-f") -> bool:
    """True when the operator answers Y to ``question``; ConfigurationException when no one can answer."""
    if not sys.stdin.isatty():
        raise ConfigurationException(f"{command} asks for confirmation and this is not a terminal: pass {force_flag} "
                                     "to go ahead without asking")
    return input(f"{question} (Y or N) ").strip().upper() == "Y"
