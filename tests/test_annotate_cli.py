"""``bbmap annotate`` end to end: formats, atomic -o, @listfile merging, and the
explanations (mismatched build, no block map, kernel-only, binary not in the profile)
with their non-zero exit."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from bbmap.binary import load_binary
from bbmap.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
PROF = os.path.join(ROOT, "profiles", "c22-addrmap-pie-plain", "perf.data")
BIN = os.path.join(ROOT, "bin", "clang-22", "addrmap", "layout.pie")
OTHER_BUILD = os.path.join(ROOT, "bin", "clang-19", "addrmap", "layout.pie")  # same name
OTHER_NAME = os.path.join(ROOT, "bin", "clang-22", "eh", "unwind.pie")
have_corpus = pytest.mark.skipif(not (os.path.exists(PROF) and os.path.exists(BIN)),
                                 reason="corpus not built")


def run(*args):
    """(exit code, stdout + stderr as a user sees them, stdout alone)."""
    r = CliRunner().invoke(main, ["annotate", *args])
    return r.exit_code, r.output, r.stdout


@have_corpus
def test_text_report_and_exit_zero():
    code, out, _ = run(PROF, BIN)
    assert code == 0, out
    assert "lay_insertion" in out and "Accounting" in out and "bb " in out


@have_corpus
def test_json_to_file_atomic_and_listfile_merges(tmp_path):
    out1 = tmp_path / "one.json"
    code, text, _ = run(PROF, BIN, "--format", "json", "-o", str(out1))
    assert code == 0 and text == ""
    one = json.loads(out1.read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["one.json"]  # no temp files left
    lst = tmp_path / "list.txt"
    lst.write_text(f"# two copies\n{os.path.abspath(PROF)}\n\n{os.path.abspath(PROF)}\n")
    out2 = tmp_path / "two.json"
    code, _, _ = run(f"@{lst}", BIN, "--format", "json", "-o", str(out2))
    two = json.loads(out2.read_text())
    assert code == 0
    assert two["totals"]["samples"] == 2 * one["totals"]["samples"]
    assert len(two["profiles"]) == 2
    f1 = {f["name"]: f["samples"] for f in one["functions"]}
    f2 = {f["name"]: f["samples"] for f in two["functions"]}
    assert f2 == {k: 2 * v for k, v in f1.items()}


@have_corpus
def test_csv_and_cluster_formats():
    code, out, _ = run(PROF, BIN, "--format", "csv")
    assert code == 0 and out.startswith("record,function,id,")
    code, out, _ = run(PROF, BIN, "--format", "propeller", "--cluster-version", "0")
    assert code == 0 and "!lay_insertion" in out and "!!0 " in out
    code, out, _ = run(PROF, BIN, "--format", "symorder")
    # call-chain order: the inferred calls chain main to its callees, the hottest in it
    assert code == 0 and {"main", "lay_insertion"} <= set(out.splitlines())


@have_corpus
def test_build_id_mismatch_explained():
    code, out, _ = run(PROF, OTHER_BUILD)
    assert code == 1
    want = load_binary(OTHER_BUILD).build_id
    have = load_binary(BIN).build_id
    assert "build-id mismatch" in out and want in out and have in out
    assert "Accounting" in out  # the report is still shown


@have_corpus
def test_binary_not_in_profile_lists_dsos():
    code, out, _ = run(PROF, OTHER_NAME)
    assert code == 1
    assert "never appears in the profile's mmaps" in out and "layout.pie" in out


def _writer():
    from bbmap.perf.writer import PerfWriter
    return PerfWriter


def _system_elf() -> str | None:
    p = shutil.which("true")
    if not p:
        return None
    p = os.path.realpath(p)
    with open(p, "rb") as fh:
        return p if fh.read(4) == b"\x7fELF" else None


def test_binary_without_block_map_explained(tmp_path):
    elf = _system_elf()
    if elf is None:
        pytest.skip("no system ELF")
    b = load_binary(elf)
    seg = next(s for s in b.segments if s.is_exec)
    base = 0x5555_5555_0000 - (0x5555_5555_0000 % max(seg.p_align, 0x1000))
    start = base + (seg.p_vaddr - (seg.p_vaddr % 0x1000))
    pgoff = seg.p_offset - (seg.p_offset % 0x1000)
    path = tmp_path / "nomap.data"
    w = _writer()(str(path), event_name="cpu-clock:u", attr_type=1)
    w.add_comm(7, 7, "true")
    w.add_mmap2(7, 7, start, 0x1000 + seg.p_filesz, pgoff, elf, build_id=b.build_id)
    for i in range(10):
        w.add_sample(start + (seg.p_vaddr % 0x1000) + 16 * i, 7, 7, time=i)
    w.close()
    code, out, _ = run(str(path), elf)
    assert code == 1
    assert "no basic-block address map" in out and "-fbasic-block-address-map" in out


def test_kernel_only_profile_explained(tmp_path):
    elf = _system_elf() or BIN
    if not os.path.exists(elf):
        pytest.skip("no ELF")
    path = tmp_path / "kernel.data"
    w = _writer()(str(path), event_name="cpu-clock", attr_type=1)
    w.add_comm(7, 7, "x")
    for i in range(25):
        w.add_sample(0xFFFF_FFFF_8100_0000 + i, 7, 7, time=i, cpumode=1)
    w.close()
    code, out, _ = run(str(path), elf)
    assert code == 1
    assert "all 25 samples are kernel samples" in out


def test_bad_inputs_one_line_errors(tmp_path):
    junk = tmp_path / "junk.data"
    junk.write_bytes(b"not a perf file at all" * 4)
    code, out, _ = run(str(junk), BIN if os.path.exists(BIN) else str(junk))
    assert code == 3 and "Traceback" not in out and len(out.strip().splitlines()) == 1
    code, out, _ = run(str(tmp_path / "missing.data"), str(junk))
    assert code == 3 and "Traceback" not in out
    code, out, _ = run(str(junk))
    assert code == 2 and "need at least one perf.data" in out


@have_corpus
def test_swapped_arguments_and_truncated_profile(tmp_path):
    code, out, _ = run(BIN, PROF)
    assert code == 2 and "last argument must be the binary" in out
    cut = tmp_path / "cut.data"
    from pathlib import Path

    raw = Path(PROF).read_bytes()
    cut.write_bytes(raw[: len(raw) // 2])
    code, out, stdout = run(str(cut), BIN, "--format", "json")
    assert "Traceback" not in out
    # half a profile: whatever was read is reported, the damage is named, and the exit
    # status says the output is incomplete
    doc = json.loads(stdout)
    assert doc["totals"]["samples"] > 0
    assert doc["warnings"]
    assert code == 1
    assert any("damaged" in w["message"] for w in doc["warnings"] if w["severity"] == "error")


def test_empty_profile_explained(tmp_path):
    elf = _system_elf() or BIN
    if not os.path.exists(elf):
        pytest.skip("no ELF")
    path = tmp_path / "empty.data"
    w = _writer()(str(path), event_name="cpu-clock", attr_type=1)
    w.add_comm(7, 7, "x")
    w.close()
    code, _, stdout = run(str(path), elf, "--format", "json")
    assert code == 1
    doc = json.loads(stdout)
    assert doc["status"] == "nothing_mapped" and doc["totals"]["samples"] == 0
    assert "no samples" in doc["warnings"][0]["message"]


@have_corpus
def test_outputs_byte_identical_between_runs():
    for fmt in ("json", "csv", "propeller", "symorder", "text"):
        a = run(PROF, BIN, "--format", fmt)[2]
        b = run(PROF, BIN, "--format", fmt)[2]
        assert a == b and a, fmt
