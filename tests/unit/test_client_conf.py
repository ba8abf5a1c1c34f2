"""ClientConfiguration: BookKeeper's key names; unknown keys and bad values are refused by name."""
from __future__ import annotations

import pytest

from bookie.client.conf import ClientConfiguration
from bookie.exceptions import ConfigurationException

pytestmark = pytest.mark.unit


def test_allocator_pooling_policy_takes_bookkeepers_two_values():
    assert ClientConfiguration().allocatorPoolingPolicy == "PooledDirect"  # BookKeeper's default
    assert ClientConfiguration.of(allocatorPoolingPolicy="UnpooledHeap").allocatorPoolingPolicy == "UnpooledHeap"
    with pytest.raises(ConfigurationException, match="'Pooled' is not one of PooledDirect, UnpooledHeap"):
        ClientConfiguration.of(allocatorPoolingPolicy="Pooled")


def test_unknown_keys_are_named():
    with pytest.raises(ConfigurationException, match=r"unknown client configuration keys \['readBatchByte'\]"):
        ClientConfiguration.of(readBatchByte=1)
