"""Items in lists of a fixed size (``itertools.batched`` of Python 3.12, as lists)."""
from __future__ import annotations

from itertools import islice
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last may be shorter), taken lazily."""
    if size < 1:
        raise ValueError(f"chunk size must be at least 1 (got {size})")
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk
