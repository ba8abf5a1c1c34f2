"""A BookKeeper client process on a host of a netns.Network, driven by the test over its stdin/stdout.

    python -m tests.helpers.host_client URI CLIENT_CONF_JSON [native]

With ``native``, every bookie is reached by BookKeeper's own protocol at its registered ``bookie-rpc``
endpoint (as a stock bookie would be), not by the gRPC endpoint it also registers.

One JSON command a line on stdin, one JSON answer a line on stdout ({"ok": ...} or {"error": ...}):

- ``create`` {ensemble, write_quorum, ack_quorum, bookies?}: a ledger to write; answers its id and ensemble;
- ``append`` {count}: appends the next ``count`` entries (``payload_for(ledger, id)``) without waiting;
- ``status``: {"acked": the last entry acknowledged (completions are in entry order), "failed": how many
  appends failed, "error": the first failure, "unanswered": per bookie, the entries it owes an answer for,
  "ensembles": the handle's fragments};
- ``close``: closes the ledger being written (answers its last entry);
- ``read`` {ledger, recovery}: opens the ledger (with recovery, or up to its LAC) and reads every entry,
  answering {"last", "state", "ensembles", "bad": ids whose payload is not what was written};
- ``transports``: the kinds of bookie client this process uses (``BookieClient``: gRPC, or ``NativeBookieClient``);
- ``entries_on`` {ledger, bookie}: the ids of the entries ``bookie`` holds of the ledger (its own list);
- ``exit``.

``HostClient`` is the test's side: ``call(op, **args)`` waits for the answer within a deadline.
"""
from __future__ import annotations

import json
import queue
import sys
import threading
from typing import Any

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from bookie.proto import availability, status
from tests.helpers.engine_child import payload_for
from tests.helpers.waiting import DEADLINE

PW = b"hosts"


class Writer:
    """The ledger this client writes: appends in flight, what was acknowledged, the first failure."""

    def __init__(self, bk: BookKeeper, args: dict):
        self.handle = bk.create_ledger(args["ensemble"], args["write_quorum"], args["ack_quorum"], password=PW,
                                       bookies=args.get("bookies"))
        self.ledger = LedgerId(0, self.handle.ledger_id)
        self.next_id = 0
        self.acked = -1
        self.failed = 0
        self.error: str | None = None
        self._lock = threading.Lock()

    def append(self, count: int) -> None:
        for _ in range(count):
            self.handle.append_async(payload_for(self.ledger, self.next_id)).add_done_callback(self._done)
            self.next_id += 1

    def _done(self, future) -> None:
        with self._lock:
            if future.exception() is None:
                self.acked = max(self.acked, future.result())
            else:
                self.failed += 1
                self.error = self.error or f"{type(future.exception()).__name__}: {future.exception()}"

    def status(self) -> dict:
        with self._lock:
            return {"acked": self.acked, "failed": self.failed, "error": self.error,
                    "unanswered": self.handle.unanswered(),
                    "ensembles": [[first, list(bookies)] for first, bookies in self.handle.metadata.ensembles]}


def read(bk: BookKeeper, ledger_id: int, recovery: bool) -> dict:
    with bk.open_ledger(ledger_id, PW, recovery=recovery) as reader:
        md = reader.metadata
        last = md.last_entry_id if md.is_closed else reader.last_add_confirmed
        entries = reader.read(0, last) if last >= 0 else []
        ledger = LedgerId(0, ledger_id)
        bad = [e.entry_id for i, e in enumerate(entries) if e.entry_id != i or e.payload != payload_for(ledger, i)]
        return {"last": last, "state": md.state.name, "bad": bad,
                "ensembles": [[first, list(bookies)] for first, bookies in md.ensembles]}


def entries_on(bk: BookKeeper, ledger_id: int, bookie: str) -> list[int]:
    listing = bk.bookie_client(bookie).list_entries(LedgerId(0, ledger_id))
    if listing.status == status.ENOLEDGER:
        return []
    if listing.status != status.EOK:
        raise RuntimeError(f"{bookie} could not list ledger {ledger_id}: {status.name_of(listing.status)}")
    return sorted(availability.decode(listing.availabilityOfEntriesOfLedger))


def serve(uri: str, conf: dict, transport: str) -> None:
    # native: BookKeeper's protocol at every bookie's bookie-rpc endpoint, even where it offers gRPC
    bk = BookKeeper(uri, {**conf, "bookieProtocol": "native" if transport == "native" else "auto"})
    writer: Writer | None = None
    print(json.dumps({"ok": "ready"}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        try:
            if op == "create":
                writer = Writer(bk, command)
                answer: Any = {"ledger": writer.handle.ledger_id, "ensemble": list(writer.handle.ensemble)}
            elif op == "append":
                writer.append(command["count"])
                answer = writer.next_id - 1
            elif op == "status":
                answer = writer.status()
            elif op == "close":
                writer.handle.close()
                answer = writer.handle.last_add_confirmed
            elif op == "entries_on":
                answer = entries_on(bk, command["ledger"], command["bookie"])
            elif op == "read":
                answer = read(bk, command["ledger"], command["recovery"])
            elif op == "transports":
                answer = sorted({type(bk.bookie_client(b)).__name__ for b in bk.writable_bookies()})
            elif op == "exit":
                print(json.dumps({"ok": "bye"}), flush=True)
                break
            else:
                raise ValueError(f"unknown command {op!r}")
            print(json.dumps({"ok": answer}), flush=True)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the test, which decides
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    bk.close()


# -- the test's side ---------------------------------------------------------------------------------
class HostClient:
    """A host_client process on ``host`` (stopped with the network, by PID)."""

    def __init__(self, host, uri: str, conf: dict | None = None, transport: str = "grpc"):
        import subprocess
        self.host = host
        self.proc = host.python("-m", "tests.helpers.host_client", uri, json.dumps(conf or {}), transport,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._answer(DEADLINE) == "ready"

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self._answers.put(json.loads(line))
        self._answers.put({"error": f"the client on {self.host.name} exited ({self.proc.wait()})"})

    def _answer(self, timeout: float) -> Any:
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the client on {self.host.name} did not answer within {timeout:.0f} s") from None
        if "error" in answer:
            raise ClientError(answer["error"])
        return answer["ok"]

    def call(self, op: str, timeout: float = DEADLINE, **args) -> Any:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return self._answer(timeout)


class ClientError(Exception):
    """What the client process answered instead of a result."""


if __name__ == "__main__":
    serve(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "grpc")
