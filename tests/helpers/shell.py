"""``bk shell`` run as an operator runs it: a subprocess against a cluster's metadata service."""
from __future__ import annotations

import subprocess
import sys


def bk_shell_run(cluster, *args: str) -> subprocess.CompletedProcess:
    """``bk shell ARGS -u URI``: its exit code and output, whatever they are."""
    return subprocess.run([sys.executable, "-m", "bookie.cli.main", "shell", *args, "-u", cluster.metadata_service_uri],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def bk_shell(cluster, *args: str) -> str:
    """``bk shell ARGS -u URI``, which must succeed: its standard output."""
    result = bk_shell_run(cluster, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout
