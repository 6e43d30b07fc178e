"""``symbols._by_address_then_name`` (which function symbols a map names, in address then
name order, one per distinct (address, name)) against its definition: every shared
address's names ranked in Python string order, the first occurrence of each pair kept."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary.symbols import _by_address_then_name


def _reference(addr: np.ndarray, names: list[str]) -> list[int]:
    seen: dict[tuple[int, str], int] = {}
    for i, (a, nm) in enumerate(zip(addr.tolist(), names)):
        seen.setdefault((a, nm), i)
    return [seen[k] for k in sorted(seen)]


entries = st.lists(st.tuples(st.integers(0, 12),
                             st.sampled_from(["f", "g", "f.cold", "_Z1fv", "", "é", "\udc80",
                                              "a" * 40, "f\u0100", "F"])),
                   max_size=60)


@settings(max_examples=400, deadline=None)
@given(entries)
def test_first_of_each_address_and_name_in_order(rows):
    addr = np.array([a for a, _ in rows], np.uint64)
    names = [n for _, n in rows]
    assert _by_address_then_name(addr, names).tolist() == _reference(addr, names)


def test_a_library_export_in_both_tables_is_one_entry():
    addr = np.array([0x20, 0x10, 0x10, 0x20, 0x30], np.uint64)  # .symtab then .dynsym
    names = ["b", "a", "a", "b", "c"]
    assert _by_address_then_name(addr, names).tolist() == [1, 0, 4]
