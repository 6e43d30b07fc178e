"""The check registry: stable names, one generator of findings per rule.

Each check reads a :class:`~bbmap.verify.context.VerifyContext` and yields
:class:`~bbmap.verify.context.Finding` objects naming function, range and block.
Checks are vectorized over the columnar map where they can be, because a clang
binary has hundreds of thousands of blocks.  The rules, and why each holds for
what LLVM emits, are in ``spec/verify.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from bbmap.arrays import row_of
from bbmap.binary import disasm as D
from bbmap.binary.types import parent_name
from bbmap.errors import BBMapError
from bbmap.formats.bbaddrmap import (
    FEAT_BB_HASH,
    FEAT_BR_PROB,
    FEAT_OMIT_BB_ENTRIES,
    MD_CAN_FALL_THROUGH,
    MD_HAS_INDIRECT_BRANCH,
    MD_HAS_RETURN,
    MD_HAS_TAIL_CALL,
    PROB_ONE,
)
from bbmap.verify.context import (
    Finding,
    LastInstructions,
    VerifyContext,
    function_extents,
    last_instructions,
    range_symbol,
)

CheckFn = Callable[[VerifyContext], Iterator[Finding]]


@dataclass(frozen=True)
class Check:
    name: str
    rule: str
    group: str  # "map" | "instructions" | "coverage"
    fn: CheckFn


CHECKS: dict[str, Check] = {}


def check(name: str, rule: str, group: str = "map") -> Callable[[CheckFn], CheckFn]:
    def register(fn: CheckFn) -> CheckFn:
        CHECKS[name] = Check(name, rule, group, fn)
        return fn
    return register


# ---------------------------------------------------------------------------- map checks

@check("map-decodes", "every map section decodes to its end; declared block counts match")
def _map_decodes(ctx: VerifyContext) -> Iterator[Finding]:
    for d in getattr(ctx.binary, "diagnostics", ()):
        sec = d.section or ""
        if d.severity == "error" or "bb_addr_map" in sec or "bb_info" in sec:
            msg = d.message
            if d.offset is not None and f"{d.offset:#x}" not in msg:
                msg += f" (offset {d.offset:#x})"
            yield Finding("map-decodes", msg, address=d.offset,
                          section=sec.removeprefix("section ") or None)
    m = ctx.m
    if not m.num_functions:
        secs = ctx.binary.map_sections() if hasattr(ctx.binary, "map_sections") else []
        what = (f"{len(secs)} map section(s) hold no functions" if secs else
                "no SHT_LLVM_BB_ADDR_MAP section, .bb_info or BB label symbols")
        how = ctx.binary.stripped() if hasattr(ctx.binary, "stripped") else None
        if how and not secs:
            from bbmap.aggregate.explain import restore_advice

            what += (f"; the file was stripped ({how}) and llvm-strip removes the map with "
                     f"the symbols: {restore_advice(ctx.binary.build_id)}")
        yield Finding("map-decodes", f"no block map: {what}")
        return
    declared = m.range_num_blocks.astype(np.int64)
    actual = np.diff(m.range_block_ptr)
    omitted = (m.func_feature[ctx.range_func] & FEAT_OMIT_BB_ENTRIES) != 0
    for r in np.nonzero((declared != actual) & ~omitted)[0].tolist():
        yield ctx.finding("map-decodes", f"range declares {int(declared[r])} blocks but "
                          f"{int(actual[r])} were decoded", rng=r)


def _describe_address(ctx: VerifyContext, section: int, addr: int) -> str:
    """``inside foo+0x12`` for an address that no symbol starts at (for messages)."""
    syms = ctx.binary.symbols
    if not len(syms):
        return "the file has no code symbols: stripped? give its debug file (--debug-dir)"
    a = syms.address.astype(np.int64)
    ok = (syms.section == section) if ctx.relocatable else np.ones(len(a), dtype=bool)
    cand = np.nonzero(ok & (a <= addr) & (a + syms.size.astype(np.int64) > addr))[0]
    if len(cand):
        i = int(cand[-1])
        return f"inside {syms.names[i]}+{addr - int(a[i]):#x}"
    after = np.nonzero(ok & (a > addr) & (a <= addr + 64))[0]
    if len(after):
        i = int(after[np.argmin(a[after])])
        return f"not inside any code symbol; {syms.names[i]} starts at {int(a[i]):#x}"
    return "not inside any code symbol"


@check("function-symbol", "each function address starts a defined function symbol "
       "in an executable section")
def _function_symbol(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    syms = ctx.binary.symbols
    for f in range(m.num_functions):
        r0 = int(m.func_range_ptr[f])
        if r0 == int(m.func_range_ptr[f + 1]):
            continue
        addr = int(m.func_address[f])
        sec_i = int(ctx.range_section[r0])
        sec = ctx.section_of(sec_i)
        if sec is None or not sec.is_exec:
            yield ctx.finding("function-symbol", f"address {addr:#x} is in no executable "
                              "section", func=f, rng=r0, address=addr)
            continue
        i = ctx.symbol_at(sec_i, addr, func_only=True)
        if i < 0:
            part = ctx.symbol_at(sec_i, addr)
            what = (f"only {syms.names[part]} (not STT_FUNC) starts there" if part >= 0
                    else _describe_address(ctx, sec_i, addr))
            yield ctx.finding("function-symbol", f"no function symbol starts at {addr:#x} "
                              f"({what})", func=f, rng=r0, address=addr)


@check("block-order", "blocks are sorted and disjoint within a range, and no two ranges "
       "overlap")
def _block_order(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    if m.num_blocks > 1:
        same = ctx.block_range[1:] == ctx.block_range[:-1]
        s, e = ctx.block_start, ctx.block_end
        bad = np.nonzero(same & (s[1:] < e[:-1]))[0]
        for i in bad.tolist():
            b = i + 1
            how = "is before" if s[b] < s[i] else "overlaps"
            yield ctx.finding("block-order", f"block {ctx.block_text(b)} {how} the previous "
                              f"block {int(m.block_id[i])} {ctx.block_text(i)}", block=b,
                              address=int(s[b]))
    # ranges of all functions, per section
    lo_col, hi_col = ctx.range_start, ctx.range_end
    keep = np.nonzero(hi_col > lo_col)[0]
    ext = sorted(zip(ctx.range_section[keep].tolist(), lo_col[keep].tolist(),
                     hi_col[keep].tolist(), keep.tolist()))
    prev: tuple[int, int, int, int] | None = None
    for cur in ext:
        if prev is not None and cur[0] == prev[0] and cur[1] < prev[2]:
            pf = int(ctx.range_func[prev[3]])
            yield ctx.finding(
                "block-order", f"range [{cur[1]:#x}, {cur[2]:#x}) overlaps range "
                f"{int(ctx.range_index_in_func[prev[3]])} [{prev[1]:#x}, {prev[2]:#x}) of "
                f"function {ctx.func_name(pf)}", rng=cur[3], address=cur[1])
        if prev is None or cur[0] != prev[0] or cur[2] > prev[2]:
            prev = cur


@check("block-bounds", "blocks stay inside the size of the symbol at their range's base and "
       "inside the range's section")
def _block_bounds(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    syms = ctx.binary.symbols
    for r in range(m.num_ranges):
        b0, b1 = int(m.range_block_ptr[r]), int(m.range_block_ptr[r + 1])
        if b1 == b0:
            continue
        sec = ctx.section_of(int(ctx.range_section[r]))
        base = int(m.range_base[r])
        if sec is None:
            if int(ctx.range_index_in_func[r]) > 0:
                yield ctx.finding("block-bounds", f"range base {base:#x} is in no "
                                  "executable section", rng=r, address=base)
            continue
        s, e = ctx.block_start[b0:b1], ctx.block_end[b0:b1]
        lo, hi = sec.sh_addr, sec.sh_addr + sec.sh_size
        for k in np.nonzero((s < lo) | (e > hi))[0].tolist():
            b = b0 + k
            yield ctx.finding("block-bounds", f"block {ctx.block_text(b)} leaves section "
                              f"{sec.name} [{lo:#x}, {hi:#x})", block=b, address=int(s[k]))
        i = range_symbol(ctx, r)
        if i < 0 or int(syms.size[i]) == 0:
            continue
        end = base + int(syms.size[i])
        for k in np.nonzero(e > end)[0].tolist():
            b = b0 + k
            yield ctx.finding("block-bounds", f"block {ctx.block_text(b)} ends after "
                              f"{syms.names[i]} [{base:#x}, {end:#x}) (symbol size "
                              f"{int(syms.size[i])})", block=b, address=int(e[k]))


@check("block-ids-unique", "block IDs are unique within a function")
def _block_ids_unique(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    if not m.num_blocks:
        return
    key = (ctx.block_func.astype(np.uint64) << np.uint64(32)) | m.block_id.astype(np.uint64)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    dup = np.nonzero(ks[1:] == ks[:-1])[0]
    for i in dup.tolist():
        b, first = int(order[i + 1]), int(order[i])
        yield ctx.finding("block-ids-unique", f"ID {int(m.block_id[b])} at "
                          f"{ctx.block_text(b)} is also the ID of the block at "
                          f"{ctx.block_text(first)}", block=b, address=int(ctx.block_start[b]))


@check("range-parts", "a function's ranges after the first start at its .cold / .__part.N / "
       ".eh symbols, one range per such symbol")
def _range_parts(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    syms = ctx.binary.symbols
    parts = ctx.parts_by_parent
    by_name: dict[str, list[int]] = {}
    for f in range(m.num_functions):
        name = ctx.func_name(f)
        if name:
            by_name.setdefault(parent_name(name), []).append(f)
    for name, funcs in by_name.items():
        part_syms = parts.get((-1, name), [])
        part_keys = {}
        for i in part_syms:
            key = (int(syms.section[i]) if ctx.relocatable else -1, int(syms.address[i]))
            part_keys.setdefault(key, i)
        matched: set[tuple[int, int]] = set()
        for f in funcs:
            seen: dict[tuple[int, int], int] = {}
            for r in m.function_ranges(f):
                if int(ctx.range_index_in_func[r]) == 0:
                    continue
                lo, hi = ctx.range_extent(r)
                if hi == lo:
                    continue  # an empty part: its symbol has size 0 and may share the address
                base = int(m.range_base[r])
                key = (int(ctx.range_section[r]) if ctx.relocatable else -1, base)
                if key not in part_keys:
                    other = ctx.symbol_at(int(ctx.range_section[r]), base)
                    what = (f"{syms.names[other]} starts there" if other >= 0
                            else _describe_address(ctx, int(ctx.range_section[r]), base))
                    yield ctx.finding("range-parts", f"range at {base:#x} starts no "
                                      f".cold/.__part.N/.eh symbol of {name} ({what})", rng=r,
                                      address=base)
                elif key in seen:
                    yield ctx.finding("range-parts", f"range at {base:#x} repeats range "
                                      f"{seen[key]} ({syms.names[part_keys[key]]})", rng=r,
                                      address=base)
                else:
                    seen[key] = int(ctx.range_index_in_func[r])
                    matched.add(key)
        for key, i in part_keys.items():
            if key not in matched:
                f = funcs[0]
                yield ctx.finding("range-parts", f"symbol {syms.names[i]} at {key[1]:#x} has "
                                  "no range in the map", func=f, address=key[1])


@check("pgo-successors", "PGO successors name blocks of the same function and a block's "
       "branch probabilities sum to at most one")
def _pgo_successors(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    if not len(m.succ_id):
        return
    owner = row_of(m.block_succ_ptr)
    ofunc = ctx.block_func[owner]
    keys = np.sort((ctx.block_func.astype(np.uint64) << np.uint64(32))
                   | m.block_id.astype(np.uint64))
    want = (ofunc.astype(np.uint64) << np.uint64(32)) | m.succ_id.astype(np.uint64)
    pos = np.searchsorted(keys, want)
    found = np.zeros(len(want), dtype=bool)
    inb = pos < len(keys)
    found[inb] = keys[pos[inb]] == want[inb]
    for s in np.nonzero(~found)[0].tolist():
        b = int(owner[s])
        yield ctx.finding("pgo-successors", f"successor ID {int(m.succ_id[s])} is not a block "
                          "of this function", block=b, address=int(ctx.block_start[b]))
    total = np.bincount(owner, weights=m.succ_prob.astype(np.float64),
                        minlength=m.num_blocks)
    count = np.diff(m.block_succ_ptr)
    # each numerator may be rounded up by one when LLVM scales probabilities
    over = np.nonzero(total > PROB_ONE + count)[0]
    for b in over.tolist():
        yield ctx.finding("pgo-successors", f"branch probabilities sum to "
                          f"{int(total[b]):#x}/{PROB_ONE:#x} = {total[b] / PROB_ONE:.4f} > 1",
                          block=b, address=int(ctx.block_start[b]))
    nobr = (m.func_feature[ctx.block_func[owner]] & FEAT_BR_PROB) == 0
    for s in np.nonzero(nobr)[0][:1].tolist():
        b = int(owner[s])
        yield ctx.finding("pgo-successors", "successors present but the function's BrProb "
                          "feature bit is clear", block=b)


@check("callsite-offsets", "callsite offsets lie inside their block and mark a call "
       "(its end from map version 4, its start in version 3)")
def _callsite_offsets(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    if not len(m.callsite_offsets):
        return
    owner = row_of(m.block_cs_ptr)
    ver = m.func_version[ctx.block_func[owner]]
    cs = m.callsite_offsets.astype(np.int64)
    size = m.block_size[owner].astype(np.int64)
    end_sem = ver != 3
    inside = np.where(end_sem, (cs > 0) & (cs <= size), (cs >= 0) & (cs < size))
    for s in np.nonzero(~inside)[0].tolist():
        b = int(owner[s])
        yield ctx.finding("callsite-offsets", f"callsite offset {int(cs[s])} is outside the "
                          f"block (size {int(size[s])})", block=b,
                          address=int(ctx.block_start[b]) + int(cs[s]))
    try:
        code = ctx.code
    except BBMapError as e:  # not x86: the offsets were still bounds-checked above
        ctx.notes.append(f"callsite-offsets: call instructions not checked ({e})")
        return
    sel = np.nonzero(inside & code.decoded[ctx.block_range[owner]])[0]
    if not len(sel):
        return
    rng = ctx.block_range[owner[sel]]
    addr = ctx.block_start[owner[sel]] + cs[sel].astype(np.uint64)
    j = np.where(end_sem[sel], code.ending_at(rng, addr), code.starting_at(rng, addr))
    kinds = (np.where(j >= 0, code.kinds[np.maximum(j, 0)], 255) if len(code.kinds)
             else np.full(len(j), 255))  # nothing decoded: no offset is after a call
    for k in np.nonzero(~np.isin(kinds, list(_CALL_LIKE)))[0].tolist():
        s, jk = int(sel[k]), int(j[k])
        b = int(owner[s])
        where = "after" if end_sem[s] else "at"
        got = code.text(jk) if jk >= 0 else "no instruction boundary"
        yield ctx.finding("callsite-offsets", f"callsite offset {int(cs[s])} "
                          f"({int(addr[k]):#x}) is not {where} a call: {got}", block=b,
                          address=int(addr[k]))


_CALL_LIKE = {D.CALL, D.CALL_INDIRECT, D.JMP, D.JMP_INDIRECT, D.JCC}


@check("block-hash", "every block has a hash when the function's BBHash feature is set")
def _block_hash(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    if not m.num_blocks:
        return
    want = (m.func_feature[ctx.block_func] & FEAT_BB_HASH) != 0
    for b in np.nonzero(want & (m.block_hash == 0))[0].tolist():
        yield ctx.finding("block-hash", "BBHash feature set but the block's hash is 0 "
                          "(missing)", block=b, address=int(ctx.block_start[b]))


# ---------------------------------------------------------------------------- instructions

@check("instruction-boundaries", "every block start and end is an instruction boundary "
       "of a linear sweep from the range base", "instructions")
def _instruction_boundaries(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    code = ctx.code
    for r, a in code.bad:
        yield ctx.finding("instruction-boundaries", f"bytes at {a:#x} do not decode as an "
                          "instruction", rng=r, address=a)
    if not m.num_blocks:
        return
    sel = np.nonzero(code.decoded[ctx.block_range])[0]
    rng = ctx.block_range[sel]
    s, e = ctx.block_start[sel], ctx.block_end[sel]
    oks, oke = code.is_boundary(rng, s), code.is_boundary(rng, e)
    for k in np.nonzero(~oks | ~oke)[0].tolist():
        b = int(sel[k])
        which = "start" if not oks[k] else "end"
        addr = int(s[k]) if not oks[k] else int(e[k])
        j = code.containing(int(rng[k]), addr)
        within = f" (inside {code.text(j)})" if j >= 0 else ""
        yield ctx.finding("instruction-boundaries", f"block {ctx.block_text(b)} {which} "
                          f"{addr:#x} is not an instruction boundary{within}", block=b,
                          address=addr)


def _md_blocks(ctx: VerifyContext, mask: np.ndarray) -> Iterator[int]:
    return iter(np.nonzero(mask)[0].tolist())


def _desc(li: LastInstructions, b: int) -> str:
    return f"ends in {D.KIND_NAMES.get(int(li.kind[b]), '?')} ({li.text(b)})"


@check("md-return", "a block flagged has_return (and not has_tail_call) ends in ret; a block "
       "ending in ret is flagged has_return", "instructions")
def _md_return(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    li = last_instructions(ctx)
    md = m.block_md
    known = li.kind >= 0
    flagged = ((md & MD_HAS_RETURN) != 0) & ((md & MD_HAS_TAIL_CALL) == 0)
    for b in _md_blocks(ctx, known & flagged & (li.kind != D.RET)):
        yield ctx.finding("md-return", f"has_return but {_desc(li, b)}", block=b,
                          address=int(ctx.block_start[b]))
    for b in _md_blocks(ctx, known & (li.kind == D.RET) & ((md & MD_HAS_RETURN) == 0)):
        yield ctx.finding("md-return", f"ends in ret ({li.text(b)}) but has_return is clear",
                          block=b, address=int(ctx.block_start[b]))


def _target_outside(ctx: VerifyContext, b: int, target: int) -> bool:
    f = int(ctx.block_func[b])
    sec = int(ctx.range_section[int(ctx.block_range[b])])
    for s, lo, hi, _ in function_extents(ctx).get(f, []):
        if lo <= target < hi and (s == sec or not ctx.relocatable):
            return False
    return True


@check("md-tail-call", "a block flagged has_tail_call also has has_return and ends in a jump "
       "out of the function (jmp, indirect jmp, or a conditional tail call)", "instructions")
def _md_tail_call(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    li = last_instructions(ctx)
    md = m.block_md
    tail = (md & MD_HAS_TAIL_CALL) != 0
    for b in _md_blocks(ctx, tail & ((md & MD_HAS_RETURN) == 0)):
        yield ctx.finding("md-tail-call", "has_tail_call without has_return", block=b,
                          address=int(ctx.block_start[b]))
    for b in _md_blocks(ctx, tail & (li.kind >= 0)):
        k = int(li.kind[b])
        if k == D.JMP_INDIRECT:
            continue
        if k in (D.JMP, D.JCC):
            if li.relocated[b] or _target_outside(ctx, b, int(li.target[b])):
                continue
            yield ctx.finding("md-tail-call", f"has_tail_call but {_desc(li, b)}, which stays "
                              "inside the function", block=b, address=int(ctx.block_start[b]))
            continue
        yield ctx.finding("md-tail-call", f"has_tail_call but {_desc(li, b)}", block=b,
                          address=int(ctx.block_start[b]))


@check("md-indirect-branch", "a block flagged has_indirect_branch ends in an indirect jump",
       "instructions")
def _md_indirect_branch(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    li = last_instructions(ctx)
    flagged = (m.block_md & MD_HAS_INDIRECT_BRANCH) != 0
    for b in _md_blocks(ctx, flagged & (li.kind >= 0) & (li.kind != D.JMP_INDIRECT)):
        yield ctx.finding("md-indirect-branch", f"has_indirect_branch but {_desc(li, b)}",
                          block=b, address=int(ctx.block_start[b]))


_NO_FALLTHROUGH_ENDS = (D.JMP, D.JMP_INDIRECT, D.RET, D.TRAP, D.CALL, D.CALL_INDIRECT)


def fallthrough_known(ctx: VerifyContext) -> np.ndarray:
    """Per function: can the map's version carry CanFallThrough?

    Version 0 comes from LLVM 12 (never sets the bit) and 13-14 (do); they cannot be
    told apart by bytes, so a version-0 map counts only if some block sets the bit.
    Symbol-derived maps (LLVM 11 labels, .bb_info) never carry it.
    """
    m = ctx.m
    ver = m.func_version.astype(np.int64)
    known = ver >= 1
    v0 = ver == 0
    if v0.any():
        bv0 = v0[ctx.block_func] if m.num_blocks else np.zeros(0, bool)
        if bool(np.any((m.block_md[bv0] & MD_CAN_FALL_THROUGH) != 0)):
            known |= v0
        else:
            ctx.notes.append(f"md-fallthrough: {int(v0.sum())} version-0 function(s) never set "
                             "CanFallThrough (LLVM 12 emits none): not checked")
    if (ver < 0).any():
        ctx.notes.append(f"md-fallthrough: {int((ver < 0).sum())} function(s) from label "
                         "symbols or .bb_info carry no CanFallThrough bit: not checked")
    return known


@check("md-fallthrough", "a block without can_fall_through ends in an unconditional transfer "
       "(jmp, ret, trap, or a call that does not return)", "instructions")
def _md_fallthrough(ctx: VerifyContext) -> Iterator[Finding]:
    m = ctx.m
    if not m.num_blocks:
        return
    li = last_instructions(ctx)
    known = fallthrough_known(ctx)[ctx.block_func]
    noft = ((m.block_md & MD_CAN_FALL_THROUGH) == 0) & known & (li.kind >= 0)
    bad = noft & ~np.isin(li.kind, _NO_FALLTHROUGH_ENDS)
    for b in _md_blocks(ctx, bad):
        yield ctx.finding("md-fallthrough", f"cannot fall through but {_desc(li, b)}",
                          block=b, address=int(ctx.block_start[b]))


# ---------------------------------------------------------------------------- coverage

@check("coverage", "every byte of a mapped function is in a block or is padding; the label "
       "totals equal each executable section's size", "coverage")
def _coverage(ctx: VerifyContext) -> Iterator[Finding]:
    from bbmap.verify.coverage import compute_coverage

    cov = compute_coverage(ctx)
    ctx.cache["coverage"] = cov
    for sc in cov.sections:
        if not sc.exact:
            yield Finding("coverage", f"labels add up to {sum(sc.totals.values())} bytes, "
                          f"not the section size {sc.size}", section=f"[{sc.index}] {sc.name}")
    # unexplained bytes inside mapped functions' extents: one finding per range
    ext = function_extents(ctx)
    by_sec: dict[int, list[tuple[int, int, int, int]]] = {}
    for f, lst in ext.items():
        for sec, lo, hi, r in lst:
            by_sec.setdefault(sec, []).append((lo, hi, f, r))
    for sc in cov.sections:
        if not sc.unexplained or sc.index not in by_sec:
            continue
        u0 = np.array([a for a, _ in sc.unexplained], dtype=np.int64)  # sorted, disjoint
        u1 = np.array([b for _, b in sc.unexplained], dtype=np.int64)
        for lo, hi, f, r in by_sec[sc.index]:
            i0 = int(np.searchsorted(u1, lo, side="right"))
            i1 = int(np.searchsorted(u0, hi, side="left"))
            if i1 <= i0:
                continue
            total = int((np.minimum(u1[i0:i1], hi) - np.maximum(u0[i0:i1], lo)).sum())
            first = (max(int(u0[i0]), lo), min(int(u1[i0]), hi))
            b0, b1 = int(ctx.m.range_block_ptr[r]), int(ctx.m.range_block_ptr[r + 1])
            before = np.nonzero(ctx.block_end[b0:b1] <= first[0])[0]
            after = (f" (after block {int(ctx.m.block_id[b0 + int(before[-1])])})"
                     if len(before) else " (before the first block)")
            yield ctx.finding("coverage", f"{total} byte(s) in {i1 - i0} stretch(es) of "
                              f"[{lo:#x}, {hi:#x}) are in no block and are not padding; first "
                              f"[{first[0]:#x}, {first[1]:#x}){after}", func=f, rng=r,
                              address=first[0])
