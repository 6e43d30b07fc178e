"""Which function of build N+1 is which function of build N.

A function keeps its name across builds unless the compiler decorates it with a
per-module suffix: ThinLTO's promoted locals (``foo.llvm.123456``) and
``-funique-internal-linkage-names`` (``foo.__uniq.9876``) change with the module's hash,
so with any edit of the file, and a ``static`` function moved to another file changes
them too.  Names are compared with those suffixes removed; a name several functions
share after that (statics of the same name in different files) is resolved by the
functions' contents, and a function no name matches is taken by its identifier alone
when the mangled name's parameter types changed (a type renamed), else by its contents
when exactly one function of the other build has the same ones (a renamed copy).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence

# a suffix the compiler adds per module; more than one can stack (foo.__uniq.1.llvm.2)
_CLONE_SUFFIX = re.compile(r"(\.llvm\.\d+|\.__uniq\.\d+|\.lto_priv\.\d+)+$")


def base_name(name: str | None) -> str | None:
    """``name`` without the per-module suffixes (None stays None)."""
    if not name:
        return None
    return _CLONE_SUFFIX.sub("", name)


_MANGLED = re.compile(r"_ZL?(\d+)")


def bare_name(name: str | None) -> str | None:
    """The function's identifier alone: ``base_name`` without an Itanium mangling's
    parameter types (``_ZL23ZSTD_compressBlock_opt0P17ZSTD_matchState_t...`` ->
    ``ZSTD_compressBlock_opt0``).  ``-funique-internal-linkage-names`` mangles C statics
    with their parameter types, so renaming a type renames every function taking it."""
    b = base_name(name)
    if not b:
        return b
    m = _MANGLED.match(b)
    if m:
        n, at = int(m.group(1)), m.end()
        if 0 < n <= len(b) - at:
            return b[at:at + n]
    return b


def match_functions(old_names: Sequence[str | None], new_names: Sequence[str | None],
                    old_funcs: Sequence[int], content: Callable[[str, int], int]
                    ) -> tuple[dict[int, int], dict[int, str]]:
    """For each block-map function of ``old_funcs`` (indexes into ``old_names``), its
    function in the new build, and how it was found (``name``, ``suffix``: the same name
    once the per-module suffixes are removed, ``signature``: the same identifier with other
    parameter types, ``content``: by ``content(side, f)``, a hash
    of the function's blocks, ``side`` ``"old"`` or ``"new"``).  Unmatched functions are
    left out."""
    new_by_name: dict[str, list[int]] = defaultdict(list)
    new_by_base: dict[str, list[int]] = defaultdict(list)
    for g, n in enumerate(new_names):
        if n:
            new_by_name[n].append(g)
            new_by_base[base_name(n) or ""].append(g)
    out: dict[int, int] = {}
    how: dict[int, str] = {}
    taken: set[int] = set()
    pending: list[int] = []
    for f in old_funcs:
        n = old_names[f] if f < len(old_names) else None
        if not n:
            pending.append(f)
            continue
        cands = new_by_name.get(n, [])
        kind = "name"
        if len(cands) != 1:
            cands = [g for g in new_by_base.get(base_name(n) or "", []) if g not in taken]
            kind = "suffix" if base_name(n) != n or any(new_names[g] != n for g in cands) \
                else "name"
        if len(cands) == 1 and cands[0] not in taken:
            out[f], how[f] = cands[0], kind
            taken.add(cands[0])
        elif len(cands) > 1:
            h = content("old", f)
            same = [g for g in cands if g not in taken and content("new", g) == h]
            if len(same) == 1:
                out[f], how[f] = same[0], "suffix"
                taken.add(same[0])
            else:
                pending.append(f)
        else:
            pending.append(f)
    if pending:
        # by the bare identifier (a parameter type renamed), unique on both sides
        taken_bare = {bare_name(new_names[g]) for g in taken}
        new_by_bare: dict[str, list[int]] = defaultdict(list)
        for g, n in enumerate(new_names):
            if n and g not in taken:
                new_by_bare[bare_name(n) or ""].append(g)
        old_bare: dict[str, list[int]] = defaultdict(list)
        for f in pending:
            n = old_names[f] if f < len(old_names) else None
            if n:
                old_bare[bare_name(n) or ""].append(f)
        for b, fs in sorted(old_bare.items()):
            gs = new_by_bare.get(b, [])
            if b and b not in taken_bare and len(fs) == 1 and len(gs) == 1:
                out[fs[0]], how[fs[0]] = gs[0], "signature"
                taken.add(gs[0])
        pending = [f for f in pending if f not in out]
    if pending:
        # by contents alone: the new functions nothing matched by name yet
        matched_names = {base_name(old_names[f]) for f in out}
        free: dict[int, list[int]] = defaultdict(list)
        for g, n in enumerate(new_names):
            if g not in taken and base_name(n) not in matched_names:
                free[content("new", g)].append(g)
        old_by_h: dict[int, list[int]] = defaultdict(list)
        for f in pending:
            old_by_h[content("old", f)].append(f)
        for h, fs in sorted(old_by_h.items()):
            gs = free.get(h, [])
            if h and len(fs) == 1 and len(gs) == 1:
                out[fs[0]], how[fs[0]] = gs[0], "content"
                taken.add(gs[0])
    return out, how
