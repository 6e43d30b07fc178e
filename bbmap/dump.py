# ruff: noqa: UP031 - %-formatting of preformatted JSON fragments is the fast path here
"""``bbmap dump``: every function, range and block of a binary's maps, as JSON or text.

The JSON shape is written down in ``spec/dump-json.md``.  A clang-sized map has
millions of blocks, so the JSON text is assembled from preformatted fragments (one
``%`` format per block over plain lists) rather than ``json.dumps`` of a dict per
block; :func:`dump` is ``json.loads`` of that same text, so both views agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np

from bbmap.binary import Binary, load_binary
from bbmap.formats.bbaddrmap import SHT_LLVM_BB_ADDR_MAP, SHT_LLVM_BB_ADDR_MAP_V0
from bbmap.model import (
    FEAT_BB_FREQ,
    FEAT_BB_HASH,
    FEAT_BR_PROB,
    FEAT_CALLSITE_OFFSETS,
    FEAT_FUNC_ENTRY_COUNT,
    FEAT_POST_LINK_CFG,
    MD_NAMES,
    BlockMap,
    MapSource,
)

_MD_JSON = []
for _md in range(256):
    _MD_JSON.append("{" + ",".join(f'"{k}":{"true" if _md & bit else "false"}'
                                   for k, bit in MD_NAMES.items()) + "}")


def source_format(src: MapSource) -> str:
    if src.kind == "label-symbols":
        return "label-symbols"
    if src.kind == "bb_info":
        return "bb_info"
    return {SHT_LLVM_BB_ADDR_MAP: "SHT_LLVM_BB_ADDR_MAP",
            SHT_LLVM_BB_ADDR_MAP_V0: "SHT_LLVM_BB_ADDR_MAP_V0"}.get(src.sh_type,
                                                                   hex(src.sh_type))


def _block_fragments(m: BlockMap, feats_per_block: np.ndarray) -> list[str]:
    """One JSON object per block (without PGO, which lives under the function)."""
    ids = m.block_id.tolist()
    offs = m.block_offset.tolist()
    sizes = m.block_size.tolist()
    mds = [_MD_JSON[x] for x in m.block_md.tolist()]
    base = ['{"id":%d,"offset":%d,"size":%d,"metadata":%s' % t
            for t in zip(ids, offs, sizes, mds)]
    cs_on = (feats_per_block & FEAT_CALLSITE_OFFSETS) != 0
    hash_on = (feats_per_block & FEAT_BB_HASH) != 0
    if cs_on.any():
        ptr = m.block_cs_ptr
        cs = m.callsite_offsets.tolist()
        for b in np.nonzero(cs_on)[0].tolist():
            base[b] += ',"callsite_offsets":[%s]' % ",".join(
                map(str, cs[int(ptr[b]):int(ptr[b + 1])]))
    if hash_on.any():
        hashes = m.block_hash.tolist()
        for b in np.nonzero(hash_on)[0].tolist():
            base[b] += ',"hash":%d' % hashes[b]
    return base


def _pgo_json(m: BlockMap, f: int, feat: int) -> str | None:
    if not feat & (FEAT_FUNC_ENTRY_COUNT | FEAT_BB_FREQ | FEAT_BR_PROB):
        return None
    parts = []
    if feat & FEAT_FUNC_ENTRY_COUNT:
        parts.append('"entry_count":%d' % int(m.func_entry_count[f]))
    if feat & (FEAT_BB_FREQ | FEAT_BR_PROB):
        post = bool(feat & FEAT_POST_LINK_CFG)
        blocks = []
        for b in m.function_blocks(f):
            items = ['"id":%d' % int(m.block_id[b])]
            if feat & FEAT_BB_FREQ:
                items.append('"frequency":%d' % int(m.block_freq[b]))
            if post:
                items.append('"postlink_frequency":%d' % int(m.block_postlink_freq[b]))
            if feat & FEAT_BR_PROB:
                succ = []
                for sid, prob, pl in m.block_successors(b):
                    s = '{"id":%d,"probability":%d' % (sid, prob)
                    if post:
                        s += ',"postlink_frequency":%d' % pl
                    succ.append(s + "}")
                items.append('"successors":[%s]' % ",".join(succ))
            blocks.append("{" + ",".join(items) + "}")
        parts.append('"blocks":[%s]' % ",".join(blocks))
    return "{" + ",".join(parts) + "}"


def iter_json(binary: Binary) -> Iterator[str]:
    """The dump as JSON text fragments (concatenate them)."""
    m = binary.block_map
    names = m.func_name or [None] * m.num_functions
    disp = names
    if binary.demangle:
        from bbmap.binary.symbols import demangle

        disp = [demangle(n) if n else n for n in names]
    feats = m.func_feature.astype(np.int64)
    # per-block feature (for callsite/hash keys)
    fblocks = np.diff(m.range_block_ptr[m.func_range_ptr])
    feats_per_block = np.repeat(feats, fblocks) if m.num_blocks else np.zeros(0, np.int64)
    blocks = _block_fragments(m, feats_per_block)
    secnames = {s.index: s.name for s in binary.sections}
    src_json = []
    for src in m.sources:
        if src.section_index >= 0:
            sec = '"[%d] %s"' % (src.section_index, _esc(src.section_name)[1:-1])
        else:
            sec = _esc(src.section_name)
        src_json.append((sec, source_format(src)))
    yield '{"binary":%s,"build_id":%s,"functions":[' % (
        _esc(binary.path), _esc(binary.build_id) if binary.build_id else "null")
    rptr, bptr = m.func_range_ptr.tolist(), m.range_block_ptr.tolist()
    bases, rsecs = m.range_base.tolist(), m.range_section.tolist()
    declared = m.range_num_blocks.tolist()
    for f in range(m.num_functions):
        sec, fmt = src_json[int(m.func_source[f])] if src_json else ('null', "unknown")
        feat = int(feats[f])
        head = ('{"name":%s,"address":%d,"section":%s,"format":{"source":"%s","version":%d,'
                '"feature":%d,"map_offset":%d},"ranges":[' % (
                    _esc(disp[f]) if disp[f] is not None else "null", int(m.func_address[f]),
                    sec, fmt, int(m.func_version[f]), feat, int(m.func_map_offset[f])))
        rparts = []
        for r in range(rptr[f], rptr[f + 1]):
            a, b = bptr[r], bptr[r + 1]
            extra = ""
            if rsecs[r] >= 0:
                extra = ',"text_section":{"index":%d,"name":%s}' % (
                    rsecs[r], _esc(secnames.get(rsecs[r], "?")))
            if declared[r] != b - a:
                extra += ',"num_blocks":%d' % declared[r]
            rparts.append('{"base_address":%d%s,"blocks":[%s]}' % (
                bases[r], extra, "},".join(blocks[a:b]) + ("}" if b > a else "")))
        pgo = _pgo_json(m, f, feat)
        tail = "]" + (',"pgo":%s' % pgo if pgo else "")
        if names[f] is not None and disp[f] != names[f]:
            tail += ',"mangled":%s' % _esc(names[f])
        yield ("," if f else "") + head + ",".join(rparts) + tail + "}"
    yield '],"warnings":[%s]}\n' % ",".join(json.dumps(d.to_json())
                                           for d in binary.diagnostics)


def _esc(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def dump_json_text(path: str, *, demangle: bool = True, decoder: str = "fast",
                   debug_dirs=()) -> tuple[str, Binary]:
    b = load_binary(path, demangle=demangle, decoder=decoder, debug_dirs=debug_dirs)
    return "".join(iter_json(b)), b


def dump(path: str, demangle: bool = True, decoder: str = "fast") -> dict:
    """The dump as a dict (``json.loads`` of the text ``bbmap dump --json`` writes)."""
    text, _ = dump_json_text(path, demangle=demangle, decoder=decoder)
    return json.loads(text)


def iter_text(binary: Binary) -> Iterator[str]:
    """A readable table per function."""
    m = binary.block_map
    names = m.func_name or [None] * m.num_functions
    yield f"{binary.path}: {binary.e_type}, build-id {binary.build_id or '-'}, " \
          f"{m.num_functions} functions, {m.num_ranges} ranges, {m.num_blocks} blocks\n"
    md_letters = (("R", 1), ("T", 2), ("E", 4), ("F", 8), ("I", 16))
    from bbmap.binary.symbols import demangle

    for f in range(m.num_functions):
        src = m.sources[int(m.func_source[f])] if m.sources else None
        name = names[f]
        shown = (demangle(name) if binary.demangle else name) if name else "<?>"
        fmt = source_format(src) if src else "?"
        where = f"[{src.section_index}] {src.section_name}" if src and src.section_index >= 0 \
            else (src.section_name if src else "?")
        yield (f"\n{shown} @ {int(m.func_address[f]):#x}  ({fmt} v{int(m.func_version[f])} "
               f"feature {int(m.func_feature[f]):#x}, {where} +{int(m.func_map_offset[f]):#x})\n")
        if int(m.func_feature[f]) & FEAT_FUNC_ENTRY_COUNT:
            yield f"  entry count {int(m.func_entry_count[f])}\n"
        for r in m.function_ranges(f):
            base = int(m.range_base[r])
            sec = int(m.range_section[r])
            yield f"  range @ {base:#x}" + (f" in section [{sec}]" if sec >= 0 else "") + "\n"
            yield "    {:>5} {:>18} {:>8} {:>6}  {}\n".format("id", "address", "size", "flags",
                                                              "callsites/hash")
            for b in m.range_blocks(r):
                md = int(m.block_md[b])
                flags = "".join(ch if md & bit else "." for ch, bit in md_letters)
                extra = []
                cs = m.block_callsites(b)
                if len(cs):
                    extra.append("cs " + ",".join(f"+{int(c):#x}" for c in cs))
                if int(m.func_feature[f]) & FEAT_BB_HASH:
                    extra.append(f"hash {int(m.block_hash[b]):#018x}")
                yield "    {:>5} {:>#18x} {:>#8x} {:>6}  {}\n".format(
                    int(m.block_id[b]), base + int(m.block_offset[b]), int(m.block_size[b]),
                    flags, " ".join(extra))
    if len(binary.diagnostics):
        yield "\nwarnings:\n"
        for d in binary.diagnostics:
            yield f"  {d.severity}: {d}\n"
    yield "\nflags: R return, T tail call, E EH pad, F can fall through, I indirect branch\n"
