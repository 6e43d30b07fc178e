"""bbmap's fdata against ``perf2bolt-22`` on real Intel LBR profiles from other machines.

There is no LBR hardware here.  LLVM's llvm-profgen tests ship LBR profiles recorded on
Intel machines as ``perf script`` text beside their binaries (``cs-preinline-cost``: 996
samples of 16 entries from a CentOS 7 machine, with ld-2.17 and libc in its mappings).
``corpus/tools/perfscript_to_perfdata.py`` puts each back into a perf.data with bbmap's
``PerfWriter`` -- the branch records are the hardware's, the container is ours -- and
real ``perf script -F ip,brstack`` proves the container prints every sample's stack as
the text had it.  perf2bolt and bbmap then read the same perf.data and binary: the fdata
lines must be equal as multisets, perf2bolt's "traces mismatching disassembled function
contents" must equal bbmap's ``traces_mismatch``, and its "out of range traces involving
unknown regions" must be bbmap's ``traces_outside`` plus the traces bbmap drops before
the fdata stage because neither end is in the binary (``AddressProfile.external``).

The inputs come from Debian's llvm-toolchain-16 source package
(``corpus/tools/fetch_profgen_inputs.py``; never committed): ``$BBMAP_LLVM_PROFGEN_INPUTS``
or the fetch script's cache.  Skipped when they, perf2bolt-22 or perf are absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from bbmap.binary import load_binary
from bbmap.bolt_functions import BoltView
from bbmap.outputs.bolt import fdata_from_profile
from bbmap.run import annotate
from tests.helpers import CORPUS, PERF2BOLT, run_perf2bolt
from tests.helpers import fdata_lines as lines
from tests.helpers import perf2bolt_tally as tally

sys.path.insert(0, str(CORPUS / "tools"))
import fetch_profgen_inputs  # noqa: E402
import perfscript_to_perfdata as p2p  # noqa: E402

P2B = PERF2BOLT
INPUTS = Path(os.environ.get("BBMAP_LLVM_PROFGEN_INPUTS")
              or fetch_profgen_inputs.DEFAULT_CACHE / fetch_profgen_inputs.INPUTS)
pytestmark = [
    pytest.mark.skipif(P2B is None or shutil.which("perf") is None,
                       reason="needs perf2bolt-22 and perf"),
    pytest.mark.skipif(not (INPUTS / "cs-preinline-cost.perfscript").exists(),
                       reason=f"llvm-profgen inputs absent at {INPUTS} (run "
                              "corpus/tools/fetch_profgen_inputs.py or set "
                              "BBMAP_LLVM_PROFGEN_INPUTS)"),
]

# every *.perfscript with its *.perfbin; perf2bolt reads these and agrees
AGREE = ["callback-external-addr", "coroutine", "cs-preinline-cost", "func-split",
         "inline-cs-noprobe", "inline-cs-pseudoprobe", "inline-noprobe", "inline-noprobe2",
         "noinline-cs-noprobe", "noinline-tailcall-probe", "noprobe",
         "recursion-compression-noprobe", "recursion-compression-pseudoprobe",
         "truncated-pseudoprobe", "unique-linkage-name-dwarf", "unique-linkage-name-probe"]
# perf2bolt refuses these two (its messages are checked below)
REFUSED = {"multi-load-segs": "input file was processed by BOLT",
           "noinline-cs-pseudoprobe": "could not find a profile matching binary"}


@cache
def converted(name: str, tmp: str) -> tuple[Path, Path, p2p.Script]:
    """(perf.data, binary, parsed text): the binary copied under the name its MMAP2
    gives (perf2bolt matches by name when there is no build-id), or as ``a.out`` with a
    mapping of its text segment made up for texts that have no MMAP2."""
    d = Path(tmp) / name
    d.mkdir(parents=True, exist_ok=True)
    script = p2p.parse((INPUTS / f"{name}.perfscript").read_text(), pid=1)
    mm = script.mmaps
    binary = d / (os.path.basename(mm[0].path) if mm else "a.out")
    shutil.copyfile(INPUTS / f"{name}.perfbin", binary)
    if not mm:
        script.events.insert(0, p2p.text_mapping(binary, 1))
    perf = d / "p.perf.data"
    p2p.write(script, perf, ["test", name])
    return perf, binary, script


@cache
def perf2bolt(perf: Path, binary: Path) -> tuple[str, str, int]:
    return run_perf2bolt(perf, binary, cwd=perf.parent)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("profgen"))


def test_every_pair_is_classified() -> None:
    names = sorted(p.stem for p in INPUTS.glob("*.perfscript")
                   if (INPUTS / f"{p.stem}.perfbin").exists())
    assert names == sorted(AGREE + list(REFUSED))


@pytest.mark.parametrize("name", AGREE + list(REFUSED))
def test_perf_script_prints_the_texts_stacks(name: str, tmp: str) -> None:
    perf, _, script = converted(name, tmp)
    assert p2p.check(script, perf) == len(script.samples) > 0


@pytest.mark.parametrize("name", AGREE)
def test_fdata_equals_perf2bolt(name: str, tmp: str) -> None:
    perf, binary, script = converted(name, tmp)
    theirs, log, rc = perf2bolt(perf, binary)
    assert rc == 0, log
    r = annotate([str(perf)], str(binary), address_only=True, inference="off")
    p = r.addresses
    text, st = fdata_from_profile(p, BoltView(load_binary(str(binary))))
    a, b = lines(text), lines(theirs)
    assert a == b, f"only bbmap: {sorted(a - b)[:5]}; only perf2bolt: {sorted(b - a)[:5]}"
    entries = sum(len(s.entries) for s in script.samples)
    m = re.search(r"read (\d+) samples and (\d+) brstack entries", log)
    assert m and (int(m[1]), int(m[2])) == (len(script.samples), entries)
    assert (p.samples, p.entries + p.duplicate, p.kernel) == (len(script.samples), entries, 0)
    assert st.traces_mismatch == tally(log, "traces mismatching disassembled function "
                                            "contents")
    # perf2bolt pairs every two adjacent entries of a stack (n entries: n - 1 traces) and
    # counts those with no end in a function as out of range; bbmap drops the traces with
    # no address in the binary before the fdata stage (``external``), keeps the rest
    offered = entries - len(script.samples)
    dropped_early = offered - st.traces
    assert 0 <= dropped_early <= p.external
    assert st.traces_outside + dropped_early == tally(
        log, "out of range traces involving unknown regions")


def test_cs_preinline_cost_figures(tmp: str) -> None:
    """The one big real profile, in figures (spec/bolt.md, notes of issue 14)."""
    perf, binary, script = converted("cs-preinline-cost", tmp)
    theirs, log, _ = perf2bolt(perf, binary)
    r = annotate([str(perf)], str(binary), address_only=True, inference="off")
    text, st = fdata_from_profile(r.addresses, BoltView(load_binary(str(binary))))
    assert len(text.splitlines()) == len(theirs.splitlines()) == 19
    # 996 stacks x 16 entries; the first stack lies wholly in ld-2.17.so: its 16 entries
    # are bbmap's ``external``, its 15 traces perf2bolt's out-of-range ones
    assert (r.addresses.samples, r.addresses.entries, r.addresses.external) == (996, 15936, 16)
    assert (st.traces, st.traces_ok, st.traces_mismatch, st.traces_outside) == (
        14925, 14925, 0, 0)
    assert tally(log, "out of range traces involving unknown regions") == 15
    assert tally(log, "traces mismatching disassembled function contents") == 0


def test_refusals_are_perf2bolts(tmp: str) -> None:
    """multi-load-segs: perf2bolt will not read a binary BOLT already processed.
    noinline-cs-pseudoprobe: the text maps the binary's file page 0 at 0x301000, where
    this non-PIE binary does not lie (its text is at 0x201670); perf2bolt finds no usable
    mapping, while bbmap translates through the mapping's file offset as perf itself does
    (``perf script -F brstacksym`` names the same foo/bar offsets)."""
    for name, msg in REFUSED.items():
        perf, binary, _ = converted(name, tmp)
        theirs, log, _ = perf2bolt(perf, binary)
        assert msg in log and not theirs.strip(), log[-300:]
    perf, binary, _ = converted("noinline-cs-pseudoprobe", tmp)
    r = annotate([str(perf)], str(binary), address_only=True, inference="off")
    text, _ = fdata_from_profile(r.addresses, BoltView(load_binary(str(binary))))
    symfs = perf.parent / "symfs"
    (symfs / "home").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(binary, symfs / "home" / binary.name)
    sym = subprocess.run(["perf", "script", "-i", str(perf), "-F", "brstacksym",
                          f"--symfs={symfs}"], capture_output=True, text=True).stdout
    for frm, to in (("foo 4f", "foo 1e"), ("foo 3f", "bar 0")):
        assert f"{frm.replace(' ', '+0x')}/{to.replace(' ', '+0x')}/" in sym
        assert any(ln.startswith(f"1 {frm} 1 {to} ") for ln in text.splitlines())


def test_perf_script_prints_the_texts_mappings(tmp: str) -> None:
    """MMAP2 records as recorded on the other machine: addresses, pgoff, maj:min, inode,
    generation, protection and path (PerfWriter.add_mmap2's ``inode``)."""
    perf, _, _ = converted("cs-preinline-cost", tmp)
    out = subprocess.run(["perf", "script", "-i", str(perf), "--show-mmap-events", "-F", "ip"],
                         capture_output=True, text=True, check=True).stdout
    got = re.findall(r"PERF_RECORD_MMAP2 .*", out)
    want = re.findall(r"PERF_RECORD_MMAP2 .*",
                      (INPUTS / "cs-preinline-cost.perfscript").read_text())
    assert got == want and len(got) == 8


def test_block_path_on_a_binary_without_block_map(tmp: str) -> None:
    """These binaries have no .llvm_bb_addr_map: the block path must say so (exit 1 with
    the rebuild hint), not fail indexing block 0 of an empty map (it did: a traceback in
    the library, a misleading "cannot decode" from the CLI); its branch buckets agree
    with the fdata tallies: the 16 ld.so entries are ``other_dso``."""
    from click.testing import CliRunner

    from bbmap.cli import main

    perf, binary, _ = converted("cs-preinline-cost", tmp)
    r = annotate([str(perf)], str(binary), addresses=True, inference="off")
    b = r.accounting.branch_buckets()
    assert (b["in_block"], b["in_function_no_block"], b["other_dso"]) == (0, 15920, 16)
    res = CliRunner().invoke(main, ["annotate", str(perf), str(binary)])
    assert res.exit_code == 1 and "no basic-block address map" in res.output, res.output
