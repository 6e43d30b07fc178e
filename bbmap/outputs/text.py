"""The terminal report: hottest functions, their hottest blocks, and the accounting.

The report is built once as plain tables (title, columns, rows); a terminal gets them
drawn by rich, a file or pipe gets a plain aligned layout (rich's layout engine costs
more than the whole aggregation on big profiles, and a pipe wants no box drawing).  The
accounting table is always printed, and the diagnosis comes first when little or nothing
mapped, so an empty result is never silent.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from bbmap.aggregate.accounting import RANGE_LABELS, RANGE_REASONS
from bbmap.aggregate.result import AnnotateResult
from bbmap.buckets import BRANCH_BUCKETS, BUCKET_LABELS, BUCKETS


@dataclass
class Table:
    title: str
    columns: list[str]
    right: set[int]  # right-aligned column indexes
    rows: list[list[str]] = field(default_factory=list)
    bold_rows: set[int] = field(default_factory=set)  # function / total rows


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:.1f}%" if d else "-"


def build_report(result: AnnotateResult, *, top: int = 20, blocks_per_function: int = 8
                 ) -> tuple[list[tuple[str, str]], list[Table]]:
    """(header lines as (style, text), tables) for the report."""
    a = result.accounting
    head: list[tuple[str, str]] = [
        ("bold", f"bbmap annotate {result.binary}  (build-id {result.build_id or 'none'}"
                 + (f", Go build id {result.go_build_id}" if result.go_build_id else "")
                 + ")")]
    for p in result.profiles:
        ev = ", ".join(p.events) or "?"
        head.append(("", f"  profile {p.path}: {p.samples} samples ({ev}), {p.branches} branch "
                         f"records, {p.binary_mmaps} executable mapping(s) of the binary"))
    sm = result.sample_model if result.count_source == "inferred" else None
    if sm is not None:
        head.append(("", f"  counts are estimates inferred from IP samples of "
                         f"{sm['event'] or 'an unknown event'} (model {sm['model']}: "
                         f"{sm['why']}); relative executions, comparable within this "
                         f"profile only; {round(100 * sm['confidence'])}% intervals in "
                         "--format json/csv"))
    for d in result.warnings:
        head.append(("error" if d.severity == "error" else "warning", f"{d.severity}: {d}"))
    tables = []
    hot = result.hot_functions(top)
    if hot:
        tables.append(_functions_table(result, hot, blocks_per_function))
    tables.append(_accounting_table(result))
    if a.total_ranges:
        tables.append(_range_table(result))
    return head, tables


def _functions_table(result: AnnotateResult, hot, blocks_per_function: int) -> Table:  # noqa: ANN001
    lbr = result.has_counts  # LBR or inferred execution estimates
    total = result.accounting.total_samples
    cols = ["function / block", "address range", "size", "flags", "samples", "share"]
    if lbr:
        cols.append("count (LBR)" if result.count_source == "lbr" else "count (inferred)")
    m = result.block_map
    has_map = m.num_blocks > 0  # without one (a Go binary) the table is per function only
    t = Table(f"Hottest functions (top {len(hot)})" + (" and their hottest blocks"
                                                       if has_map else " (no block map)"),
              cols, {2, 4, 5, 6})
    for fv in hot:
        row = [fv.name, f"{fv.address:#x}", "", "", str(fv.samples), _pct(fv.samples, total)]
        if lbr:
            row.append(str(fv.count))
        t.bold_rows.add(len(t.rows))
        t.rows.append(row)
        blk = fv.blocks
        if not len(blk):
            if has_map:
                t.rows.append(["  (no block-map entry)"] + [""] * (len(cols) - 1))
            continue
        key = result.block_count[blk] if lbr else result.block_samples[blk]
        smp = result.block_samples[blk]
        order = sorted(range(len(blk)), key=lambda i: (-int(key[i]), -int(smp[i]), i))
        shown = [int(blk[i]) for i in order[:blocks_per_function] if key[i] > 0 or smp[i] > 0]
        for b in shown:
            start = int(result.block_start[b])
            size = int(m.block_size[b])
            n = int(result.block_samples[b])
            r = [f"  bb {int(m.block_id[b])}", f"{start:#x}-{start + size:#x}", str(size),
                 ",".join(f.replace("can_fall_through", "ft") for f in result.block_flags(b)),
                 str(n), _pct(n, fv.samples)]
            if lbr:
                r.append(str(int(result.block_count[b])))
            t.rows.append(r)
        if len(blk) > len(shown):
            t.rows.append([f"  ... {len(blk) - len(shown)} more block(s)"]
                          + [""] * (len(cols) - 1))
    return t


def _accounting_table(result: AnnotateResult) -> Table:
    a = result.accounting
    has_br = a.total_branches > 0
    cols = ["bucket", "samples", "share"] + (["branch records", "share"] if has_br else [])
    t = Table("Accounting (every sample and branch record in exactly one bucket)", cols,
              {1, 2, 3, 4})
    for i, name in enumerate(BUCKETS):
        row = [BUCKET_LABELS[name], str(int(a.samples[i])),
               _pct(int(a.samples[i]), a.total_samples)]
        if has_br:
            row += [str(int(a.branches[i])), _pct(int(a.branches[i]), a.total_branches)]
        t.rows.append(row)
        if name == "other_dso":
            names = sorted(set(a.dso_samples) | set(a.dso_branches),
                           key=lambda k: (-a.dso_samples.get(k, 0), k))
            for dso in names[:10]:
                n = a.dso_samples.get(dso, 0)
                r = [f"  {dso}", str(n), _pct(n, a.total_samples)]
                if has_br:
                    nb = a.dso_branches.get(dso, 0)
                    r += [str(nb), _pct(nb, a.total_branches)]
                t.rows.append(r)
            if len(names) > 10:
                t.rows.append([f"  ... {len(names) - 10} more DSO(s)"] + [""] * (len(cols) - 1))
    if has_br:
        d = len(BRANCH_BUCKETS) - 1
        t.rows.append([BUCKET_LABELS["duplicate"], "", "", str(int(a.branches[d])),
                       _pct(int(a.branches[d]), a.total_branches)])
    row = ["total", str(a.total_samples), "100.0%" if a.total_samples else "-"]
    if has_br:
        row += [str(a.total_branches), "100.0%"]
    t.bold_rows.add(len(t.rows))
    t.rows.append(row)
    return t


def _range_table(result: AnnotateResult) -> Table:
    a = result.accounting
    t = Table("LBR fall-through ranges", ["range", "count", "share"], {1, 2})
    for i, name in enumerate(RANGE_REASONS):
        t.rows.append([RANGE_LABELS[name], str(int(a.ranges[i])),
                       _pct(int(a.ranges[i]), a.total_ranges)])
    t.bold_rows.add(len(t.rows))
    t.rows.append(["total", str(a.total_ranges), "100.0%"])
    return t


# ---------------------------------------------------------------------------- backends
NAME_MIN = 24  # the first (name) column never shrinks below this


def _elide(text: str, width: int) -> str:
    """Shorten in the middle: a C++ name's scope and its parameter list both matter."""
    if len(text) <= width:
        return text
    head = (width - 3) * 2 // 3
    return text[:head] + "..." + text[len(text) - (width - 3 - head):]


def render_plain(head: list[tuple[str, str]], tables: list[Table], *, width: int = 120) -> str:
    """Aligned columns, no escape codes: for files, pipes and diffs.  Long names in the
    first column are elided in the middle so a row fits ``width``."""
    out = [text for _, text in head]
    for t in tables:
        cells = [t.columns] + t.rows
        widths = [max(len(r[i]) for r in cells) for i in range(len(t.columns))]
        rest = sum(widths[1:]) + 2 * (len(widths) - 1)
        if widths and widths[0] + rest > width and widths[0] > NAME_MIN:
            widths[0] = max(NAME_MIN, width - rest)
            cells = [[_elide(r[0], widths[0]), *r[1:]] for r in cells]
        columns, rows = cells[0], cells[1:]
        out.append("")
        out.append(t.title)

        def line(r: list[str], t: Table = t, widths: list[int] = widths) -> str:
            return "  ".join(c.rjust(w) if i in t.right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths))).rstrip()

        out.append(line(columns))
        out.append("  ".join("-" * w for w in widths))
        out.extend(line(r) for r in rows)
    return "\n".join(out) + "\n"


def render_rich(head: list[tuple[str, str]], tables: list[Table], *, width: int = 120,
                color: bool = True) -> str:
    """The same tables drawn by rich (bold function rows, coloured diagnostics)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=color,
                  color_system="auto" if color else None, highlight=False)
    styles = {"bold": "bold", "error": "bold red", "warning": "yellow", "": ""}
    for style, text in head:
        con.print(f"[{styles[style]}]{escape(text)}[/]" if styles[style] else escape(text))
    for t in tables:
        rt = RichTable(title=t.title, title_justify="left", show_edge=False, pad_edge=False)
        for i, c in enumerate(t.columns):
            rt.add_column(c, justify="right" if i in t.right else "left")
        for k, r in enumerate(t.rows):
            rt.add_row(*r, style="bold" if k in t.bold_rows else None)
        con.print(rt)
    return buf.getvalue()


def render_text(result: AnnotateResult, *, top: int = 20, blocks_per_function: int = 8,
                width: int = 120, color: bool = False, rich: bool = False) -> str:
    """The report as text: drawn by rich for a terminal, plain aligned otherwise."""
    head, tables = build_report(result, top=top, blocks_per_function=blocks_per_function)
    if rich or color:
        return render_rich(head, tables, width=width, color=color)
    return render_plain(head, tables, width=width)
