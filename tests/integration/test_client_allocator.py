"""A BookKeeper client keeps freed multi-megabyte buffers for reuse (allocatorPoolingPolicy=PooledDirect,
BookKeeper's default) and leaves the C allocator alone with UnpooledHeap: each in a fresh client process."""
from __future__ import annotations

import platform
import uuid

import pytest

from bookie.meta.zk_metadata_store import ZKMetadataStore
from tests.procs import child

CLIENT = """
import sys
from bookie.client import BookKeeper
from bookie.util import allocator
with BookKeeper(sys.argv[1], allocatorPoolingPolicy=sys.argv[2]):
    print(allocator._tuned)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
@pytest.mark.parametrize("policy,tuned", [("PooledDirect", "True"), ("UnpooledHeap", "None")])
def test_the_pooling_policy_decides_whether_the_client_tunes_the_allocator(zookeeper, policy, tuned):
    uri = f"zk://{zookeeper.connect_string}/ledgers-{uuid.uuid4().hex[:8]}"
    store = ZKMetadataStore(uri)
    store.init_new_cluster()
    store.close()
    with child("-c", CLIENT, uri, policy) as proc:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == tuned
