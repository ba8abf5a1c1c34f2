"""Starting and stopping server processes: own process group, stopped by PID, never by name."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable

from bookie.exceptions import ProcessStartException


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_taken(host: str, port: int) -> bool:
    """Whether something listens on (or holds) ``host:port`` now: a bind with SO_REUSEADDR fails only then."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_ports(count: int, taken: Iterable[int] = ()) -> list[int]:
    """``count`` distinct free ports, none of them in ``taken``. The kernel may hand the same free port
    out twice in a row once it is closed again, and two bookies of one cluster on one port share a bookie
    id (and its cookie)."""
    excluded = set(taken)
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in excluded:
            excluded.add(port)
            ports.append(port)
    return ports


def wait_for_port(port: int, proc: subprocess.Popen | None, timeout: float, what: str, log_path: str | None = None) -> None:
    """Wait until 127.0.0.1:port accepts connections; fail early if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ProcessStartException(f"{what} exited with code {proc.returncode} before listening on port {port}"
                               + (f":\n{tail(log_path)}" if log_path else ""))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ProcessStartException(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s"
                       + (f":\n{tail(log_path)}" if log_path else ""))


def tail(path: str | None, lines: int = 20) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def stop_process(proc: subprocess.Popen, timeout: float = 15.0, sig: int = signal.SIGTERM) -> int:
    """Signal the process group led by ``proc`` (by PID), escalate to SIGKILL after ``timeout``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout if sig != signal.SIGKILL else 30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode
