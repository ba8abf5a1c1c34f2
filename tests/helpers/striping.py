"""Per-bookie parts of a run of frames, for unit tests of the writer's bookkeeping (outboxes, pending adds)."""
from __future__ import annotations

import numpy as np

from bookie.client.add_batch import stripe


def stripe_frames(first: int, frames: list[bytes], write_sets: list[tuple[int, ...]]):
    """``stripe`` of ``frames`` (entries ``first..``, any bytes standing for framed entries)."""
    return stripe(first, b"".join(frames), np.array([len(f) for f in frames], dtype=np.int64), write_sets)
