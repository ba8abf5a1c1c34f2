"""Values as a person reads them (bookie/util/human.py): sizes in binary units, custom metadata as text or hex."""
from __future__ import annotations

import pytest

from bookie.util.human import human_bytes, text_or_hex


@pytest.mark.parametrize("count,shown", [
    (None, None), (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (1_000_000_000, "953.7 MiB"),
    (3 * 2**40, "3.0 TiB"), (2**70, "1024.0 EiB"),
])
def test_sizes_in_the_largest_binary_unit_they_fill(count, shown):
    assert human_bytes(count) == shown


@pytest.mark.parametrize("value,shown", [
    (b"orders", "orders"), ("héllo wörld".encode(), "héllo wörld"), (b"", ""),
    (b"two\tcolumns\nand lines", "two\tcolumns\nand lines"),
    (b"\x00\xff", "0x00ff"),  # not UTF-8
    (b"\x1b[31mred", "0x1b5b33316d726564"),  # UTF-8, but a control character a terminal would act on
    (b"\xc3", "0xc3"),  # cut in the middle of a character
])
def test_custom_metadata_is_text_where_it_is_printable_utf8_else_hex(value, shown):
    assert text_or_hex(value) == shown
