"""128-bit ledger ids (BookKeeper Proposal BP-35).

A ledger is named by ``(scope_id, ledger_id)``: the most and least significant 64 bits of a 128-bit id.
Scope 0 is the common case and is exactly BookKeeper's 63-bit ledger id. The *qualified name* is the
128-bit id as 32 hex digits, for CLI tools and logs.
"""
from __future__ import annotations

import uuid
from typing import NamedTuple

MAX_ID = (1 << 63) - 1  # ids travel as signed int64 (Java long); negative ids are never valid


class LedgerId(NamedTuple):
    """A ledger's 128-bit id. A NamedTuple, so it is a cheap dict key on the hot path."""

    scope_id: int
    ledger_id: int

    @classmethod
    def of(cls, ledger_id: int, scope_id: int = 0) -> "LedgerId":
        for name, value in (("ledger id", ledger_id), ("scope id", scope_id)):
            if not isinstance(value, int) or not 0 <= value <= MAX_ID:
                raise ValueError(f"{name} must be an integer in [0, 2^63-1], got {value!r}")
        return cls(scope_id, ledger_id)

    @classmethod
    def coerce(cls, ledger: "LedgerId | int") -> "LedgerId":
        """A LedgerId as is; an int as BookKeeper's 64-bit id, i.e. scope 0."""
        return ledger if isinstance(ledger, LedgerId) else cls.of(ledger)

    @classmethod
    def from_qualified_name(cls, name: str) -> "LedgerId":
        """Parse the 32-hex-digit qualified name (``--ledger-qualified-name``)."""
        text = name.strip().lower().removeprefix("0x")
        if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
            raise ValueError(f"a ledger qualified name is 32 hex digits (scope id then ledger id), got {name!r}")
        return cls.of(int(text[16:], 16), int(text[:16], 16))

    @classmethod
    def from_uuid(cls, value: uuid.UUID) -> "LedgerId":
        """Split a UUID into (scope, id) as BP-35 suggests; the sign bit of each half is cleared."""
        n = value.int
        return cls((n >> 64) & MAX_ID, n & MAX_ID)

    @property
    def qualified_name(self) -> str:
        return f"{self.scope_id:016x}{self.ledger_id:016x}"

    def __str__(self) -> str:
        return str(self.ledger_id) if self.scope_id == 0 else self.qualified_name
