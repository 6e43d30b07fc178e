"""Exact block executions of a run, from valgrind's callgrind with ``--dump-instr=yes``.

Callgrind counts every executed instruction (``Ir``) at its address; a block ran as often
as its first instruction did.  The file's cost lines name an instruction by an absolute
address (``0x401130``), one relative to the previous line's (``+5``, ``-10``) or the same
(``*``); a ``calls=`` line makes the next cost line the call's inclusive cost, which is no
execution of that instruction and is skipped.  Only the lines of the binary's own object
(``ob=``) count.  The binary must be non-PIE (callgrind prints runtime addresses).

Usage: callgrind_counts.py CALLGRIND_OUT BINARY ROUNDS > counts.json
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent)]  # this tree's bbmap

_NAMED = re.compile(r"^(c?ob)=\((\d+)\)(?: (.*))?$")


def instruction_counts(path: str, binary: str) -> Counter:
    """Ir per instruction address of ``binary``'s object in the callgrind file."""
    names: dict[str, str] = {}
    counts: Counter = Counter()
    mine = False
    addr = 0
    skip_next = False
    want = os.path.realpath(binary)
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = _NAMED.match(line)
            if m:
                kind, ident, name = m.groups()
                if name is not None:
                    names[ident] = name
                if kind == "ob":
                    mine = os.path.realpath(names.get(ident, "")) == want
                continue
            if line.startswith("calls="):
                skip_next = True
                continue
            if not line or not (line[0] in "+-*" or line.startswith("0x")):
                continue
            tok = line.split()
            a = tok[0]
            if a == "*":
                pass
            elif a[0] in "+-":
                addr += int(a, 0) if a[0] == "+" else -int(a[1:], 0)
            else:
                addr = int(a, 16)
            if skip_next:
                skip_next = False
                continue
            if mine and len(tok) >= 3:
                counts[addr] += int(tok[2])
    return counts


def block_counts(path: str, binary: str, rounds: int) -> dict:
    """The exact-counts document: per block of the binary's map, its executions."""
    import numpy as np

    from bbmap.binary import load_binary

    b = load_binary(binary)
    m = b.block_map
    ir = instruction_counts(path, binary)
    rng = np.repeat(np.arange(m.num_ranges), np.diff(m.range_block_ptr))
    start = (m.range_base[rng] + m.block_offset).astype(np.uint64)
    rf = np.repeat(np.arange(m.num_functions), np.diff(m.func_range_ptr))
    blocks = []
    for i in range(m.num_blocks):
        f = int(rf[rng[i]])
        size = int(m.block_size[i])
        blocks.append({"function": m.func_name[f], "id": int(m.block_id[i]),
                       "address": f"{int(start[i]):#x}", "size": size,
                       "count": ir.get(int(start[i]), 0) if size else None})
    return {"about": "exact executions of each block's first instruction (valgrind "
                     "callgrind --dump-instr=yes); count null = empty block",
            "binary": os.path.basename(binary), "build_id": b.build_id, "rounds": rounds,
            "blocks": blocks}


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    json.dump(block_counts(sys.argv[1], sys.argv[2], int(sys.argv[3])), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
