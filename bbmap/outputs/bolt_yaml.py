"""BOLT's YAML profile with block hashes, written from bbmap's counts of one binary.

``perf2bolt -w`` writes this profile and ``llvm-bolt -data=FILE.yaml`` reads it; with
``--infer-stale-profile`` BOLT matches its blocks by their hashes
(:mod:`bbmap.outputs.bolt_yaml_hash`) when the function's hash differs, and infers the
rest.  Without branch stacks, perf2bolt (22) writes no block of a sample profile to YAML
(``exec: 0``, no ``blocks``), and BOLT's stale matching reads only edge counts (``succ``),
so a sample profile carried to another build has no way into BOLT but this one: bbmap's
inferred block and edge counts, written as a branch profile (``profile-flags: [ lbr ]``).

Blocks are BOLT's, not the compiler's (:class:`bbmap.bolt_functions.BoltView`: a leader
at each jump target and after each terminator), numbered in address order as BOLT's
``bid``; functions by BOLT's names (``NAME/N`` for local symbols).  A BOLT block's count is
the count of the compiler's block it starts with; an edge between two of BOLT's blocks is
the compiler's edge into the block that starts it (edges inside one BOLT block are
fall-throughs BOLT does not see).  The function ``hash`` is bbmap's own (BOLT's covers
LLVM's opcode and register numbers, :mod:`bolt_yaml_hash`): BOLT takes every function's
profile as stale, so read it with ``--infer-stale-profile``.  Output is byte-identical for
the same result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bbmap.aggregate.lbr import K_BRANCH, K_FALLTHROUGH
from bbmap.aggregate.result import AnnotateResult
from bbmap.binary.disasm import JMP, JMP_INDIRECT, RET, TRAP
from bbmap.bolt_functions import K_FDE, K_SYMBOL, BoltView
from bbmap.errors import BBMapError
from bbmap.outputs.bolt_yaml_hash import (
    blend,
    neighbour_hash,
    opcode_hash,
    opcode_name,
    xxh3_64,
)

PROFILE_VERSION = 1
ORIGIN = "bbmap"
NOP_PREFIX = "nop"


@dataclass
class BoltFunction:
    """One of BOLT's functions: its blocks (absolute starts), their hashes and edges."""

    index: int  # in the BoltView
    name: str
    start: int
    blocks: list[int]  # block start addresses, ascending
    insns: list[int]  # instructions per block
    hashes: list[int]  # blended hashes
    succ: list[list[int]]  # successor block indexes, BOLT's order
    fhash: int  # bbmap's function hash
    opcodes: list[int]  # 64-bit opcode hashes


def bolt_functions(view: BoltView, funcs: list[int]) -> dict[int, BoltFunction]:
    """BOLT's CFG and block hashes of the view's functions ``funcs`` (those with blocks)."""
    import capstone

    bb = view.blocks(np.array(sorted(set(funcs)), dtype=np.int64))
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    cs.syntax = capstone.CS_OPT_SYNTAX_ATT
    tables = getattr(view, "_jump_targets", None) or {}
    out: dict[int, BoltFunction] = {}
    for f in sorted(set(funcs)):
        if f not in bb.func_first or f in bb.no_cfg:
            continue
        i0, n = bb.func_first[f], bb.func_count[f]
        fs, fe = int(view.start[f]), int(view.start[f] + view.size[f])
        starts = [int(a) for a in bb.start[i0:i0 + n]]
        kinds = bb.last_kind[i0:i0 + n].tolist()
        falls = bb.falls[i0:i0 + n].tolist()
        names: list[set[str]] = [set() for _ in range(n)]
        text: list[list[str]] = [[] for _ in range(n)]
        insns = [0] * n
        targets: list[list[int]] = [[] for _ in range(n)]  # direct jump targets inside
        k = 0
        for ins in cs.disasm(view._read(fs, fe - fs), fs):
            a = ins.address
            while k + 1 < n and a >= starts[k + 1]:
                k += 1
            if a < starts[k]:
                continue
            mn = ins.mnemonic
            insns[k] += 1  # BOLT counts nops (its opcode hash leaves them out)
            if mn.startswith(NOP_PREFIX):
                continue
            direct = ins.op_str.startswith("0x")
            tgt = int(ins.op_str, 16) if direct and mn[0] == "j" else -1
            is_jcc = mn[0] == "j" and not mn.startswith("jmp")
            inside = fs <= tgt < fe
            if inside:
                targets[k].append(tgt)
            if mn.startswith("jmp") and inside:
                continue  # BOLT's unconditional branch: not hashed
            names[k].add(opcode_name(mn, is_jcc, ins.op_str))
            text[k].append(f"{mn} {'L' if inside else ins.op_str}")
        index = {a: i for i, a in enumerate(starts)}
        succ: list[list[int]] = []
        ftargets: list[set[int]] = []  # successors by a branch (not by falling through)
        for i in range(n):
            s: list[int] = []
            for t in targets[i]:
                j = index.get(t)
                if j is not None and j not in s:
                    s.append(j)
            if kinds[i] == JMP_INDIRECT:
                for t in tables.get(_last_insn(bb, i0 + i), []):
                    j = index.get(int(t))
                    if j is not None and j not in s:
                        s.append(j)
            ftargets.append(set(s))
            if falls[i] and i + 1 < n and kinds[i] not in (RET, TRAP) and i + 1 not in s \
                    and (kinds[i] != JMP or not targets[i]):
                s.append(i + 1)
            succ.append(s)
        ops = [opcode_hash(x) for x in names]
        # BOLT adds the taken edges of all blocks first (in block order), then the
        # fall-throughs: a block's predecessors list its branch sources, then its
        # layout predecessor when that falls into it
        preds: list[list[int]] = [[] for _ in range(n)]
        for i in range(n):
            for j in succ[i]:
                if j != i + 1 or j in ftargets[i]:
                    preds[j].append(i)
        for i in range(n - 1):
            if i + 1 in succ[i] and i + 1 not in ftargets[i]:
                preds[i + 1].append(i)
        hashes = [blend(starts[i] - fs, ops[i], xxh3_64("\n".join(text[i]).encode()),
                        neighbour_hash([ops[j] for j in preds[i]]),
                        neighbour_hash([ops[j] for j in succ[i]])) for i in range(n)]
        fh = xxh3_64(b"".join(h.to_bytes(8, "little") for h in hashes))
        out[f] = BoltFunction(f, view.names[f], fs, starts, insns, hashes, succ, fh, ops)
    return out


def _last_insn(bb: Any, g: int) -> int:
    return int(bb.last[g])


def render_bolt_yaml(result: AnnotateResult, binary: Any = None) -> str:
    """The YAML profile of the result's functions with counts, for ``binary`` (the
    result's own binary by default)."""
    b = binary if binary is not None else result.loaded
    if b is None:
        from bbmap.binary.elf import load_binary

        b = load_binary(result.binary)
    if str(getattr(b, "machine", "x86_64")).lower() not in ("x86_64", "em_x86_64", "amd64"):
        raise BBMapError("BOLT's YAML profile is written for x86-64 binaries",
                         file=result.binary)
    if not result.has_counts:
        raise BBMapError("BOLT's YAML profile needs counts: a profile with branch stacks, "
                         "or inference (--inference on)", file=result.binary)
    m = result.block_map
    view = BoltView(b)
    starts = m.block_starts()
    rng = np.repeat(np.arange(m.num_ranges, dtype=np.int64), np.diff(m.range_block_ptr))
    count = np.asarray(result.block_count, dtype=np.int64)
    live = np.flatnonzero(count > 0)
    vf, voff = view.locate(starts[live]) if len(live) else (np.zeros(0, np.int64),) * 2
    ok = vf >= 0
    ok[ok] = np.isin(view.kind[vf[ok]], (K_SYMBOL, K_FDE))
    funcs = bolt_functions(view, sorted(set(vf[ok].tolist())))
    # every block of the result, by the BOLT function and block it lies in
    bf, _ = view.locate(starts) if len(starts) else (np.zeros(0, np.int64), None)
    intra = np.isin(result.edge_kind, (K_BRANCH, K_FALLTHROUGH))
    ef, et, ec = (np.asarray(x)[intra] for x in (result.edge_from, result.edge_to,
                                                 result.edge_count))
    del rng
    exec_: dict[int, list[int]] = {f: [0] * len(fn.blocks) for f, fn in funcs.items()}
    edges: dict[int, dict[tuple[int, int], int]] = {f: {} for f in funcs}

    def where(g: int) -> tuple[int, int, bool]:
        f = int(bf[g])
        fn = funcs.get(f)
        if fn is None:
            return -1, -1, False
        a = int(starts[g])
        i = int(np.searchsorted(fn.blocks, a, side="right")) - 1
        return f, i, i >= 0 and fn.blocks[i] == a

    for g in live.tolist():
        f, i, lead = where(g)
        if f >= 0 and i >= 0:
            c = int(count[g])
            exec_[f][i] = max(exec_[f][i], c) if not lead else c
    for s, t, c in zip(ef.tolist(), et.tolist(), ec.tolist()):
        if c <= 0:
            continue
        f, i, _ = where(s)
        f2, j, lead = where(t)
        if f < 0 or f2 != f or i < 0 or j < 0 or not lead:
            continue
        if j not in funcs[f].succ[i]:
            continue  # no such edge in BOLT's CFG (a fall-through inside one block)
        edges[f][(i, j)] = edges[f].get((i, j), 0) + int(c)
    return _text(b, result, funcs, exec_, edges)


def _text(b: Any, result: AnnotateResult, funcs: dict[int, BoltFunction],
          exec_: dict[int, list[int]], edges: dict[int, dict[tuple[int, int], int]]) -> str:
    bid = getattr(b, "build_id", None) or ""
    lines = ["---", "header:", f"  profile-version: {PROFILE_VERSION}",
             f"  binary-name:     {_quote(str(result.binary))}"]
    if bid:
        lines.append(f"  binary-build-id: {bid}")
    lines += ["  profile-flags:   [ lbr ]", f"  profile-origin:  {ORIGIN}",
              "  profile-events:  ''", "  dfs-order:       false", "  hash-func:       xxh3",
              "functions:"]
    fid = 0
    for f in sorted(funcs, key=lambda f: funcs[f].start):
        fn, ex = funcs[f], exec_[f]
        if not any(ex):
            continue
        lines += [f"  - name:            {_quote(fn.name)}", f"    fid:             {fid}",
                  f"    hash:            0x{fn.fhash:X}", f"    exec:            {ex[0]}",
                  f"    nblocks:         {len(fn.blocks)}", "    blocks:"]
        fid += 1
        out = edges[f]
        for i in range(len(fn.blocks)):
            succ = [(j, out[(i, j)]) for j in fn.succ[i] if out.get((i, j), 0) > 0]
            if not ex[i] and not succ:
                continue
            lines += [f"      - bid:             {i}", f"        insns:           {fn.insns[i]}",
                      f"        hash:            0x{fn.hashes[i]:X}",
                      f"        exec:            {ex[i]}"]
            if succ:
                lines.append("        succ:            [ " + ", ".join(
                    f"{{ bid: {j}, cnt: {c} }}" for j, c in succ) + " ]")
    lines.append("...")
    return "\n".join(lines) + "\n"


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"
