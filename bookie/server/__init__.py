"""The bookie server: journal, entry logs, index, ledger cache, sync thread, cookies, read-only mode."""
from bookie.server.bookie import Bookie
from bookie.server.conf import ServerConfiguration

__all__ = ["Bookie", "ServerConfiguration"]
