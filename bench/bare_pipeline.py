"""The bare pipeline: the ceiling bench/client.py measures ``append_batch`` against.

A Python writer sends pre-framed 256-entry batches over gRPC (one add stream per bookie) to three
journal-only servicers (bench/bare_journal_bookie.py: write, group fsync, ack), counting a batch once
``ack_quorum`` of them acknowledged it, ``in_flight`` batches pending: what the client does, without
the client (no framing, no per-entry bookkeeping) and without a bookie's storage.
"""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import grpc

from bookie.client.bookie_client import ADD_ENTRIES, encode_add_request
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.util.processes import free_port, stop_process, wait_for_port

SERVICER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bare_journal_bookie.py")
_CLOSE = object()


@dataclass
class PipelineResult:
    entries: int
    seconds: float
    cpu_seconds: float  # this process's CPU over the measured window

    @property
    def rate(self) -> float:
        return self.entries / self.seconds

    @property
    def cpu_us_per_entry(self) -> float:
        return self.cpu_seconds / self.entries * 1e6


@contextmanager
def bare_servicers(base: str, count: int = 3):
    """``count`` journal-only servicer processes (each its own file under ``base``): their addresses."""
    procs, addresses = [], []
    try:
        for i in range(count):
            port = free_port()
            procs.append(subprocess.Popen([sys.executable, SERVICER, str(port), os.path.join(base, f"bare-journal-{i}")],
                                          start_new_session=True, stdout=subprocess.DEVNULL))
            wait_for_port(port, procs[-1], 30, "bare journal servicer")
            addresses.append(f"127.0.0.1:{port}")
        yield addresses
    finally:
        for proc in procs:
            stop_process(proc)


def run_writer(addresses: list[str], seconds: float, entry_size: int = 1024, batch: int = 256, in_flight: int = 16,
               ack_quorum: int = 2, ledger: LedgerId = LedgerId.of(1)) -> PipelineResult:
    """Stream pre-framed batches of ``ledger`` to every address for ``seconds``; acknowledged entries/s."""
    digest = DigestManager(ledger, b"bench")
    payload = os.urandom(entry_size)
    # Pre-framed batches: no framing in the measured loop. Entry ids repeat every 64 batches; the
    # servicers do not look. Each send encodes its AddRequest as the client does (encode_add_request).
    key, blobs, length = generate_master_key(b"bench"), [], 0
    for b in range(64):
        blob, length = digest.build_framed(b * batch, b * batch - 1, length, [payload] * batch)
        blobs.append(blob)
    room = threading.Semaphore(in_flight)
    lock = threading.Lock()
    acks: dict[int, int] = {}
    done = [0]
    errors: list[str] = []
    channels, queues, threads = [], [], []

    def receive(responses) -> None:
        try:
            for message in responses:
                for response in message.responses:
                    if response.status != status.EOK:
                        errors.append(f"{status.name_of(response.status)} {response.message}")
                    with lock:
                        count = acks[response.txnId] = acks[response.txnId] + 1
                        if count == len(addresses):
                            del acks[response.txnId]
                    if count == ack_quorum:
                        done[0] += batch
                        room.release()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                errors.append(str(exc))
                room.release()
                room.release(in_flight)  # the writer stops: nothing waits for acks any more

    for address in addresses:
        channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
        add = channel.stream_stream(ADD_ENTRIES, request_serializer=None,
                                    response_deserializer=pb.AddResponses.FromString)
        requests: "queue.SimpleQueue[bytes]" = queue.SimpleQueue()
        responses = add(iter(requests.get, _CLOSE))
        thread = threading.Thread(target=receive, args=(responses,), daemon=True)
        thread.start()
        channels.append((channel, responses))
        queues.append(requests)
        threads.append(thread)
    sent = 0
    now = time.perf_counter
    cpu0, start = time.process_time(), now()
    end = start + seconds
    while now() < end and not errors:
        room.acquire()
        sent += 1
        with lock:
            acks[sent] = 0
        request = encode_add_request(sent, ledger, key, False, blobs[sent % len(blobs)])
        for requests in queues:
            requests.put(request)
    for _ in range(in_flight):  # the last batches
        if errors:
            break
        room.acquire()
    elapsed, cpu = now() - start, time.process_time() - cpu0
    for (channel, responses), requests in zip(channels, queues):
        requests.put(_CLOSE)
        responses.cancel()
        channel.close()
    if errors:
        raise RuntimeError(f"bare pipeline: {errors[0]}")
    return PipelineResult(done[0], elapsed, cpu)

