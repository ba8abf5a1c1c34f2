"""Children of znodes kept until their watch fires (BookKeeper's SubTreeCache), for a walker that lists the
same inner levels of a tree again and again (the under-replication tree a ReplicationWorker walks for work).
"""
from __future__ import annotations

import functools
import threading
from typing import Callable

from bookie.meta.metadata_store import MetadataStore


class SubTreeCache:
    def __init__(self, store: MetadataStore, on_change: Callable[[], None]):
        self.store = store
        self.on_change = on_change  # told of every change seen, after the cache forgot the level
        self._children: dict[str, list[str]] = {}
        self._watchers: dict[str, Callable[[], None]] = {}  # one per path: the store keeps one watcher each
        self._epoch = 0  # bumped by every invalidation: a listing raced by one is not kept
        self._lock = threading.Lock()

    def children(self, path: str) -> list[str]:
        """The children of ``path``, listed (with a watch) unless known since the last change."""
        with self._lock:
            found = self._children.get(path)
            if found is not None:
                return found
            watcher = self._watchers.setdefault(path, functools.partial(self._changed, path))
            epoch = self._epoch
        children = self.store.node_children(path, watcher)
        with self._lock:
            # Kept if no watch fired meanwhile; never an empty level: it may be a node just deleted, which
            # left no watch, and an empty level is deleted soon anyway.
            if children and self._epoch == epoch:
                self._children[path] = children
        return children

    def clear(self) -> None:
        """Forget every level (a session that expired lost its watches)."""
        with self._lock:
            self._children.clear()
            self._epoch += 1

    def _changed(self, path: str) -> None:
        with self._lock:
            self._children.pop(path, None)
            self._epoch += 1
        self.on_change()
