"""Child processes for tests: each in its own process group, always stopped by PID."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env() -> dict:
    """The environment of a child Python: this checkout first on its path, output unbuffered."""
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")


def spawn_python(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=child_env(), **kwargs)


def kill(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal the child's process group (by PID) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


@contextmanager
def child(*args: str, **kwargs):
    proc = spawn_python(*args, **kwargs)
    try:
        yield proc
    finally:
        kill(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
