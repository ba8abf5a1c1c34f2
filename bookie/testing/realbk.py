"""A real Apache BookKeeper next to this project: Java bookies, BookieShell and the Java client tool of
a BookKeeper install (``realbk``: bin/bookie, bin/shell, bin/client), run against a ZooKeeper.

Found through ``$REALBK_HOME`` or ``../shared/realbk`` next to the repository (``find_realbk``); the
tools take their common jars from pyspark's (REALBK_PYTHON = this interpreter). Every process runs
in its own process group and is stopped by PID; bookies bind 127.0.0.1 only, each with its
``java.io.tmpdir`` in its own directory (the native libraries a SIGKILLed JVM unpacked stay there). Interop
tests and benchmarks use it; ``SKIP_REASON`` says how to get one where there is none.
"""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable

from bookie.exceptions import ProcessStartException
from bookie.util.processes import free_ports, stop_process, tail, wait_for_port

REALBK_HOME = "REALBK_HOME"
SKIP_REASON = (f"no real BookKeeper: set {REALBK_HOME} to an Apache BookKeeper install with the realbk tools "
               "(bin/bookie, bin/shell, bin/client), or put the realbk folder at ../shared/realbk next to the "
               "repository (Java 11+ on PATH)")
# bin/bookie's default is a 512 MB heap: small enough for several bookies on a 2-core CI machine.
BOOKIE_JAVA_OPTS = "-Xms64m -Xmx128m -XX:MaxDirectMemorySize=128m -XX:+UseSerialGC"
BOOKIE_READY = "Started component bookie-server"
TOOL_TIMEOUT = 300.0


def find_realbk() -> pathlib.Path | None:
    """The BookKeeper install to use: $REALBK_HOME, else ../shared/realbk beside the repository."""
    candidates = [os.environ.get(REALBK_HOME, "")]
    candidates.append(str(pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "realbk"))
    for candidate in candidates:
        if candidate and (pathlib.Path(candidate) / "bin" / "bookie").is_file():
            return pathlib.Path(candidate)
    return None


def payload(i: int, size: int = 0) -> bytes:
    """What realbk's ``client write`` writes as entry ``i`` and ``client verify`` expects."""
    p = b"entry-%d" % i
    if size <= 0:
        return p
    p += b"|"
    while len(p) < size:
        p += b"abcdefghijklmnopqrstuvwxyz"
    return p[:size]


class JavaBookie:
    """One Java bookie process: its port, directory and log."""

    def __init__(self, home: pathlib.Path, uri: str, base_dir: str, port: int, env: dict[str, str]):
        self.home, self.uri, self.dir, self.port, self.env = home, uri, base_dir, port, env
        self.log_path = os.path.join(base_dir, "bookie.log")
        self.proc: subprocess.Popen | None = None

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> "JavaBookie":
        tmp = os.path.join(self.dir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        # Its temporary files (the native libraries it unpacks) stay in its directory: a SIGKILLed JVM leaves them.
        env = {**self.env, "BOOKIE_JAVA_OPTS": f"{self.env.get('BOOKIE_JAVA_OPTS', BOOKIE_JAVA_OPTS)} -Djava.io.tmpdir={tmp}"}
        offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(self.home / "bin" / "bookie"), "--port", str(self.port), "--metadata-service-uri", self.uri,
                 "--dir", self.dir], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
        try:
            wait_for_port(self.port, self.proc, timeout, f"Java bookie {self.bookie_id}", self.log_path)
            deadline = time.monotonic() + timeout
            while not self._logged(BOOKIE_READY, offset):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise ProcessStartException(f"Java bookie {self.bookie_id} did not start:\n{tail(self.log_path)}")
                time.sleep(0.1)
        except ProcessStartException:
            self.stop(signal.SIGKILL)
            raise
        return self

    def _logged(self, text: str, offset: int) -> bool:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return text.encode() in f.read()

    def kill(self) -> None:
        """SIGKILL, by PID (its process group)."""
        self.stop(signal.SIGKILL)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig=sig)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class RealBookKeeper:
    """Java bookies on ``zookeeper`` (host:port) under their own root, initialised by BookieShell.
    ``taken_ports``: ports of other bookies on the same root (a mixed cluster), which these must not take."""

    def __init__(self, zookeeper: str, base_dir: str, num_bookies: int = 3, root: str | None = None,
                 home: pathlib.Path | None = None, java_opts: str = BOOKIE_JAVA_OPTS, taken_ports: Iterable[int] = ()):
        found = home or find_realbk()
        if found is None:
            raise ProcessStartException(SKIP_REASON)
        self.home = found
        self.base_dir = base_dir
        self.root = root or f"/realbk-{uuid.uuid4().hex[:8]}"
        self.metadata_service_uri = f"zk://{zookeeper}{self.root}"
        self.env = {**os.environ, "REALBK_PYTHON": sys.executable, "BOOKIE_JAVA_OPTS": java_opts}
        self.bookies = [JavaBookie(self.home, self.metadata_service_uri, os.path.join(base_dir, f"bookie{i}"),
                                   port, self.env) for i, port in enumerate(free_ports(num_bookies, taken_ports))]

    def start(self, init_cluster: bool = True) -> "RealBookKeeper":
        """Initialise the root (BookieShell initnewcluster) unless ``init_cluster`` is false: Java bookies
        then join a root someone else laid out (e.g. LocalBookKeeper's, for a mixed cluster)."""
        try:
            if init_cluster:
                self.shell("initnewcluster")
            for bookie in self.bookies:
                bookie.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for bookie in self.bookies:
            bookie.stop()

    def __enter__(self) -> "RealBookKeeper":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the Java tools ------------------------------------------------------------------------------
    def spawn(self, tool: str, *args: str) -> subprocess.Popen:
        """Start ``bin/<tool> args`` in its own process group (stdout/stderr piped); the caller stops it."""
        return subprocess.Popen([str(self.home / "bin" / tool), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)

    def run(self, tool: str, *args: str, check: bool = True, timeout: float = TOOL_TIMEOUT) -> subprocess.CompletedProcess:
        """Run ``bin/<tool> args`` to its end; stopped by PID if it outlives ``timeout`` or the caller fails."""
        proc = self.spawn(tool, *args)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            stop_process(proc, sig=signal.SIGKILL)
        result = subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())
        if check and result.returncode != 0:
            raise ProcessStartException(f"{tool} {' '.join(args)} exited with {result.returncode}:\n"
                                        f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
        return result

    def client(self, command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """realbk's Java client tool: ``write``/``verify``/``read``/``info``/``delete`` on this cluster."""
        return self.run("client", command, self.metadata_service_uri, *args, check=check)

    def shell(self, command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """BookKeeper's BookieShell on this cluster."""
        return self.run("shell", "-u", self.metadata_service_uri.replace("zk://", "zk+hierarchical://", 1), command,
                        *args, check=check)
