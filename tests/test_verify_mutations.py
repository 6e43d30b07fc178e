"""Each check fails, alone, on a corpus binary mutated to break exactly its rule.

Mutations are made at test time with bbmap's own writer (``tests/mutate.py``):
decode the map, change one field, re-encode, patch the file.  The block to mutate
is chosen from the real binary's disassembly so that only the intended rule breaks.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

import mutate
import pytest
from helpers import corpus_binary

from bbmap.binary import disasm as D
from bbmap.binary import load_binary
from bbmap.formats.bbaddrmap import MD_CAN_FALL_THROUGH as FT
from bbmap.formats.bbaddrmap import MD_HAS_INDIRECT_BRANCH as IND
from bbmap.formats.bbaddrmap import MD_HAS_RETURN as RET
from bbmap.formats.bbaddrmap import MD_HAS_TAIL_CALL as TC
from bbmap.verify.api import verify
from bbmap.verify.checks import last_instructions
from bbmap.verify.context import VerifyContext

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def survey(path: Path) -> list[dict]:
    """Every block of the original binary with what the mutations need to choose one."""
    ctx = VerifyContext(load_binary(path))
    li = last_instructions(ctx)
    m = ctx.m
    code = ctx.code
    first = code.starting_at(ctx.block_range, ctx.block_start)
    rows = []
    for b in range(m.num_blocks):
        j = int(first[b])
        inside = (code.start >= ctx.block_start[b]) & (code.start < ctx.block_end[b])
        rows.append({
            "b": b, "func": ctx.func_name(int(ctx.block_func[b])), "id": int(m.block_id[b]),
            "md": int(m.block_md[b]), "kind": int(li.kind[b]), "size": int(m.block_size[b]),
            "cs": [int(c) for c in m.block_callsites(b)], "range": int(ctx.block_range[b]),
            "start": int(ctx.block_start[b]), "end": int(ctx.block_end[b]),
            "first_kind": code.kind(j)[0] if j >= 0 else -1,
            "first_size": int(code.size[j]) if j >= 0 else 0,
            "ninsn": int(inside.sum()),
            "succ": list(m.block_successors(b)), "hash": int(m.block_hash[b]),
        })
    return rows


def edit_block(func: str, block_id: int, **changes):
    def edit(records):
        fn = mutate.find_function(records, func)
        for blk in mutate.blocks(fn):
            if blk.id == block_id:
                for k, v in changes.items():
                    setattr(blk, k, v(blk) if callable(v) else v)
                return
        raise AssertionError(f"{func} has no block {block_id}")
    return edit


def expect_only(path: Path, check: str, func: str | None, block: int | None) -> None:
    rep = verify(path)
    assert rep.failed_checks == [check], rep.format()
    text = rep.format()
    if func is not None:
        assert any(f.function == func or func in f.message for f in rep.findings), text
    if block is not None:
        assert any(f.block_id == block for f in rep.findings), text


def test_identity_rewrite_is_byte_exact(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    out = tmp_path / "same.pie"
    mutate.rewrite_map(src, out, lambda recs: None)
    assert filecmp.cmp(src, out, shallow=False)
    assert verify(out).ok


def _pick(rows, pred):
    for r in rows:
        if pred(r):
            return r
    pytest.skip("no block fits this mutation")


def test_md_return(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    r = _pick(survey(src), lambda r: r["md"] == FT and r["kind"] in (D.OTHER, D.JCC))
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], md=FT | RET))
    expect_only(out, "md-return", r["func"], r["id"])


def test_md_return_converse(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    r = _pick(survey(src), lambda r: r["md"] == RET and r["kind"] == D.RET)
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], md=0))
    expect_only(out, "md-return", r["func"], r["id"])


def test_md_tail_call(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    r = _pick(survey(src), lambda r: r["md"] == RET and r["kind"] == D.RET)
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], md=RET | TC))
    expect_only(out, "md-tail-call", r["func"], r["id"])


def test_md_tail_call_inside_function(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    rows = survey(src)
    r = _pick(rows, lambda r: r["md"] == 0 and r["kind"] == D.JMP)
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], md=RET | TC))
    expect_only(out, "md-tail-call", r["func"], r["id"])
    assert "inside the function" in verify(out).format()


def test_md_indirect_branch(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    r = _pick(survey(src), lambda r: r["md"] == RET and r["kind"] == D.RET)
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], md=RET | IND))
    expect_only(out, "md-indirect-branch", r["func"], r["id"])


def test_md_fallthrough(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    r = _pick(survey(src), lambda r: r["md"] == FT and r["kind"] == D.JCC)
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], md=0))
    expect_only(out, "md-fallthrough", r["func"], r["id"])


def test_block_ids_unique(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    rows = survey(src)
    r = _pick(rows, lambda r: r["id"] != 0 and r["func"] == rows[r["b"] - 1]["func"])
    prev = rows[r["b"] - 1]
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], id=prev["id"]))
    expect_only(out, "block-ids-unique", r["func"], prev["id"])


def test_block_hash(tmp_path):
    src = corpus_binary("c22-bbhash-pie")
    r = _pick(survey(src), lambda r: r["hash"] != 0)
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], hash=0))
    expect_only(out, "block-hash", r["func"], r["id"])


def test_pgo_successor_unknown_id(tmp_path):
    src = corpus_binary("c22-pgomap-prof-pie")
    r = _pick(survey(src), lambda r: len(r["succ"]) >= 1)
    out = tmp_path / "m.pie"
    bad = ((9999, r["succ"][0][1], r["succ"][0][2]),) + tuple(r["succ"][1:])
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], successors=bad))
    expect_only(out, "pgo-successors", r["func"], r["id"])
    assert "9999" in verify(out).format()


def test_pgo_probabilities_over_one(tmp_path):
    src = corpus_binary("c22-pgomap-prof-pie")
    r = _pick(survey(src), lambda r: len(r["succ"]) >= 2)
    out = tmp_path / "m.pie"
    bad = tuple((s[0], 1 << 31, s[2]) for s in r["succ"])
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], successors=bad))
    expect_only(out, "pgo-successors", r["func"], r["id"])


def test_callsite_offsets(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    r = _pick(survey(src), lambda r: r["cs"] and r["cs"][0] > 1)
    out = tmp_path / "m.pie"
    cs = (r["cs"][0] - 1,) + tuple(r["cs"][1:])
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"], callsites=cs))
    expect_only(out, "callsite-offsets", r["func"], r["id"])


def _adjacent(rows, i, j):
    return rows[i]["range"] == rows[j]["range"] and rows[i]["end"] == rows[j]["start"]


def test_instruction_boundaries(tmp_path):
    """Move the boundary between two blocks one byte into an instruction."""
    src = corpus_binary("c22-addrmap-pie")
    rows = survey(src)
    r = _pick(rows[:-1], lambda r: r["md"] == FT and _adjacent(rows, r["b"], r["b"] + 1)
              and rows[r["b"] + 1]["first_kind"] not in (D.RET,)
              and rows[r["b"] + 1]["size"] > 1 and not rows[r["b"] + 1]["cs"]
              and rows[r["b"] + 1]["first_size"] > 1)
    nxt = rows[r["b"] + 1]

    def edit(records):
        fn = mutate.find_function(records, r["func"])
        for blk in mutate.blocks(fn):
            if blk.id == r["id"]:
                blk.size += 1
            elif blk.id == nxt["id"]:
                blk.offset += 1
                blk.size -= 1
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit)
    expect_only(out, "instruction-boundaries", r["func"], r["id"])
    rep = verify(out)
    assert {f.block_id for f in rep.findings} <= {r["id"], nxt["id"]}


def test_coverage_gap_inside_function(tmp_path):
    """Start a block one instruction late: that instruction is in no block."""
    src = corpus_binary("c22-addrmap-pie")
    rows = survey(src)
    r = _pick(rows[1:], lambda r: r["ninsn"] >= 2 and not r["cs"] and r["first_kind"]
              not in (D.NOP, D.TRAP) and _adjacent(rows, r["b"] - 1, r["b"]))
    out = tmp_path / "m.pie"
    n = r["first_size"]
    mutate.rewrite_map(src, out, edit_block(r["func"], r["id"],
                                            offset=lambda b: b.offset + n,
                                            size=lambda b: b.size - n))
    expect_only(out, "coverage", r["func"], None)
    rep = verify(out)
    assert f"after block {rows[r['b'] - 1]['id']}" in rep.format()
    assert rep.coverage is not None and rep.coverage.exact
    assert f"{r['start']:#x}" in rep.format()


def test_block_order_v0(tmp_path):
    """Version 0 offsets are absolute, so two blocks can be listed out of order."""
    src = corpus_binary("c14-labels-pie")
    rows = survey(src)
    r = _pick(rows[:-1], lambda r: r["size"] > 0 and rows[r["b"] + 1]["size"] > 0
              and rows[r["b"] + 1]["range"] == r["range"])

    def edit(records):
        fn = mutate.find_function(records, r["func"])
        blks = fn.ranges[0].blocks
        k = next(i for i, b in enumerate(blks) if b.offset == r["start"] - fn.address)
        blks[k], blks[k + 1] = blks[k + 1], blks[k]
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit)
    expect_only(out, "block-order", r["func"], None)


def test_block_bounds_symbol_size(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    b = load_binary(src)
    syms = b.symbols
    name = "lay_scan"
    i = syms.names.index(name)
    out = tmp_path / "m.pie"
    mutate.patch_symbol(src, out, name, size=int(syms.size[i]) - 1)
    end = int(syms.address[i]) + int(syms.size[i])
    last = [r for r in survey(src) if r["func"] == name and r["end"] == end]
    expect_only(out, "block-bounds", name, last[-1]["id"])


def test_function_symbol_moved(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    b = load_binary(src)
    name = "lay_scan"
    i = b.symbols.names.index(name)
    out = tmp_path / "m.pie"
    mutate.patch_symbol(src, out, name, value=int(b.symbols.address[i]) + 1)
    expect_only(out, "function-symbol", name, None)


def _part_symbol(path: Path, suffix: str) -> str:
    b = load_binary(path)
    funcs = set(n for n in b.block_map.func_name if n)
    for n in b.symbols.names:
        if n.endswith(suffix) and n[: -len(suffix)] in funcs:
            return n
    pytest.skip(f"no {suffix} symbol")


def test_range_parts_renamed_symbol(tmp_path):
    src = corpus_binary("c22-list-pie")
    part = _part_symbol(src, ".cold")
    out = tmp_path / "m.pie"
    mutate.patch_symbol(src, out, part, rename=part[:-1] + "D")
    expect_only(out, "range-parts", part[: -len(".cold")], None)


def test_range_parts_missing_range(tmp_path):
    src = corpus_binary("c22-list-pie")
    part = _part_symbol(src, ".cold")
    parent = part[: -len(".cold")]
    b = load_binary(src)
    addr = int(b.symbols.address[b.symbols.names.index(part)])

    def edit(records):
        fn = mutate.find_function(records, parent)
        fn.ranges = [r for r in fn.ranges if r.base != addr]
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit)
    expect_only(out, "range-parts", parent, None)
    assert part in verify(out).format()


def test_map_decodes_truncated(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, lambda recs: None, raw=lambda data: data + b"\x05")
    rep = verify(out)
    assert rep.failed_checks == ["map-decodes"], rep.format()
    assert any(f.section and "bb_addr_map" in f.section for f in rep.findings)


def test_mutation_refuses_objects():
    src = corpus_binary("c22-addrmap-obj")
    from bbmap.errors import BBMapError

    with pytest.raises(BBMapError, match="linked file"):
        mutate.rewrite_map(src, "/nonexistent/x", lambda recs: None)


def test_mutated_file_grows_section_at_end(tmp_path):
    """A longer map is appended and the section header points at it."""
    src = corpus_binary("c22-addrmap-pie")
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit_block("lay_scan", 0, id=1000))
    assert out.stat().st_size > src.stat().st_size
    rep = verify(out)
    assert rep.ok, rep.format()
    ids = load_binary(out).block_map.block_id.tolist()
    assert 1000 in ids


def test_v0_without_fallthrough_bits_is_not_judged(tmp_path):
    """LLVM 12 writes version 0 without CanFallThrough: the rule is skipped, and said so."""
    src = corpus_binary("c14-labels-pie")

    def edit(records):
        for fn in records:
            for b in mutate.blocks(fn):
                b.md &= ~FT
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit)
    rep = verify(out)
    assert rep.ok, rep.format()
    assert any("CanFallThrough" in n for n in rep.notes)
    assert "note:" in rep.format()


def test_block_order_ranges_of_two_functions_overlap(tmp_path):
    """A block running into the next function: its range overlaps that function's."""
    src = corpus_binary("c22-addrmap-pie")
    rows = survey(src)
    funcs = [r["func"] for r in rows]
    first, second = funcs[0], next(f for f in funcs if f != funcs[0])
    start2 = min(r["start"] for r in rows if r["func"] == second)

    def edit(records):
        fn = mutate.find_function(records, first)
        last = fn.ranges[0].blocks[-1]
        last.size = start2 + 4 - (fn.ranges[0].base + last.offset)
    out = tmp_path / "m.pie"
    mutate.rewrite_map(src, out, edit)
    rep = verify(out)
    assert "block-order" in rep.failed_checks
    assert f"of function {first}" in rep.format() or f"function {first}" in rep.format()
    assert "overlaps range 0" in rep.format()
