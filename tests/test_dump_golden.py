"""`bbmap dump --json` against stored llvm-readobj goldens, field by field.

Every binary in ``corpus/manifest.json`` with a readobj golden is decoded by bbmap
and compared with the newest llvm-readobj that decodes it (14 for the unversioned
map, 19 for version 1, 22 for 2-5).  The goldens are stored, so LLVM is not needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import normalize_ours, normalize_readobj, readobj_pairs

from bbmap.dump import dump

ROOT = Path(__file__).resolve().parent.parent / "corpus"


def _entries():
    try:
        manifest = json.loads((ROOT / "manifest.json").read_text())
    except (OSError, ValueError):
        return []
    out = []
    for b in manifest.get("binaries", []):
        g = (b.get("goldens") or {}).get("readobj")
        if g:
            out.append(pytest.param(b, id=b["name"]))
    return out


@pytest.mark.parametrize("entry", _entries())
def test_dump_matches_readobj(entry):
    golden_path = ROOT / entry["goldens"]["readobj"]
    binary = ROOT / entry["path"]
    if not golden_path.exists() or not binary.exists():
        pytest.skip("golden or binary not built")
    golden = normalize_readobj(json.loads(golden_path.read_text(), object_pairs_hook=readobj_pairs))
    ours_d = dump(str(binary), demangle=False)
    ours = normalize_ours(ours_d, golden)
    tool = entry["goldens"].get("readobj_tool", "")
    old_reader = tool.endswith(("-13", "-14", "-15", "-16"))
    relocatable = entry.get("kind") == "obj"
    if not golden:
        # the reader skipped this map (e.g. readobj-22 on V0): we must still decode it
        assert ours or not entry.get("map"), "readobj decoded nothing and neither did we"
        return
    assert len(ours) == len(golden), (len(ours), len(golden))
    for o, g in zip(ours, golden):
        if relocatable and old_reader:
            # LLVM <= 16 readers ignore relocations: At 0 and the first symbol at 0
            o, g = dict(o, address=0, name=None), dict(g, address=0, name=None)
            for r in o["ranges"]:
                r["base_address"] = 0
        assert o["address"] == g["address"], (o["name"], g["name"])
        assert o["name"] == g["name"]
        assert o["ranges"] == g["ranges"], o["name"]
        assert o["pgo"] == g["pgo"], o["name"]
    assert not [w for w in ours_d["warnings"] if w["severity"] == "error"]


def test_decodes_what_newer_readers_skip():
    """llvm-readobj-22 prints nothing for the V0 type and refuses version 1 (the corpus
    report, toolchain-corpus.md); llvm-readobj-14 prints nothing for 0x6fff4c0a maps.
    bbmap decodes every one of them, and agrees with the reader that does decode it."""
    try:
        manifest = json.loads((ROOT / "manifest.json").read_text())["binaries"]
    except (OSError, ValueError, KeyError):
        pytest.skip("no corpus")
    seen = set()
    for e in manifest:
        p = ROOT / e["path"]
        versions = (e.get("map") or {}).get("versions") or []
        if not p.exists() or not versions:
            continue
        d = dump(str(p))
        assert d["functions"], e["name"]
        fmt = {(f["format"]["source"], f["format"]["version"]) for f in d["functions"]}
        seen |= fmt
    if not seen:
        pytest.skip("corpus not built")
    assert ("SHT_LLVM_BB_ADDR_MAP_V0", 0) in seen and ("SHT_LLVM_BB_ADDR_MAP", 1) in seen
    assert ("SHT_LLVM_BB_ADDR_MAP", 5) in seen and ("SHT_LLVM_BB_ADDR_MAP", 2) in seen
