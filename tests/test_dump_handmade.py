"""Hand-made inputs (corpus/handmade): versions 3 and 4, .bb_info, LLVM 11 label symbols,
i386 SHT_REL and SHT_CREL relocations.  Oracles: llvm-readobj-22 where it decodes the
input, else the assembler's own symbol table (nm listings stored beside them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import normalize_ours, normalize_readobj, readobj_pairs

from bbmap.binary import load_binary
from bbmap.dump import dump

HM = Path(__file__).resolve().parent.parent / "corpus" / "handmade"


def _manifest():
    try:
        return json.loads((HM / "manifest.json").read_text())["binaries"]
    except (OSError, ValueError, KeyError):
        return []


def _nm(name: str) -> dict[str, int]:
    out = {}
    for line in (HM / "golden" / name).read_text().splitlines():
        addr, _, sym = line.split()
        out[sym] = int(addr, 16)
    return out


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} not built (corpus/handmade/build.sh)")


@pytest.mark.parametrize("entry", [pytest.param(e, id=e["name"]) for e in _manifest()
                                   if e["goldens"].get("readobj")])
def test_against_readobj22(entry):
    _need(HM / entry["path"])
    golden = normalize_readobj(json.loads((HM / entry["goldens"]["readobj"]).read_text(),
                                          object_pairs_hook=readobj_pairs))
    d = dump(str(HM / entry["path"]), demangle=False)
    assert golden and normalize_ours(d, golden) == golden
    assert d["warnings"] == []


@pytest.mark.parametrize("ext", ["o", "exe"])
def test_v3_callsite_begin_offsets(ext):
    _need(HM / f"v3.{ext}")
    d = dump(str(HM / f"v3.{ext}"))
    leaf, caller = d["functions"]
    assert (leaf["format"]["version"], leaf["format"]["feature"]) == (3, 0)
    assert (caller["format"]["version"], caller["format"]["feature"]) == (3, 0x20)
    b = caller["ranges"][0]["blocks"]
    # call; mov; call; add  ->  calls begin at +0 and +7, block is 14 bytes
    assert b[1]["callsite_offsets"] == [0, 7] and b[1]["size"] == 14
    assert b[2]["offset"] == 0x1C  # after the .p2align 3 padding (0x20 - function start 4)


@pytest.mark.parametrize("ext", ["o", "exe"])
def test_labels_match_symbol_table(ext):
    _need(HM / f"labels.{ext}")
    nm = _nm(f"labels.{ext}.nm.txt")
    d = dump(str(HM / f"labels.{ext}"))
    fns = {f["name"]: f for f in d["functions"]}
    assert set(fns) == {"lab_foo", "lab_bar"}
    letters_md = {"a": (0, 0), "r": (1, 0), "l": (0, 1), "L": (1, 1)}
    for name, f in fns.items():
        assert f["format"]["source"] == "label-symbols"
        base = nm[name]
        assert f["address"] == base
        blocks = f["ranges"][0]["blocks"]
        labels = sorted((a, s) for s, a in nm.items() if s.endswith(".BB." + name))
        assert [b["offset"] + f["ranges"][0]["base_address"] for b in blocks] == \
            [base] + [a for a, _ in labels]
        for b, (_, sym) in zip(blocks[1:], labels):
            letters = sym.split(".BB.")[0]
            assert b["id"] == len(letters)
            ret, eh = letters_md[letters[0]]
            assert (b["metadata"]["has_return"], b["metadata"]["is_eh_pad"]) == (ret, eh)
    # sizes: symbol .size where given, else up to the next label / the function end
    assert [b["size"] for b in fns["lab_foo"]["ranges"][0]["blocks"]] == [4, 8, 3, 4, 3, 6]


@pytest.mark.parametrize("ext", ["o", "exe"])
def test_bb_info_matches_symbol_table(ext):
    _need(HM / f"bb_info.{ext}")
    nm = _nm(f"bb_info.{ext}.nm.txt")
    d = dump(str(HM / f"bb_info.{ext}"))
    one, two = d["functions"]
    assert one["name"] == "bi_one" and two["name"] == "bi_two"
    assert one["format"]["source"] == "bb_info"
    starts = [nm["bi_one"], nm["bi_one_bb1"], nm["bi_one_bb2"]]
    ends = starts[1:] + [nm["bi_one_end"]]
    got = [(one["address"] + b["offset"], b["size"]) for b in one["ranges"][0]["blocks"]]
    assert got == [(s, e - s) for s, e in zip(starts, ends)]
    assert two["address"] == nm["bi_two"]
    assert two["ranges"][0]["blocks"][0]["size"] == nm["bi_two_end"] - nm["bi_two"]


def test_i386_rel_relocations():
    _need(HM / "v5_i386.o")
    nm = _nm("v5_i386.o.nm.txt")
    b = load_binary(HM / "v5_i386.o")
    assert b.elfclass == 32 and b.is_relocatable
    d = dump(str(HM / "v5_i386.o"))
    assert [(f["name"], f["address"]) for f in d["functions"]] == \
        [("i_first", nm["i_first"]), ("i_second", nm["i_second"])]
    text = next(s for s in b.sections if s.name == ".text")
    for f in d["functions"]:
        assert f["ranges"][0]["text_section"] == {"index": text.index, "name": ".text"}
    assert [x["size"] for x in d["functions"][1]["ranges"][0]["blocks"]] == [10, 1]
    assert d["warnings"] == []


def test_crel_sections_are_per_function():
    _need(HM / "crel.o")
    d = dump(str(HM / "crel.o"))
    secs = [f["ranges"][0]["text_section"]["name"] for f in d["functions"]]
    assert secs == [".text.crel_leaf", ".text.crel_loop"]
    assert all(f["address"] == 0 for f in d["functions"])
