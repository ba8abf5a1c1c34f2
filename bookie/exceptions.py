"""Every error this project raises, under one root: ``BKException`` (kazoo's ``kazoo/exceptions.py`` is
the model: one root, a code -> class table).

- Client errors carry BookKeeper's ``BKException.Code`` (``code``), with BookKeeper's class names;
  ``EXCEPTIONS_BY_CODE`` maps a code to its class, and ``from_status`` maps a bookie's status code to
  the exception a client raises, as BookKeeper's CompletionValue does.
- Bookie-side errors (``BookieException`` and below) carry the v3 status the server answers with.
- Configuration and process errors close the list. Every name ends in ``Exception``.

Each message says what was asked, of which ledger or bookie, and why.
"""
from __future__ import annotations

from bookie.proto import status


class BKException(Exception):
    """The root of every error this project raises."""

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


# Defined so far: exactly the classes of BookKeeper's codes (every later class refines one of them).
EXCEPTIONS_BY_CODE: dict[int, type[BKException]] = {
    cls.code: cls for cls in [*BKException.__subclasses__(), BKNoSuchLedgerExistsOnMetadataServerException]}


def from_code(code: int, message: str = "") -> BKException:
    """The exception for a BookKeeper error code (BKUnexpectedConditionException if unknown)."""
    return EXCEPTIONS_BY_CODE.get(code, BKUnexpectedConditionException)(message)


class BKMessageTooLargeException(BKIncorrectParameterException):
    """A bookie refused a message as larger than its ``nettyMaxFrameSizeBytes``. The bookie is healthy:
    the client's limit is set above the bookie's, so replacing the bookie would not help."""


class BKWrongBookieException(BKBookieHandleNotAvailableException):
    """The bookie at the address registered for bookie ``expected`` refused the request as meant for
    another bookie (it is ``actual``, when it says so): the registration points at the wrong endpoint.
    A failure of ``expected`` (writers replace it, readers ask the next replica), never retried there."""

    def __init__(self, message: str, expected: str, actual: str | None = None):
        super().__init__(message)
        self.expected, self.actual = expected, actual


class BKUnrecoverableEntriesException(BKReplicationException):
    """Re-replication found entries of a closed fragment that no surviving replica holds (write quorum
    1, or every replica lost): retrying cannot bring them back (BookKeeper #4872 retried forever)."""

    def __init__(self, message: str, first: int, last: int):
        super().__init__(message)
        self.first, self.last = first, last


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


# -- bookie side (BookieException): each carries the v3 status the server answers with ---------------
class BookieException(BKException):
    status = status.EIO


class NoLedgerException(BookieException):
    """This bookie holds nothing of the ledger."""
    status = status.ENOLEDGER


class NoEntryException(BookieException):
    """The ledger is known here but this entry is not: an answer, not a failure."""
    status = status.ENOENTRY


class EntryCorruptedException(BookieException):
    """The entry's location is known but what is stored there is not that entry: could not read, never 'absent'."""
    status = status.EIO


class EntryLogCorruptedException(BookieException):
    """An entry log record is not readable as a record (bad size, past the end of the file)."""


class IndexCorruptedException(BookieException):
    """An index file's header is not a BKLE header."""


class LedgerFencedException(BookieException):
    status = status.EFENCED


class UnauthorizedAccessException(BookieException):
    """The master key differs from the ledger's first key."""
    status = status.EUA


class ReadOnlyException(BookieException):
    """Normal adds are refused while the bookie is read-only (recovery adds still work)."""
    status = status.EREADONLY


class BadRequestException(BookieException):
    status = status.EBADREQ


class TooManyRequestsException(BookieException):
    status = status.ETOOMANYREQUESTS


class CookieException(BookieException):
    """A journal or ledger directory does not belong to this bookie as configured."""


class JournalException(BookieException):
    """The journal cannot be written or replayed."""


# -- configuration and processes ----------------------------------------------------------------------
class ConfigurationException(BKException, ValueError):
    """A configuration value (bk_server.conf key, client setting, metadataServiceUri) is missing or not
    what it allows."""


class ProcessStartException(BKException, RuntimeError):
    """A server process started here (ZooKeeper, a bookie) exited or did not listen in time."""


class PortInUseException(ProcessStartException):
    """A port a server started here must listen on is held by another process."""
