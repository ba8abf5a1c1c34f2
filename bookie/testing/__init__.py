"""A development harness, apart from the runtime code (kazoo's ``kazoo.testing`` is the model).

``ZooKeeperServer`` runs a real Apache ZooKeeper from the jars in the pyspark wheel; ``LocalBookKeeper``
runs it with N bookie processes on loopback. ``bk local``, the tests, the benchmarks and the demo use
them; a bookie or a client never does.
"""
