"""ZooKeeper's multiRead: the data of many znodes in one request (a recipe beside kazoo, which lacks the op).

ZooKeeper 3.6 added ``multiRead`` (OpCode 22, ``ZooKeeper.multi`` of ``Op.getData``): one request carries many
getData ops and one answer carries each znode's data and stat, or its own error (a missing znode fails only
itself, unlike a write ``multi``). Reading 10,000 ledger znodes pipelined with ``get_async`` costs a request
each on both sides (kazoo wakes its connection thread per request); in batches of ``MULTI_READ_BATCH`` it is
a few dozen requests.

A server older than 3.6 answers the unknown op by closing the session (ZooKeeper's
UnimplementedRequestProcessor), which would cost a caller its ephemeral znodes: ``supports_multi_read`` asks
the connected server's version first (the ``srvr`` four-letter word, whitelisted by default) and says no
when it cannot tell.
"""
from __future__ import annotations

import logging
import re
from typing import Iterable, Iterator, NamedTuple, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, KazooException
from kazoo.protocol.serialization import (GetData, ZnodeStat, int_struct, multiheader_struct, read_buffer,
                                          stat_struct)

from bookie.meta.pipelined_reads import READ_WINDOW, pipelined
from bookie.util.chunks import chunks

log = logging.getLogger(__name__)
Item = TypeVar("Item")

MULTI_READ = 22  # ZooDefs.OpCode.multiRead
ERROR = -1  # ZooDefs.OpCode.error: the op's own result is an error code
MULTI_READ_SINCE = (3, 6)
MULTI_READ_BATCH = 500  # paths per request: ~150 KiB of answer for ledger znodes, far below jute.maxbuffer (1 MiB)
VERSION_LINE = re.compile(r"Zookeeper version: (\d+)\.(\d+)")


class MultiRead(NamedTuple):
    """A kazoo request (``KazooClient._call``) of getData ops; its answer: per path ``(data, ZnodeStat)`` or the
    kazoo exception of that path's error (NoNodeError for a missing znode)."""
    paths: tuple[str, ...]
    type = MULTI_READ

    def serialize(self) -> bytearray:
        out = bytearray()
        for path in self.paths:  # MultiOperationRecord: each op's MultiHeader, then its GetDataRequest
            out += multiheader_struct.pack(GetData.type, False, -1)
            out += GetData(path, None).serialize()
        out += multiheader_struct.pack(-1, True, -1)
        return out

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[tuple[bytes, ZnodeStat] | KazooException]:
        results: list[tuple[bytes, ZnodeStat] | KazooException] = []
        while True:  # MultiResponse: each result's MultiHeader, then its body; a done header ends it
            kind, done, _ = multiheader_struct.unpack_from(buffer, offset)
            offset += multiheader_struct.size
            if done:
                return results
            if kind == GetData.type:
                data, offset = read_buffer(buffer, offset)
                results.append((data, ZnodeStat._make(stat_struct.unpack_from(buffer, offset))))
                offset += stat_struct.size
            elif kind == ERROR:
                code = int_struct.unpack_from(buffer, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead answer with an op of type {kind}: only getData ({GetData.type}) was sent")


def multi_read_async(zk: KazooClient, paths: list[str]):
    """Send one multiRead of ``paths`` (as the caller names them: kazoo's chroot is added); kazoo's async result."""
    result = zk.handler.async_result()
    zk._call(MultiRead(tuple(zk.chroot + p if zk.chroot else p for p in paths)), result)  # kazoo's request path
    return result


def server_version(answer: str) -> tuple[int, int] | None:
    """(major, minor) from a ``srvr`` answer; None when the answer has no version line (refused, not whitelisted)."""
    match = VERSION_LINE.search(answer)
    return (int(match.group(1)), int(match.group(2))) if match else None


def supports_multi_read(zk: KazooClient) -> bool:
    """Whether the connected ZooKeeper server has multiRead (3.6+), by its ``srvr`` answer; False when unknown."""
    try:
        version = server_version(zk.command(b"srvr"))
    except (KazooException, OSError) as exc:
        log.info("ZooKeeper's version unknown (srvr: %s): ledger metadata is read one request per ledger", exc)
        return False
    if version is None:
        log.info("ZooKeeper's srvr answer has no version (4lw.commands.whitelist?): ledger metadata is read one "
                 "request per ledger")
        return False
    return version >= MULTI_READ_SINCE


def read_many(zk: KazooClient, items: Iterable[tuple[Item, str]], batch: int = MULTI_READ_BATCH,
              window: int = READ_WINDOW) -> Iterator[tuple[Item, tuple[bytes, ZnodeStat] | Exception]]:
    """Each ``(item, path)`` with its znode's ``(data, stat)`` or its error (the op's own, or the whole request's
    when that failed, e.g. ConnectionLoss), in order: ``batch`` paths per multiRead, up to ``window`` paths in
    flight (bookie.meta.pipelined_reads)."""
    def send(chunk: list[tuple[Item, str]]):
        return multi_read_async(zk, [path for _, path in chunk])

    def receive(chunk: list[tuple[Item, str]], result) -> list:
        try:
            answers = result.get()
        except Exception as exc:  # the whole request failed: each of its paths gets the error
            return [exc] * len(chunk)
        if len(answers) != len(chunk):
            raise ValueError(f"multiRead answered {len(answers)} ops for {len(chunk)} paths")
        return answers

    for chunk, answers in pipelined(chunks(items, batch), send, receive, max(1, window // batch)):
        yield from zip((item for item, _ in chunk), answers)

