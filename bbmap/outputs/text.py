"""The terminal report: hottest functions, their hottest blocks, and the accounting.

The accounting table is always printed, and the diagnosis comes before any table when
little or nothing mapped, so an empty result is never silent.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from bbmap.annotate.accounting import (
    BRANCH_BUCKETS,
    BUCKET_LABELS,
    BUCKETS,
    RANGE_LABELS,
    RANGE_REASONS,
)
from bbmap.annotate.result import AnnotateResult


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:.1f}%" if d else "-"


def render_text(result: AnnotateResult, *, top: int = 20, blocks_per_function: int = 8,
                width: int = 120, color: bool = False) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=color, color_system=None
                  if not color else "auto", highlight=False)
    write_report(con, result, top=top, blocks_per_function=blocks_per_function)
    return buf.getvalue()


def write_report(con: Console, result: AnnotateResult, *, top: int = 20,
                 blocks_per_function: int = 8) -> None:
    a = result.accounting
    bid = result.build_id or "none"
    con.print(f"[bold]bbmap annotate[/bold] {result.binary}  (build-id {bid})")
    for p in result.profiles:
        ev = ", ".join(p.events) or "?"
        con.print(f"  profile {p.path}: {p.samples} samples ({ev}), {p.branches} branch records, "
                  f"{p.binary_mmaps} executable mapping(s) of the binary")
    for d in result.warnings:
        style = "bold red" if d.severity == "error" else "yellow"
        con.print(f"[{style}]{d.severity}:[/{style}] {d}", markup=True)

    total = a.total_samples
    hot = result.hot_functions(top)
    if hot:
        lbr = result.has_lbr
        t = Table(title=f"Hottest functions (top {len(hot)}) and their hottest blocks",
                  title_justify="left", show_edge=False, pad_edge=False)
        t.add_column("function / block")
        t.add_column("address range")
        t.add_column("size", justify="right")
        t.add_column("flags")
        t.add_column("samples", justify="right")
        t.add_column("share", justify="right")
        if lbr:
            t.add_column("count (LBR)", justify="right")
        m = result.block_map
        for fv in hot:
            row = [f"[bold]{fv.name}[/bold]", f"{fv.address:#x}", "", "", str(fv.samples),
                   _pct(fv.samples, total)]
            if lbr:
                row.append(str(fv.count))
            t.add_row(*row)
            blk = fv.blocks
            if not len(blk):
                t.add_row("  (no block-map entry)", *[""] * (len(row) - 1))
                continue
            key = result.block_count[blk] if lbr else result.block_samples[blk]
            order = sorted(range(len(blk)), key=lambda i: (-int(key[i]),
                                                            -int(result.block_samples[blk[i]]), i))
            shown = [int(blk[i]) for i in order[:blocks_per_function]
                     if key[i] > 0 or result.block_samples[blk[i]] > 0]
            for b in shown:
                start = int(result.block_start[b])
                size = int(m.block_size[b])
                r = [f"  bb {int(m.block_id[b])}", f"{start:#x}-{start + size:#x}", str(size),
                     ",".join(f.replace("can_fall_through", "ft") for f in result.block_flags(b)),
                     str(int(result.block_samples[b])),
                     _pct(int(result.block_samples[b]), fv.samples)]
                if lbr:
                    r.append(str(int(result.block_count[b])))
                t.add_row(*r)
            rest = len(blk) - len(shown)
            if rest:
                t.add_row(f"  ... {rest} more block(s)", *[""] * (len(row) - 1))
        con.print(t)
    con.print(accounting_table(result))
    if a.total_ranges:
        con.print(range_table(result))


def accounting_table(result: AnnotateResult) -> Table:
    a = result.accounting
    t = Table(title="Accounting (every sample and branch record in exactly one bucket)",
              title_justify="left", show_edge=False, pad_edge=False)
    t.add_column("bucket")
    t.add_column("samples", justify="right")
    t.add_column("share", justify="right")
    has_br = a.total_branches > 0
    if has_br:
        t.add_column("branch records", justify="right")
        t.add_column("share", justify="right")
    for i, name in enumerate(BUCKETS):
        row = [BUCKET_LABELS[name], str(int(a.samples[i])),
               _pct(int(a.samples[i]), a.total_samples)]
        if has_br:
            row += [str(int(a.branches[i])), _pct(int(a.branches[i]), a.total_branches)]
        t.add_row(*row)
        if name == "other_dso":
            names = sorted(set(a.dso_samples) | set(a.dso_branches),
                           key=lambda k: (-a.dso_samples.get(k, 0), k))
            for dso in names[:10]:
                n = a.dso_samples.get(dso, 0)
                r = [f"  {dso}", str(n), _pct(n, a.total_samples)]
                if has_br:
                    nb = a.dso_branches.get(dso, 0)
                    r += [str(nb), _pct(nb, a.total_branches)]
                t.add_row(*r)
            if len(names) > 10:
                t.add_row(f"  ... {len(names) - 10} more DSO(s)", *[""] * (len(row) - 1))
    if has_br:
        d = len(BRANCH_BUCKETS) - 1
        t.add_row(BUCKET_LABELS["duplicate"], "", "", str(int(a.branches[d])),
                  _pct(int(a.branches[d]), a.total_branches))
    row = ["[bold]total[/bold]", str(a.total_samples), "100.0%" if a.total_samples else "-"]
    if has_br:
        row += [str(a.total_branches), "100.0%"]
    t.add_row(*row)
    return t


def range_table(result: AnnotateResult) -> Table:
    a = result.accounting
    t = Table(title="LBR fall-through ranges", title_justify="left", show_edge=False,
              pad_edge=False)
    t.add_column("range")
    t.add_column("count", justify="right")
    t.add_column("share", justify="right")
    for i, name in enumerate(RANGE_REASONS):
        t.add_row(RANGE_LABELS[name], str(int(a.ranges[i])),
                  _pct(int(a.ranges[i]), a.total_ranges))
    t.add_row("[bold]total[/bold]", str(a.total_ranges), "100.0%")
    return t
