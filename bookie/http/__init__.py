"""BookKeeper's HTTP admin API (HttpRouter's routes, BKHttpServiceProvider's services) over aiohttp.

Layering: proto → meta → server / client → replication → http → cli. The services read the bookie
(server), the cluster (meta, client) and AutoRecovery (replication); ``bk bookie`` and
``bk autorecovery`` (cli) start the server.
"""
