"""BKException and its subclasses, with BookKeeper's names and codes (BKException.Code, reference §3.7).

Each message says what was asked, of which ledger or bookie, and why. ``from_status`` maps a bookie's
status code to the exception a client raises, as BookKeeper's CompletionValue does.
"""
from __future__ import annotations

from bookie.proto import status


class BKException(Exception):
    code = -999  # UnexpectedConditionException

    def __init__(self, message: str = ""):
        super().__init__(message or type(self).__name__)

    @property
    def message(self) -> str:
        return str(self)


class BKReadException(BKException): code = -1
class BKQuorumException(BKException): code = -2
class BKNoBookieAvailableException(BKException): code = -3
class BKDigestNotInitializedException(BKException): code = -4
class BKDigestMatchException(BKException): code = -5
class BKNotEnoughBookiesException(BKException): code = -6
class BKNoSuchLedgerExistsException(BKException): code = -7
class BKBookieHandleNotAvailableException(BKException): code = -8
class BKZKException(BKException): code = -9
class BKLedgerRecoveryException(BKException): code = -10
class BKLedgerClosedException(BKException): code = -11
class BKWriteException(BKException): code = -12
class BKNoSuchEntryException(BKException): code = -13
class BKIncorrectParameterException(BKException): code = -14
class BKInterruptedException(BKException): code = -15
class BKProtocolVersionException(BKException): code = -16
class BKMetadataVersionException(BKException): code = -17
class BKMetaStoreException(BKException): code = -18
class BKClientClosedException(BKException): code = -19
class BKLedgerExistException(BKException): code = -20
class BKAddEntryQuorumTimeoutException(BKException): code = -21
class BKDuplicateEntryIdException(BKException): code = -22
class BKTimeoutException(BKException): code = -23
class BKSecurityException(BKException): code = -24
class BKNoSuchLedgerExistsOnMetadataServerException(BKNoSuchLedgerExistsException): code = -25
class BKIllegalOpException(BKException): code = -100
class BKLedgerFencedException(BKException): code = -101
class BKUnauthorizedAccessException(BKException): code = -102
class BKUnclosedFragmentException(BKException): code = -103
class BKWriteOnReadOnlyBookieException(BKException): code = -104
class BKTooManyRequestsException(BKException): code = -105
class BKLedgerIdOverflowException(BKException): code = -106
class BKMetadataSerializationException(BKException): code = -107
class BKDataUnknownException(BKException): code = -108
class BKReplicationException(BKException): code = -200
class BKUnexpectedConditionException(BKException): code = -999


class BKMessageTooLargeException(BKIncorrectParameterException):
    """A bookie refused a message as larger than its ``nettyMaxFrameSizeBytes``. The bookie is healthy:
    the client's limit is set above the bookie's, so replacing the bookie would not help."""


class BKZKConnectionLossException(BKZKException):
    """ZooKeeper lost the connection (or the session) while a request was in flight: the request may or may
    not have been applied. Callers that changed something re-read to find out (MetadataUpdateLoop)."""


_BY_STATUS: dict[int, type[BKException]] = {
    status.ENOENTRY: BKNoSuchEntryException,
    status.ENOLEDGER: BKNoSuchLedgerExistsException,
    status.EBADVERSION: BKProtocolVersionException,
    status.EUA: BKUnauthorizedAccessException,
    status.EFENCED: BKLedgerFencedException,
    status.EREADONLY: BKWriteOnReadOnlyBookieException,
    status.ETOOMANYREQUESTS: BKTooManyRequestsException,
    status.EUNKNOWNLEDGERSTATE: BKDataUnknownException,
}


def from_status(code: int, default: type[BKException], message: str) -> BKException:
    """The client exception for a bookie status (anything unmapped: the operation's default)."""
    return _BY_STATUS.get(code, default)(f"{message} ({status.name_of(code)})")
