"""Every corpus binary verifies clean, and its coverage adds up to its code sections.

The section sizes come from pyelftools directly (not from bbmap's loader), and the
block flags are cross-checked against the llvm-readobj goldens the corpus ships.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from bbmap.verify.api import verify

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
MANIFEST = CORPUS / "manifest.json"
BINARIES = json.loads(MANIFEST.read_text())["binaries"] if MANIFEST.exists() else []


def exec_section_sizes(path: Path) -> dict[int, int]:
    """Executable, allocated, file-backed sections as readelf sees them."""
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        return {i: s["sh_size"] for i, s in enumerate(elf.iter_sections())
                if s["sh_flags"] & 0x6 == 0x6 and s["sh_type"] != "SHT_NOBITS"}


@pytest.mark.parametrize("entry", BINARIES, ids=[b["name"] for b in BINARIES])
def test_corpus_binary_verifies_clean(entry):
    path = CORPUS / entry["path"]
    if not path.exists():
        pytest.skip("binary not built")
    if entry["kind"] == "stripped" and not (CORPUS / "debug" / ".build-id").is_dir():
        pytest.skip("debug file of the stripped binary not built")
    rep = verify(path, debug_dirs=[CORPUS / "debug"])
    assert rep.ok, rep.format()
    assert rep.stats["functions"] > 0
    sizes = exec_section_sizes(path)
    cov = rep.coverage
    assert cov is not None
    assert {s.index: s.size for s in cov.sections} == sizes
    for s in cov.sections:
        assert sum(s.totals.values()) == sizes[s.index], (s.name, s.totals)
    assert sum(cov.totals.values()) == sum(sizes.values())


NAMES = {"HasReturn": 1, "HasTailCall": 2, "IsEHPad": 4, "CanFallThrough": 8,
         "HasIndirectBranch": 16}


def _golden_blocks(golden: Path) -> list[tuple[int, int, int, int, int]]:
    """(range base, offset, ID, size, metadata) of every block in a readobj-22 golden."""
    data = json.loads(golden.read_text())
    out = []
    for item in data:
        for fn in item.get("BBAddrMap", []):
            for rng in fn["Function"].get("BB Ranges", []):
                for be in rng.get("BB Entries", []):
                    md = sum(v for k, v in NAMES.items() if be.get(k))
                    out.append((rng["Base Address"], be["Offset"], be["ID"], be["Size"], md))
    return sorted(out)


@pytest.mark.parametrize("entry", [b for b in BINARIES if b.get("goldens", {}).get(
    "readobj_tool") == "llvm-readobj-22" and b["kind"] != "obj"], ids=lambda b: b["name"])
def test_checked_flags_are_readobjs_flags(entry):
    """The metadata bits the instruction checks judged are the ones llvm-readobj decodes."""
    from bbmap.binary import load_binary
    from bbmap.verify.context import VerifyContext

    path, golden = CORPUS / entry["path"], CORPUS / entry["goldens"]["readobj"]
    if not path.exists() or not golden.exists():
        pytest.skip("binary or golden absent")
    want = _golden_blocks(golden)
    ctx = VerifyContext(load_binary(path))
    m = ctx.m
    got = sorted((int(m.range_base[ctx.block_range[b]]), int(m.block_offset[b]),
                  int(m.block_id[b]), int(m.block_size[b]), int(m.block_md[b]))
                 for b in range(m.num_blocks))
    assert got == want
