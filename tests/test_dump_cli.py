"""The `bbmap dump` command: text and JSON, demangling, atomic -o, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bbmap.cli import main
from bbmap.dump import dump

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
EH = CORPUS / "bin/clang-22/eh/unwind.pie"


def _need(p):
    if not p.exists():
        pytest.skip(f"{p} not built")


def test_json_demangles_and_keeps_mangled():
    _need(EH)
    d = dump(str(EH))
    named = [f for f in d["functions"] if f.get("mangled")]
    assert named and all(f["mangled"].startswith("_Z") and "(" in f["name"] for f in named)
    raw = dump(str(EH), demangle=False)
    assert all("mangled" not in f for f in raw["functions"])
    assert [f["name"] for f in raw["functions"]] == \
        [f.get("mangled", f["name"]) for f in d["functions"]]
    assert any(b["metadata"]["is_eh_pad"] for f in d["functions"] for r in f["ranges"]
               for b in r["blocks"])


def test_cli_json_to_file_equals_library(tmp_path):
    _need(EH)
    out = tmp_path / "d.json"
    r = CliRunner().invoke(main, ["dump", "--json", "-o", str(out), str(EH)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text()) == dump(str(EH))
    assert not list(tmp_path.glob(".bbmap-*"))  # no temporary left behind


def test_cli_text_table():
    _need(EH)
    r = CliRunner().invoke(main, ["dump", str(EH)])
    assert r.exit_code == 0
    assert "SHT_LLVM_BB_ADDR_MAP v5" in r.output and "parse_digit(char) @ 0x" in r.output
    assert "flags: R return" in r.output


def test_cli_missing_file_is_one_line():
    r = CliRunner().invoke(main, ["dump", "/nonexistent/binary"])
    assert r.exit_code != 0
    assert "Traceback" not in r.output


@pytest.mark.parametrize("rel", ["bin/clang-22/list/layout.pie", "bin/clang-22/list/layout.o"])
def test_split_ranges_name_their_part_symbols(rel):
    from bbmap.binary.types import parent_name

    p = CORPUS / rel
    _need(p)
    d = dump(str(p))
    multi = [f for f in d["functions"] if len(f["ranges"]) > 1]
    assert multi
    for f in multi:
        assert "symbol" not in f["ranges"][0]
        for r in f["ranges"][1:]:
            assert parent_name(r["symbol"]) == f["name"], (f["name"], r["symbol"])


def _console(*args, **kw):
    """The console script's entry point (bbmap/__main__.py:run), in a fresh process."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", "from bbmap.__main__ import run; run()",
                           *args], capture_output=True, **kw)


@pytest.mark.slow
def test_console_script_dump_ends_with_its_output_complete(tmp_path):
    """dump lets the console script skip the interpreter's teardown: stdout, -o files
    and stderr must still be complete, and the exit codes the usual ones."""
    import shutil

    _need(EH)
    from bbmap.binary import load_binary
    from bbmap.dump import iter_json

    want = b"".join(iter_json(load_binary(EH)))
    r = _console("dump", "--json", str(EH))
    assert r.returncode == 0 and r.stdout == want and r.stderr == b""
    out = tmp_path / "d.json"
    r = _console("dump", "--json", "-o", str(out), str(EH))
    assert r.returncode == 0 and out.read_bytes() == want
    assert not list(tmp_path.glob(".bbmap-*"))
    src = CORPUS / "handmade" / "crel.o"
    _need(src)
    bad = tmp_path / "crel.o"
    shutil.copy(src, bad)
    b = load_binary(bad)
    data = bytearray(bad.read_bytes())
    data[b.map_sections()[0].sh_offset] = 9  # an unknown version: an error, the rest kept
    bad.write_bytes(bytes(data))
    r = _console("dump", "--json", str(bad))
    assert r.returncode == 1
    assert r.stderr.decode().startswith("bbmap: error: ") and "version: 9" in r.stderr.decode()
    assert json.loads(r.stdout)["functions"]
    r = _console("dump", str(EH))  # the text table too
    assert r.returncode == 0 and b"SHT_LLVM_BB_ADDR_MAP v5" in r.stdout


@pytest.mark.parametrize("args", [["--json"], [], ["--json", "/nonexistent/binary"]])
def test_dump_leaves_the_garbage_collector_as_it_found_it(args):
    """`bbmap dump` runs with the cyclic collector off (its objects live to the end and
    form no cycles); a caller in the same process, a test runner, gets it back on, also
    when the command fails."""
    import gc

    _need(EH)
    argv = ["dump", *args] if args[-1:] == ["/nonexistent/binary"] else ["dump", *args, str(EH)]
    assert gc.isenabled()
    CliRunner().invoke(main, argv)
    assert gc.isenabled()
    gc.disable()
    try:
        CliRunner().invoke(main, argv)
        assert not gc.isenabled()
    finally:
        gc.enable()
