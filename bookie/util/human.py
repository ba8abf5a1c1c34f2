"""Values as a person reads them: byte counts in binary units, custom-metadata bytes as text where they are text."""
from __future__ import annotations

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def human_bytes(count: int | None) -> str | None:
    """``count`` bytes in the largest binary unit it fills: ``"512 B"``, ``"1.5 KiB"``, ``"931.3 GiB"``; None
    stays None (a size nobody reported)."""
    if count is None:
        return None
    power = min(max(int(abs(count)).bit_length() - 1, 0) // 10, len(BYTE_UNITS) - 1)
    if power == 0:
        return f"{count} B"
    return f"{count / 1024 ** power:.1f} {BYTE_UNITS[power]}"


def text_or_hex(value: bytes) -> str:
    """``value`` as text when it is UTF-8 of printable characters (tabs and line breaks allowed), else its bytes
    in hex behind ``0x`` (``b"\\x00\\xff"`` is ``"0x00ff"``)."""
    text = printable_utf8(value)
    return text if text is not None else "0x" + value.hex()


def printable_utf8(value: bytes) -> str | None:
    """``value`` decoded, if it is UTF-8 of printable characters (tabs and line breaks allowed); else None."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if all(c.isprintable() or c in "\t\n\r" for c in text) else None
