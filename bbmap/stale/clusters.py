"""A Propeller cluster file held against a binary: does it still place the blocks it was
made for?

A cluster file names blocks by their IDs in the block map, and IDs are renumbered by any
change to a function, so a file made from build N and given to build N+1 places whatever
blocks now carry those IDs, silently: the compiler cannot tell.  Against the binary alone
bbmap checks what the file can show (every function named exists, every ID is a block of
it, no ID twice, the entry block first); given the build the file was made for, it also
matches the two builds' blocks (:mod:`bbmap.stale.match`) and names every function in
which an ID listed now means another block, or no block of the profiled build at all.
Both cluster file versions are read: v1 (``v1``, ``f NAME[/ALIAS...]``, ``c ID...``) and
v0 (``!NAME[/ALIAS...]``, ``!!ID...``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.errors import BBMapError


@dataclass
class ClusterFunction:
    names: list[str]
    clusters: list[list[int]]
    line: int


@dataclass
class Misplaced:
    """One function the cluster file gets wrong on the binary, and why."""

    function: str
    line: int
    reason: str
    ids: list[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"function": self.function, "line": self.line, "reason": self.reason,
                "ids": self.ids}


def parse_clusters(path: str) -> list[ClusterFunction]:
    """The functions of a cluster file, with their clusters (v0 and v1)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise BBMapError(f"cannot read the cluster file: {e.strerror}", file=path) from None
    try:
        text = raw.decode()
    except UnicodeDecodeError as e:
        raise BBMapError("not a cluster file: not UTF-8 text", file=path,
                         offset=e.start) from None
    out: list[ClusterFunction] = []
    offset = 0
    for no, line in enumerate(text.splitlines(keepends=True), 1):
        here = offset
        offset += len(line.encode())
        s = line.strip()
        if not s or s.startswith("#") or s == "v1":
            continue
        if s.startswith(("f ", "!")) and not s.startswith("!!"):
            names = (s[2:] if s.startswith("f ") else s[1:]).strip().split("/")
            out.append(ClusterFunction([n for n in names if n], [], no))
            continue
        if s.startswith(("c ", "!!")):
            if not out:
                raise BBMapError(f"line {no}: a cluster before any function line",
                                 file=path, offset=here)
            body = s[2:].split()
            try:
                out[-1].clusters.append([int(x) for x in body])
            except ValueError:
                raise BBMapError(f"line {no}: a block ID that is no number: {s[:60]!r}",
                                 file=path, offset=here) from None
            continue
        if s[:2] in ("m ", "g ", "p ", "h ", "b ", "i "):  # other directives: not ours
            continue
        raise BBMapError(f"line {no}: not a cluster file line: {s[:60]!r}", file=path,
                         offset=here)
    return out


def check_clusters(path: str, binary: Any, profiled: Any | None = None) -> list[Misplaced]:
    """What the cluster file at ``path`` gets wrong on ``binary``; with ``profiled`` (the
    binary the file was made from) also every ID that names another block now."""
    from bbmap.stale.fingerprint import fingerprint, function_blocks
    from bbmap.stale.match import match_blocks

    funcs = parse_clusters(path)
    from bbmap.stale.names import base_name

    m = binary.block_map
    by_name: dict[str, int] = {}
    by_base: dict[str, list[int]] = {}
    for f, n in enumerate(m.func_name or []):
        if n:
            by_name.setdefault(n, f)
            by_base.setdefault(base_name(n) or n, []).append(f)
    bad: list[Misplaced] = []
    where: dict[int, ClusterFunction] = {}
    for cf in funcs:
        f = next((by_name[n] for n in cf.names if n in by_name), None)
        if f is None:
            alt = [g for n in cf.names for g in by_base.get(base_name(n) or n, [])]
            why = "no function of this name in the binary"
            if len(alt) == 1:
                why += (f" (it is {m.func_name[alt[0]]} here: the per-module suffix "
                        "changed, so the compiler will not apply these clusters)")
            bad.append(Misplaced(cf.names[0], cf.line, why))
            continue
        ids = [i for c in cf.clusters for i in c]
        have = set(m.block_id[function_blocks(m, f)].tolist())
        missing = sorted(set(ids) - have)
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if missing:
            bad.append(Misplaced(cf.names[0], cf.line, "IDs that are no block of the "
                                 "function", missing))
        elif dup:
            bad.append(Misplaced(cf.names[0], cf.line, "IDs listed twice", dup))
        elif ids and ids[0] != int(m.block_id[function_blocks(m, f)[0]]):
            bad.append(Misplaced(cf.names[0], cf.line, "the entry block is not first",
                                 ids[:1]))
        else:
            where[f] = cf
    if profiled is None or not where:
        return bad
    mo = profiled.block_map
    old_by_name: dict[str, int] = {}
    old_by_base: dict[str, list[int]] = {}
    for f, n in enumerate(mo.func_name or []):
        if n:
            old_by_name.setdefault(n, f)
            old_by_base.setdefault(base_name(n) or n, []).append(f)
    # each listed function of the binary with the profiled build's function of that name
    # (or of that name but for the per-module suffix)
    pairs_f: dict[int, int] = {}
    for g, cf in where.items():
        f = next((old_by_name[n] for n in cf.names if n in old_by_name), None)
        if f is None:
            alt = {x for n in cf.names for x in old_by_base.get(base_name(n) or n, [])}
            f = alt.pop() if len(alt) == 1 else None
        if f is not None:
            pairs_f[g] = f
    fo = fingerprint(profiled, np.asarray(sorted(set(pairs_f.values())), np.int64))
    fn = fingerprint(binary, np.asarray(sorted(pairs_f), np.int64))
    for g, f_old in sorted(pairs_f.items()):
        cf = where[g]
        ob, nb = function_blocks(mo, f_old), function_blocks(m, g)
        pairs = match_blocks(ob.tolist(), nb.tolist(), fo, fn, mo.block_size, m.block_size)
        old_of_id = {int(mo.block_id[a]): a for a in ob.tolist()}
        wrong = []
        for i in (i for c in cf.clusters for i in c):
            a = old_of_id.get(i)
            t = pairs.get(a) if a is not None else None
            if t is None or int(m.block_id[t[0]]) != i:
                wrong.append(i)
        if wrong:
            bad.append(Misplaced(cf.names[0], cf.line, "IDs that name other blocks in "
                                 "this build than in the profiled one", wrong))
    return sorted(bad, key=lambda x: (x.line, x.function))
