"""The Python face -- ``import bbmap`` from anywhere, ``bbmap.annotate``, the
``bb_map_verifier`` fixture and ``assert_valid_bb_map`` as a compiler test suite uses them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
PROF = os.path.abspath(os.path.join(ROOT, "profiles", "c22-addrmap-pie-plain", "perf.data"))
BIN = os.path.abspath(os.path.join(ROOT, "bin", "clang-22", "addrmap", "layout.pie"))
have_corpus = pytest.mark.skipif(not (os.path.exists(PROF) and os.path.exists(BIN)),
                                 reason="corpus not built")


@pytest.mark.slow
def test_import_bbmap_outside_the_checkout(tmp_path):
    """The README's API works from any directory (a stale editable install made ``bbmap``
    a namespace package outside the checkout: ``bbmap.annotate`` was an AttributeError)."""
    r = subprocess.run([sys.executable, "-c",
                        "import bbmap; print(bbmap.__file__); "
                        "print(bbmap.annotate, bbmap.load_binary, bbmap.assert_valid_bb_map)"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].endswith("__init__.py"), r.stdout


@have_corpus
def test_annotate_api_reconciles():
    import bbmap
    res = bbmap.annotate([PROF, PROF], BIN)
    doc = res.to_json()
    t = doc["totals"]
    assert sum(t["buckets"]["samples"].values()) == t["samples"]
    assert [p["samples"] for p in doc["profiles"]] == [t["samples"] // 2] * 2
    assert not res.failed


@pytest.mark.slow
@have_corpus
def test_fixture_in_a_compiler_test_suite(tmp_path):
    missing = tmp_path / "not-built"
    text = tmp_path / "notes.txt"
    text.write_text("not an ELF file\n")
    test = tmp_path / "test_suite.py"
    test.write_text(
        "def test_one_check_as_a_string(bb_map_verifier):\n"
        f"    bb_map_verifier({BIN!r}, checks='md-return')\n"
        "def test_missing_output(bb_map_verifier):\n"
        f"    bb_map_verifier({str(missing)!r})\n"
        "def test_not_elf(bb_map_verifier):\n"
        f"    bb_map_verifier({str(text)!r})\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(test)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    out = r.stdout + r.stderr
    assert "2 failed, 1 passed" in out, out
    assert "not-built: cannot open" in out and "not an ELF file" in out, out
    # a failure reads like a diagnostic: no traceback into bbmap's internals
    assert "bbmap/binary" not in out and "raise BBMapError" not in out, out


@have_corpus
def test_select_checks_takes_one_name_as_a_string():
    from bbmap.verify import verify
    rep = verify(BIN, "md-return")
    assert rep.checks == ["md-return"] and rep.ok
