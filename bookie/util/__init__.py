"""Process helpers shared by servers, the local cluster and tests."""
