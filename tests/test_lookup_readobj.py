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


@pytest.mark.skipif(not CASES, reason="corpus not built")
@pytest.mark.parametrize("case", CASES[:4], ids=[c["name"] for c in CASES[:4]])
def test_cli_json_and_text_name_readobjs_block(case: dict) -> None:
    """Was: ``lookup --json`` said "block": 14 (bbmap's array index) where the text said
    ``block 12`` (the ID) for the same address; readobj says 12.  Both must say readobj's
    ID and range place; the array positions are the ``*_index`` fields."""
    from click.testing import CliRunner

    from bbmap.cli import main

    golden = json.loads((CORPUS / case["goldens"]["readobj"]).read_text())
    want: dict[int, tuple[int, int]] = {}
    for fn in (_normalize(f["Function"]) for part in golden for f in _maps(part)):
        for ri, rng in enumerate(fn["BB Ranges"]):
            for e in rng["BB Entries"]:
                if e["Size"]:
                    want.setdefault(rng["Base Address"] + e["Offset"], (e["ID"], ri))
    addrs = sorted(want)[:: max(1, len(want) // 40)]
    path = str(CORPUS / case["path"])
    runner = CliRunner()
    js = runner.invoke(main, ["lookup", path, *map(hex, addrs), "--json"])
    text = runner.invoke(main, ["lookup", path, *map(hex, addrs)])
    assert js.exit_code == text.exit_code == 0, js.output + text.output
    lines = [ln for ln in text.stdout.splitlines() if ln.startswith("0x")]
    moved = 0
    for a, rep, line in zip(addrs, json.loads(js.stdout), lines, strict=True):
        block_id, range_place = want[a]
        assert (rep["block"], rep["block_id"], rep["range"]) == \
            (block_id, block_id, range_place), hex(a)
        assert f"  block {block_id} [" in line and f"  range {range_place}/" in line, line
        moved += rep["block_index"] != block_id
    assert moved, "no address where the array index differs from the ID: test proves little"


def test_cli_address_spaces_exclude_each_other() -> None:
    """Was: ``--offset --vma`` accepted (the last won) and printed nonsense."""
    from click.testing import CliRunner

    from bbmap.cli import main

    if not CASES:
        pytest.skip("corpus not built")
    path = str(CORPUS / CASES[0]["path"])
    for flags in (["--offset", "--vma"], ["--vma", "--offset"], ["--offset", "--vaddr"]):
        r = CliRunner().invoke(main, ["lookup", path, "0x1180", *flags, "--base", "0x5555"])
        assert r.exit_code == 2 and "exclude each other" in r.stderr, r.output
        assert r.stderr.count("\n") == 1 and r.stdout == ""
