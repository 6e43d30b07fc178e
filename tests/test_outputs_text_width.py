"""The plain-text report fits its width: long C++ names are elided in the middle."""

from __future__ import annotations

from bbmap.outputs.text import NAME_MIN, Table, _elide, render_plain


def test_elide_keeps_both_ends():
    name = "checked_sum(std::vector<std::__cxx11::basic_string<char> > const&)"
    short = _elide(name, 40)
    assert len(short) == 40 and short.startswith("checked_sum(") and short.endswith("const&)")
    assert _elide("main", 40) == "main"


def test_rows_fit_the_width_and_numbers_stay_whole():
    t = Table(title="t", columns=["function / block", "samples"], right={1})
    t.rows = [["x" * 300, "12345"], ["main", "7"]]
    text = render_plain([], [t], width=80)
    lines = [ln for ln in text.splitlines() if ln and ln != "t"]
    assert all(len(ln) <= 80 for ln in lines)
    assert lines[2].endswith("12345") and "..." in lines[2]
    # a narrow width never squeezes the name column below its minimum
    narrow = render_plain([], [t], width=10)
    assert len(narrow.splitlines()[-2]) >= NAME_MIN
