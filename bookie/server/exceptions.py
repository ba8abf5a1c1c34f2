"""Bookie-side errors. Each carries the v3 status code the server answers with (bookie.proto.status)."""
from __future__ import annotations

from bookie.proto import status


class BookieException(Exception):
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
