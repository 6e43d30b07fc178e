"""A jump-table-heavy C program: many functions, most of them built around ``switch``
statements of 4-64 dense cases that clang-22 compiles to jump tables.

The speed figures of ``bench_annotate.py`` were first taken on a binary whose functions have
no indirect jumps at all, so nothing there costs what a jump table costs (a table read for
every block ending in an indirect ``jmp``).  This generator writes the other kind of
program: deterministic for a given function count, each function a loop over one or two
switches (an occasional function has none), a quarter of them straight-line (the switch
runs once, and clang loads the table's address beside it), every case a different
arithmetic step so clang neither merges the cases nor turns the switch into a lookup table
of constants; the ``default`` keeps the ``cmp``/``ja`` guard in front of the table.
``main`` calls the functions round-robin from a table for ``argv[1]`` seconds of CPU
time, so a ``cpu-clock`` profile spreads over all of them.

Used by ``bench/bench_annotate.py`` (the 20,000-function bench binary beside the
branchy one) and, at a few dozen functions, by tests/test_cfg_jump_tables.py.
"""

from __future__ import annotations

import os
import random
import subprocess

# the case bodies: ``{a}``/``{b}`` are per-case constants, so no two cases are the same code
_STEPS = (
    "s = s * {a}u + {b}u;",
    "s ^= (s >> {sa}) + {b}u;",
    "s = (s << {sa}) | (s >> (32 - {sa})); s += {b}u;",
    "s -= {b}u; s ^= s >> {sb};",
    "s = s * {a}u ^ (t + {b}u);",
    "t += s ^ {b}u; s = s + (t >> {sb});",
    "if (s & {m}u) s += {b}u; else s ^= {a}u;",
    "s = (s >> 1) ^ (-(s & 1u) & 0x{c:08x}u);",
)


def function_source(i: int) -> str:
    """The source of function ``sw<i>`` (deterministic in ``i``)."""
    r = random.Random(i * 7919 + 17)
    looped = i % 4 != 3  # a switch in a loop (clang hoists the table's base out of it)
    lines = [f"unsigned sw{i}(unsigned x) {{",
             f"  unsigned s = x ^ {i}u, t = {r.randrange(1 << 16)}u;",
             f"  for (unsigned j = 0; j < {4 + i % 9}u; j++) {{" if looped else
             "  { unsigned j = x >> 7;"]
    nswitch = 0 if i % 20 == 19 else (2 if i % 5 < 2 else 1)
    if nswitch == 0:
        lines.append(f"    if (s & 1u) s = s * 3u + 1u; else s >>= 1; s += j ^ {i}u;")
    for k in range(nswitch):
        n = 4 + int(60 * r.random() ** 3)  # 4..64 cases, most of them small
        shift = r.randrange(0, 24)
        mask = (1 << max(n - 1, 1).bit_length()) * 2 - 1  # more values than cases: a default
        lines.append(f"    switch ((s >> {shift}) & {mask}u) {{")
        for c in range(n):
            step = r.choice(_STEPS).format(a=r.randrange(3, 1 << 20) | 1,
                                           b=r.randrange(1, 1 << 24), sa=r.randrange(1, 31),
                                           sb=r.randrange(1, 31), m=1 << r.randrange(0, 31),
                                           c=r.randrange(1 << 32))
            lines.append(f"    case {c}: {step} break;")
        lines.append(f"    default: s += j + {k + 1}u; break;")
        lines.append("    }")
    lines += ["    t += s;", "  }", "  return s ^ t;", "}"]
    return "\n".join(lines)


def write_program(d: str, nfunc: int, files: int = 8) -> list[str]:
    """The sources (``files`` parts and ``main.c``) in ``d``; unchanged files are not
    rewritten, so a rebuild recompiles nothing that did not change."""
    srcs = []
    per = (nfunc + files - 1) // files
    for k in range(files):
        body = "\n".join(function_source(i) for i in range(k * per, min(nfunc, (k + 1) * per)))
        p = os.path.join(d, f"sw_part{k}.c")
        _write_if_changed(p, body + "\n")
        srcs.append(p)
    decl = "\n".join(f"unsigned sw{i}(unsigned);" for i in range(nfunc))
    tab = ",".join(f"sw{i}" for i in range(nfunc))
    main = (f"#include <stdlib.h>\n#include <time.h>\n{decl}\n"
            f"static unsigned (*const tab[{nfunc}])(unsigned) = {{{tab}}};\n"
            "int main(int argc, char **argv) { double secs = argc > 1 ? atof(argv[1]) : 6;"
            " unsigned acc = 1; while ((double)clock() < secs * CLOCKS_PER_SEC)"
            f" for (unsigned i = 0; i < {nfunc}u; i++) acc += tab[i](acc * 2654435761u + i);"
            " volatile unsigned sink = acc; (void)sink; return 0; }\n")
    p = os.path.join(d, "sw_main.c")
    _write_if_changed(p, main)
    return srcs + [p]


def build(d: str, nfunc: int, name: str = "switchy", cc: str = "clang-22",
          extra: tuple[str, ...] = ("-fPIE",), link: tuple[str, ...] = ("-pie",)) -> str:
    """Compile and link the program in ``d`` (``-O2 -fbasic-block-address-map``, PIE by
    default); an existing executable is reused."""
    exe = os.path.join(d, name)
    if os.path.exists(exe):
        return exe
    os.makedirs(d, exist_ok=True)
    objs = []
    for s in write_program(d, nfunc):
        o = s[:-2] + ".o"
        if not (os.path.exists(o) and os.path.getmtime(o) >= os.path.getmtime(s)):
            subprocess.run([cc, "-O2", *extra, "-fbasic-block-address-map", "-c", s, "-o", o],
                           check=True)
        objs.append(o)
    subprocess.run([cc, *link, "-Wl,--build-id=sha1", *objs, "-o", exe + ".tmp"], check=True)
    os.replace(exe + ".tmp", exe)
    return exe


def _write_if_changed(path: str, text: str) -> None:
    if os.path.exists(path):
        with open(path) as fh:
            if fh.read() == text:
                return
    with open(path, "w") as fh:
        fh.write(text)
