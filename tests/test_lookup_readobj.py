"""Every block llvm-readobj printed for a corpus binary is found again by the index.

The oracle is the stored llvm-readobj JSON (no LLVM needed at test time): for each block,
its start (and its last byte, when non-empty) must resolve to that block's ID, bounds and
function; an empty block is what a branch *target* at its address resolves to when it is
the first block there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbmap.binary import load_binary
from bbmap.lookup import Lookuper

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def _cases() -> list[dict]:
    m = CORPUS / "manifest.json"
    if not m.is_file():
        return []
    out = []
    for b in json.loads(m.read_text())["binaries"]:
        g = b.get("goldens", {}).get("readobj")
        if g and b["kind"] in ("pie", "nopie", "so") and (CORPUS / g).is_file() \
                and (CORPUS / b["path"]).is_file():
            out.append(b)
    return out


CASES = _cases()


def _maps(part: dict) -> list:
    """readobj 16+ puts BBAddrMap at the top; readobj 14 nests it under the file name."""
    if "BBAddrMap" in part:
        return part["BBAddrMap"]
    inner = next(iter(part.values()), {})
    return inner.get("BBAddrMap", []) if isinstance(inner, dict) else []


def _normalize(fn: dict) -> dict:
    """readobj 14 (unversioned map): one range at the function, IDs are record indexes."""
    if "BB Ranges" in fn:
        return fn
    entries = [dict(e, ID=i) for i, e in enumerate(fn["BB entries"])]
    return {**fn, "BB Ranges": [{"Base Address": fn["At"], "BB Entries": entries}]}


@pytest.mark.skipif(not CASES, reason="corpus not built")
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_readobj_block_resolves(case: dict) -> None:
    b = load_binary(CORPUS / case["path"])
    lk = Lookuper(b)
    golden = json.loads((CORPUS / case["goldens"]["readobj"]).read_text())
    fns = [_normalize(f["Function"]) for part in golden for f in _maps(part)]
    assert fns, "golden has no BBAddrMap"
    checked = 0
    for fn in fns:
        if not any(rng["BB Entries"] for rng in fn["BB Ranges"]):  # OmitBBEntries maps
            r = lk.lookup(hex(fn["At"]))
            assert r.status == "in-function-no-block" and r.block == -1, fn["Name"]
            assert b.block_map.func_name[r.func] == fn["Name"]
            checked += 1
        first_at: dict[int, int] = {}
        for rng in fn["BB Ranges"]:
            for e in rng["BB Entries"]:
                first_at.setdefault(rng["Base Address"] + e["Offset"], e["ID"])
        for ri, rng in enumerate(fn["BB Ranges"]):
            base = rng["Base Address"]
            for e in rng["BB Entries"]:
                start = base + e["Offset"]
                if e["Size"]:
                    for a in (start, start + e["Size"] - 1):
                        r = lk.lookup(hex(a))
                        assert (r.block_id, r.block_start, r.block_end, r.range_ordinal) == \
                            (e["ID"], start, start + e["Size"], ri), (fn["Name"], hex(a))
                        assert r.function.split("(")[0].endswith(fn["Name"].split("(")[0]) or \
                            b.block_map.func_name[r.func] == fn["Name"], (r.function, fn["Name"])
                        checked += 1
                t = lk.lookup(hex(start), to=True)
                assert t.block_id == first_at[start], (fn["Name"], hex(start))
    assert checked > 0
