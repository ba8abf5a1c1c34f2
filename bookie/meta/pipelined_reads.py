"""Many reads in flight at once (a recipe, as kazoo keeps its own apart from the client).

ZooKeeper answers a session's requests in order, and one round trip costs far more than the server's work
on a small znode: reading 100,000 ledgers one at a time is 100,000 round trips back to back. ``pipelined``
keeps up to ``window`` requests sent and not yet answered, handing the answers back in the order the items
came, so a caller walks every ledger in a few round trips' time with at most ``window`` answers held.
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Iterable, Iterator, TypeVar

Item = TypeVar("Item")
Sent = TypeVar("Sent")
Answer = TypeVar("Answer")

READ_WINDOW = 1000  # requests in flight per walk: enough to keep ZooKeeper busy, few enough to hold in memory


def pipelined(items: Iterable[Item], send: Callable[[Item], Sent], receive: Callable[[Item, Sent], Answer],
              window: int = READ_WINDOW) -> Iterator[tuple[Item, Answer]]:
    """``(item, receive(item, send(item)))`` for each item, in order, with up to ``window`` sent ahead of the
    one being received. ``send`` starts a request and returns its handle (kazoo's ``*_async``); ``receive``
    waits for it and turns it into the answer (or raises, which ends the walk)."""
    if window < 1:
        raise ValueError(f"window must be at least 1 (got {window})")
    pending: deque[tuple[Item, Sent]] = deque()
    for item in items:
        pending.append((item, send(item)))
        if len(pending) >= window:
            done, handle = pending.popleft()
            yield done, receive(done, handle)
    while pending:
        done, handle = pending.popleft()
        yield done, receive(done, handle)
