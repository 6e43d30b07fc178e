"""Stripped binaries: say what the strip took and how to give it back; read the block map
from the debug file when the binary lost it.

Real strips of corpus binaries, made here with the installed tools: ``llvm-strip-22``
removes ``.symtab`` *and* ``.llvm_bb_addr_map`` (and ``.comment``); GNU ``strip`` keeps the
map (a section type it does not know) but removes ``.symtab``.  The debug file is the
corpus's (``objcopy --only-keep-debug`` of c22-stripped-pie before its strip, found by
build-id under ``corpus/debug`` or by ``.gnu_debuglink``).  The oracle for the counts is
the same profile annotated on the GNU-stripped corpus binary, whose map is its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import CORPUS, PIE_BINARY, PIE_PROFILE, cli, corpus_binary, have_corpus

LLVM_STRIP = shutil.which("llvm-strip-22")
GNU_STRIP = shutil.which("strip")
DEBUG_DIR = CORPUS / "debug"
STRIPPED_PROFILE = str(CORPUS / "profiles" / "c22-stripped-pie-plain" / "perf.data")
needs_llvm_strip = pytest.mark.skipif(LLVM_STRIP is None, reason="llvm-strip-22 not installed")
needs_gnu_strip = pytest.mark.skipif(GNU_STRIP is None, reason="GNU strip not installed")


def _strip(tool: str, src: Path | str, tmp_path: Path, sub: str = "bin") -> Path:
    d = tmp_path / sub
    d.mkdir(exist_ok=True)
    out = d / Path(src).name  # the profile recorded this name
    shutil.copyfile(src, out)
    subprocess.run([tool, str(out)], check=True, capture_output=True)
    return out


def _error_lines(text: str) -> list[str]:
    assert "Traceback" not in text and "internal error" not in text, text
    return [ln for ln in text.splitlines() if ln.startswith("bbmap: error:")]


def _blocks(doc: dict) -> dict:
    return {(f["name"], b["id"]): b["samples"] for f in doc["functions"]
            for b in f.get("blocks", [])}


@have_corpus
@needs_llvm_strip
def test_llvm_strip_is_said_with_how_to_restore(tmp_path):
    """Was: "has no basic-block address map ...; rebuild with clang >= 19
    -fbasic-block-address-map", for a binary built exactly so."""
    b = _strip(LLVM_STRIP, PIE_BINARY, tmp_path)
    code, text = cli("annotate", PIE_PROFILE, str(b), "--inference", "off", "-o",
                     str(tmp_path / "out.txt"))
    lines = _error_lines(text)
    assert code == 1 and len(lines) == 1, text
    line = lines[0]
    assert "layout.pie was stripped (no .symtab" in line, line
    assert "llvm-strip removes the map with the symbols" in line, line
    assert "--debug-dir DIR with its debug file (DIR/.build-id/3f/47b43925492b1e415945c0467" \
        "ba65fa3eca0b1.debug" in line and "or the unstripped binary" in line, line
    code, text = cli("dump", str(b))
    assert code == 0 and "stripped (no .symtab): no block map and no symbols" in text, text


@have_corpus
@needs_llvm_strip
def test_debug_dir_gives_back_the_block_map(tmp_path):
    """Was: --debug-dir named the functions but the map, which the debug file holds
    (``bbmap dump`` of it shows it), was not read: exit 1, no block."""
    src = corpus_binary("c22-stripped-pie")
    b = _strip(LLVM_STRIP, src, tmp_path)
    out = tmp_path / "out.json"
    code, text = cli("annotate", STRIPPED_PROFILE, str(b), "--debug-dir", str(DEBUG_DIR),
                     "--inference", "off", "--format", "json", "-o", str(out))
    assert code == 0, text
    got = json.loads(out.read_text())
    ref = tmp_path / "ref.json"
    code, text = cli("annotate", STRIPPED_PROFILE, str(src), "--debug-dir", str(DEBUG_DIR),
                     "--inference", "off", "--format", "json", "-o", str(ref))
    assert code == 0, text
    want = json.loads(ref.read_text())
    assert _blocks(got) == _blocks(want) and sum(_blocks(got).values()) > 2900
    assert ("lay_insertion", 4) in _blocks(got)
    code, text = cli("dump", str(b), "--debug-dir", str(DEBUG_DIR))
    assert code == 0 and "block map: from the debug file " in text and "lay_insertion" in text


@have_corpus
@needs_llvm_strip
def test_the_debug_file_is_found_by_its_debuglink_and_crc(tmp_path):
    """``.gnu_debuglink`` names the debug file; beside the binary it is found without
    --debug-dir (as gdb finds it), but not when its CRC32 differs from the link's."""
    src = corpus_binary("c22-stripped-pie")
    b = _strip(LLVM_STRIP, src, tmp_path)
    dbg = next(DEBUG_DIR.glob(".build-id/*/*.debug"))
    link = b.parent / dbg.name  # the link records the file name only
    shutil.copyfile(dbg, link)
    code, text = cli("annotate", STRIPPED_PROFILE, str(b), "--inference", "off")
    assert code == 0 and "lay_insertion" in text, text
    data = bytearray(link.read_bytes())
    data[-1] ^= 0xFF  # same name, other bytes
    link.write_bytes(bytes(data))
    code, text = cli("annotate", STRIPPED_PROFILE, str(b), "--inference", "off")
    assert code == 1 and "was stripped" in text, text


@have_corpus
@needs_gnu_strip
def test_gnu_strip_keeps_the_map_and_says_once_how_to_name_functions(tmp_path):
    """Was: every function shown as fn@0x11e0 with no word of why."""
    b = _strip(GNU_STRIP, PIE_BINARY, tmp_path)
    code, text = cli("annotate", PIE_PROFILE, str(b), "--inference", "off")
    assert code == 0, text
    warn = [ln for ln in text.splitlines() if "was stripped" in ln]
    assert len(warn) == 1, text
    assert "17 of 17 functions of its block map have no name and show as fn@ADDRESS" in \
        warn[0] and "--debug-dir DIR" in warn[0], warn
    assert "fn@0x11e0" in text
    out = tmp_path / "out.json"
    code, text = cli("annotate", PIE_PROFILE, str(b), "--inference", "off", "--format",
                     "json", "-o", str(out))
    doc = json.loads(out.read_text())
    assert code == 0 and sum("was stripped" in w["message"] for w in doc["warnings"]) == 1
    code, text = cli("dump", str(b))
    assert code == 0 and "stripped (no .symtab): 17 of 17 functions have no name" in text


@have_corpus
def test_an_unstripped_binary_says_nothing_of_strips(tmp_path):
    code, text = cli("annotate", PIE_PROFILE, PIE_BINARY, "--inference", "off", "-o",
                     str(tmp_path / "o.txt"))
    assert code == 0 and "stripped" not in text, text
    code, text = cli("dump", PIE_BINARY)
    assert code == 0 and "stripped" not in text.splitlines()[1]
