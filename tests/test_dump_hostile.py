"""bbmap dump on hostile inputs: one line, the right exit code, nothing destroyed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bbmap.binary import load_binary

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "corpus" / "demo" / "layout"
PIE = REPO / "corpus" / "bin" / "clang-22" / "addrmap" / "layout.pie"
need = pytest.mark.skipif(not DEMO.exists() or not PIE.exists(), reason="corpus not built")


def dump(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bbmap", "dump", *args],
                          capture_output=True, text=True)


def test_directory_is_one_line_exit_3(tmp_path):
    r = dump(str(tmp_path))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "Is a directory" in r.stderr


@need
def test_output_over_the_binary_is_refused(tmp_path):
    b = tmp_path / "layout"
    shutil.copy(DEMO, b)
    before = b.read_bytes()
    r = dump(str(b), "-o", str(b))
    assert r.returncode == 2 and "refusing to overwrite" in r.stderr
    assert b.read_bytes() == before


def test_binary_without_a_map_says_so():
    ls = shutil.which("ls")
    r = dump(ls)
    assert r.returncode == 0
    assert "has no basic-block address map" in r.stderr and "-fbasic-block-address-map" in r.stderr


@need
def test_damaged_build_id_owner_is_no_build_id(tmp_path):
    """A flipped byte in the note's owner ("GNU") leaves raw bytes: not a build-id, and
    never an internal error downstream."""
    data = bytearray(PIE.read_bytes())
    good = load_binary(PIE).build_id
    at = data.find(bytes.fromhex(good)) - 4  # the owner "GNU\0" right before the id
    assert data[at:at + 4] == b"GNU\0"
    data[at] ^= 1
    bad = tmp_path / "bid.pie"
    bad.write_bytes(bytes(data))
    assert load_binary(bad).build_id is None
    r = dump(str(bad), "--json")
    assert r.returncode == 0 and '"build_id":null' in r.stdout
