"""Bookie status codes, with the names and values of BookKeeper's v3 protocol (BookkeeperProtocol.proto)."""

EOK = 0
ENOLEDGER = 402
ENOENTRY = 403
EBADREQ = 404
EIO = 501
EUA = 502  # bad master key
EBADVERSION = 503
EFENCED = 504
EREADONLY = 505
ETOOMANYREQUESTS = 506
EUNKNOWNLEDGERSTATE = 507

NAMES = {value: name for name, value in dict(globals()).items() if name.startswith("E") and isinstance(value, int)}


def name_of(code: int) -> str:
    return NAMES.get(code, f"status {code}")
