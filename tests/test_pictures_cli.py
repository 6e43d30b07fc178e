"""``bbmap cfg`` end to end: SVG and DOT files written atomically, function selection
(demangled, raw, parts folded, overloads by bare name), and one-line errors with a
non-zero exit."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from helpers import CASES, EH, LBR, NS, needs_corpus, pictures, result_of

from bbmap.cli import main
from bbmap.cli.cfg import find_functions
from bbmap.errors import BBMapError

MULTI = [c for c in LBR if "list" in c[0]]


def run(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr)."""
    r = CliRunner().invoke(main, ["cfg", *args])
    return r.exit_code, r.stdout, r.stderr


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bbmap: error: "), err
    return lines[0]


@needs_corpus
def test_svg_overview_and_top_functions(tmp_path):
    _, perf, binary = CASES[0]
    out = tmp_path / "hot.svg"
    code, stdout, err = run(perf, binary, "--top", "3", "-o", str(out))
    assert code == 0, err
    assert stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["hot.svg"]  # no temp file left
    root = ET.parse(out).getroot()
    assert root.tag == f"{NS}svg"
    assert any(g.get("class") == "overview" for g in root.iter(f"{NS}g"))
    r = result_of(perf, binary)
    want = [fv.name for fv in r.hot_functions(3) if len(fv.blocks)]
    assert list(pictures(out.read_text())) == want


@pytest.mark.skipif(not MULTI, reason="no multi-range LBR profile in the corpus")
def test_function_parts_fold_and_ranges_named(tmp_path):
    _, perf, binary = MULTI[0]
    out = tmp_path / "f.svg"
    r = result_of(perf, binary)
    parts = [n for n in ("lay_scan.cold", "lay_insertion.cold", "main.cold")
             if n.split(".")[0] in r.functions.names]
    assert parts
    code, _, err = run(perf, binary, "--function", parts[0], "-o", str(out))
    assert code == 0, err
    svg = out.read_text()
    assert list(pictures(svg)) == [parts[0].split(".")[0]]
    assert "part .cold @ 0x" in svg  # the range is named by its symbol
    assert 'class="overview"' not in svg


@needs_corpus
def test_dot_by_extension_and_flag(tmp_path):
    _, perf, binary = CASES[0]
    out = tmp_path / "g.gv"
    code, _, err = run(perf, binary, "--top", "2", "-o", str(out))
    assert code == 0, err
    assert out.read_text().startswith("digraph ")
    out2 = tmp_path / "g.txt"
    code, _, err = run(perf, binary, "--top", "2", "--format", "dot", "-o", str(out2))
    assert code == 0, err
    assert out2.read_text() == out.read_text()


@pytest.mark.skipif(not EH, reason="corpus C++ EH profile not built")
def test_cpp_selection_by_demangled_raw_and_bare_name():
    _, perf, binary = EH[0]
    r = result_of(perf, binary)
    ft = r.functions
    k = next(k for k in range(ft.num_keys) if ft.names[k] != ft.raw_names[k]
             and ft.bmfuncs[k])
    assert find_functions(r, [ft.names[k]], binary) == [k]
    assert find_functions(r, [ft.raw_names[k]], binary) == [k]
    bare = ft.names[k].split("(")[0]
    assert k in find_functions(r, [bare], binary)
    # parts fold into the parent however they are spelled
    assert find_functions(r, [ft.raw_names[k] + ".cold"], binary) == [k]
    assert find_functions(r, [ft.names[k] + " [clone .cold]"], binary) == [k]


@needs_corpus
def test_unknown_function_lists_closest(tmp_path):
    _, perf, binary = CASES[0]
    r = result_of(perf, binary)
    name = r.hot_functions(1)[0].name
    typo = name[:-1] + ("x" if name[-1] != "x" else "y")
    out = tmp_path / "x.svg"
    code, _, err = run(perf, binary, "--function", typo, "-o", str(out))
    assert code != 0
    line = one_error_line(err)
    assert f"no function named {typo!r}" in line and "closest: " in line and name in line
    assert not out.exists()
    with pytest.raises(BBMapError, match="closest"):
        find_functions(r, [typo], binary)


@needs_corpus
@pytest.mark.parametrize("problem", ["perf-last", "missing-perf", "not-elf", "heat-count",
                                     "one-input"])
def test_errors_are_one_line(tmp_path, problem):
    plain = [c for c in CASES if c not in LBR]
    _, perf, binary = (plain or CASES)[0]
    out = str(tmp_path / "o.svg")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not an elf file at all")
    args = {"perf-last": [binary, perf, "-o", out],
            "missing-perf": [str(tmp_path / "nope.data"), binary, "-o", out],
            "not-elf": [perf, str(junk), "-o", out],
            "heat-count": [perf, binary, "--heat", "count", "-o", out],
            "one-input": [binary, "-o", out]}[problem]
    if problem == "heat-count" and result_of(perf, binary).has_lbr:
        pytest.skip("needs a profile without LBR")
    code, _, err = run(*args)
    assert code != 0
    one_error_line(err)
    assert not os.path.exists(out)
