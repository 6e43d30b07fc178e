"""``bbmap cfg PERF_DATA... BINARY``: pictures of block heat (SVG) or the CFG as DOT."""

from __future__ import annotations

import difflib
import re
from typing import Any

import click

from bbmap.cli import guarded, main
from bbmap.cli.options import output_option
from bbmap.cli.profile_args import (
    exit_if_failed,
    profile_options,
    refuse_ignored,
    run_options,
    split_inputs,
)
from bbmap.errors import BBMapError, UsageError
from bbmap.options import Status

FORMATS = ("svg", "dot")


@main.command("cfg", short_help="Draw functions' blocks coloured by heat (SVG or DOT).")
@click.argument("inputs", nargs=-1, required=True, metavar="PERF_DATA... BINARY")
@click.option("--function", "functions", multiple=True, metavar="NAME",
              help="draw this function (demangled or raw name; .cold/.__part.N parts fold "
                   "into their parent; repeatable)")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, metavar="N",
              help="without --function: the hottest N functions (overview rows and pictures)")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="svg (default; .dot/.gv outputs default to dot) or Graphviz dot")
@output_option(required=True)
@click.option("--heat", type=click.Choice(("auto", "samples", "count")), default="auto",
              show_default=True,
              help="colour by samples or LBR execution count (auto: count when LBR)")
@profile_options
@guarded
def cfg_cmd(inputs: tuple[str, ...], functions: tuple[str, ...], top: int, fmt: str | None,
            output: str, heat: str, **profile: Any) -> None:
    """Draw BINARY's functions with the block heat of PERF_DATA (files or @listfiles).

    SVG: without --function, an overview heat strip of the hottest functions followed by
    a picture of each; with --function, a picture of each named one.  DOT: one digraph
    per function.  Exit 1 when nothing could be put in a block.

    \b
    Example:
      bbmap cfg perf.data ./app --function main -o main.svg
    """
    from bbmap.atomic import write_atomic
    from bbmap.run import annotate

    perf_paths, binary = split_inputs(inputs, "bbmap cfg perf.data ./binary -o out.svg")
    if fmt is None:
        fmt = "dot" if output.lower().endswith((".dot", ".gv")) else "svg"
    if fmt == "dot" and functions:  # no overview strip: the named functions only
        refuse_ignored("--format dot with --function", ["top"])
    result = annotate(perf_paths, binary, options=run_options(**profile))
    keys = find_functions(result, functions, binary) if functions else None
    labels = range_labels(result)
    if fmt == "dot":
        from bbmap.outputs.dot import render_dot
        text = render_dot(result, keys, top=top, heat=heat, range_labels=labels)
    else:
        from bbmap.outputs.svg import render_svg
        text = render_svg(result, keys, top=top, heat=heat, range_labels=labels)
    if result.status == Status.REFUSED:  # does not fit the binary: nothing written
        exit_if_failed(result)
    write_atomic(output, text)
    exit_if_failed(result)


def find_functions(result, names: tuple[str, ...] | list[str], binary: str  # noqa: ANN001
                   ) -> list[int]:
    """Function keys for ``names``, in the order given (duplicates dropped).

    A name matches a function's display (demangled) name, its raw name, or either after
    folding a ``.cold`` / ``.__part.N`` suffix (or a demangler's ``[clone .cold]``);
    failing that, a demangled name without its parameter list (``parse_number`` for
    ``parse_number(std::string const&)``), which may match several overloads (all are
    drawn).  An unknown name is an error that lists the closest names."""
    from bbmap.binary.types import parent_name

    ft = result.functions
    display, raw = ft.names, ft.raw_names
    keys: list[int] = []
    for q in names:
        qp = parent_name(_CLONE_PART.sub("", q))
        hit = [k for k in range(ft.num_keys)
               if q in (display[k], raw[k]) or qp in (display[k], raw[k])]
        if not hit:
            hit = [k for k in range(ft.num_keys) if _bare(display[k]) in (q, qp)]
        if not hit:
            raise UsageError(f"no function named {q!r} in {binary}; "
                             + _closest(q, display + raw))
        keys += [k for k in hit if k not in keys]
    return keys


# how a demangler shows a part: ``foo(int) [clone .cold]``
_CLONE_PART = re.compile(r" \[clone \.(?:cold|__part\.\d+|eh)\]$")


def _bare(name: str) -> str:
    """A demangled name without its parameter list (and qualifiers after it)."""
    i = name.find("(")
    return name[:i] if i > 0 else name


def _closest(q: str, candidates: list[str]) -> str:
    uniq = sorted(set(candidates))
    low = q.lower()
    near = [c for c in uniq if low in c.lower()][:5]
    for c in difflib.get_close_matches(q, uniq, n=5, cutoff=0.5):
        if c not in near:
            near.append(c)
    if not near:
        return f"no close match among its {len(uniq)} function names"
    return "closest: " + ", ".join(near[:5])


def range_labels(result: Any) -> dict[int, str]:
    """Part suffix (``.cold``, ``.__part.1``) of the symbol at each address, to name the
    ranges of split functions, from the binary the run loaded; empty if the symbols
    cannot be read."""
    from bbmap.binary.types import parent_name

    try:
        syms = result.loaded.symbols
    except (BBMapError, OSError):
        return {}
    out: dict[int, str] = {}
    for name, addr in zip(syms.names, syms.address.tolist()):
        parent = parent_name(name)
        if parent != name and name.startswith(parent):
            out.setdefault(int(addr), name[len(parent):])
    return out
