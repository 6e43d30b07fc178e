"""Layout outputs from a :class:`~bbmap.layout.plan.LayoutPlan` (spec/layout.md).

* the "cc profile": the basic-block cluster file clang reads with
  ``-fbasic-block-sections=list=FILE`` -- v1 (``v1``, ``f name``, ``c id id ...``) or v0
  (``!name``, ``!!id id ...``), as LLVM's ``BasicBlockSectionsProfileReader`` parses them;
  ``verbose`` adds Propeller's comment lines so the two tools' files can be diffed:
  ``#ext-tsp score: [intra: A -> B] [inter: C -> D]`` and ``#entry-freq N`` before the
  cluster, and after it ``#cfg id:count,succ:weight,... id:count,...`` (every block with its
  count and its successors' taken + fall-through weights, successors by ID) -- the forms in
  google/llvm-propeller ``propeller_profile_writer.cc`` and its
  ``testdata/sample_verbose_cc_directives.golden.txt``;
* the "ld profile": an lld ``--symbol-ordering-file``, hot functions in the plan's order,
  then the ``.cold`` parts the cluster file creates, in the same order;
* the report, as text or JSON: per function and in total, the Ext-TSP score before and
  after, hot and cold bytes, and the fall-throughs gained.

``render_propeller`` / ``render_symorder`` are what ``annotate --format propeller|symorder``
write: the same engine with its defaults.
"""

from __future__ import annotations

import json

from bbmap.layout.plan import LayoutPlan, plan_layout

_SOURCE_TEXT = {"lbr": "LBR execution counts",
                "inferred": "execution counts inferred from IP samples (min-cost flow)",
                "none": "IP samples only (no execution counts: hot blocks keep their order)"}


def render_cc_profile(plan: LayoutPlan, *, version: int = 1, verbose: bool = False) -> str:
    """The cluster file (v1 by default; v0 for LLVM 11-17)."""
    if version not in (0, 1):
        raise ValueError(f"cluster file version {version} (0 or 1)")
    lines = ["v1"] if version == 1 else []
    lines.append(f"# bbmap layout: {plan.binary}; {_SOURCE_TEXT[plan.count_source]}; "
                 f"params {plan.params.name}; mode {plan.mode}")
    # functions in address order (as Propeller lists them): the file says how to lay out
    # each function; the order of functions is the ld profile's business
    for f in sorted(plan.functions, key=lambda f: (f.cfg.address, f.name)):
        if not f.order:
            continue
        lines.append(f"f {f.name}" if version == 1 else f"!{f.name}")
        if verbose:
            lines.append(f"#ext-tsp score: [intra: {f.intra_before:f} -> {f.intra_after:f}] "
                         f"[inter: {f.inter_before:f} -> {f.inter_after:f}]")
            lines.append(f"#entry-freq {f.cfg.entry_count}")
        ids = " ".join(map(str, f.cluster_ids))
        lines.append(f"c {ids}" if version == 1 else f"!!{ids}")
        if verbose:
            lines.append(_cfg_line(f))
    return "\n".join(lines) + "\n"


def _cfg_line(f) -> str:  # noqa: ANN001 - a FunctionLayout
    """``#cfg`` + per block ``id:count`` and ``,succ:weight`` for its successors."""
    fn = f.cfg
    succ: dict[int, list[tuple[int, int]]] = {}
    for a, b, w in fn.edges.tolist():
        succ.setdefault(a, []).append((int(fn.ids[b]), w))
    parts = []
    for v in range(fn.num_nodes):
        item = f"{int(fn.ids[v])}:{int(fn.counts[v])}"
        for bid, w in sorted(succ.get(v, ())):
            item += f",{bid}:{w}"
        parts.append(item)
    return "#cfg " + " ".join(parts)


def render_ld_profile(plan: LayoutPlan) -> str:
    """The symbol-ordering file: hot code first, then the ``.cold`` parts."""
    names = plan.symbol_order
    return "\n".join(names) + ("\n" if names else "")


def render_report(plan: LayoutPlan) -> str:
    """The text report: what changed per function, and the totals."""
    p = plan.params
    out = [f"bbmap layout: {plan.binary}",
           f"counts: {_SOURCE_TEXT[plan.count_source]}",
           f"Ext-TSP params: {p.name} (fall-through {p.fallthrough_weight:g}"
           f"{'' if p.fallthrough_weight_uncond == p.fallthrough_weight else '/' + format(p.fallthrough_weight_uncond, 'g')}"  # noqa: E501
           f", forward {p.forward_weight:g} within {p.forward_distance} B"
           f", backward {p.backward_weight:g} within {p.backward_distance} B)",
           f"mode: {plan.mode}; function order: {plan.function_order}"
           + (f" ({plan.function_order_note})" if plan.function_order_note else ""), ""]
    w = max([len(f.cfg.name) for f in plan.functions] + [8])
    w = min(w, 48)
    out.append(f"{'function':<{w}} {'hot/all':>8} {'hot B':>7} {'cold B':>7} "
               f"{'score before':>14} {'score after':>14} {'change':>8} "
               f"{'fall-throughs':>14} {'gained':>10}")
    for f in plan.functions:
        name = f.cfg.name if len(f.cfg.name) <= w else f.cfg.name[:w - 1] + "~"
        out.append(f"{name:<{w}} {len(f.order):>3}/{f.cfg.num_nodes:<4} {f.hot_bytes:>7} "
                   f"{f.cold_bytes:>7} {f.intra_before:>14.1f} {f.intra_after:>14.1f} "
                   f"{_pct(f.intra_before, f.intra_after):>8} {f.fallthrough_after:>14} "
                   f"{f.fallthrough_after - f.fallthrough_before:>+10}")
    t = plan.totals()
    out.append(f"{'total':<{w}} {t['functions']:>8} {t['hot_bytes']:>7} {t['cold_bytes']:>7} "
               f"{t['intra_before']:>14.1f} {t['intra_after']:>14.1f} "
               f"{_pct(t['intra_before'], t['intra_after']):>8} "
               f"{t['fallthrough_after']:>14} {t['fallthrough_gained']:>+10}")
    out.append(f"inter-function (calls) score: {t['inter_before']:.1f} -> "
               f"{t['inter_after']:.1f} ({_pct(t['inter_before'], t['inter_after'])})")
    pb, pa = t["padding_run_before"], t["padding_run_after"]
    out.append(f"alignment padding run by fall-throughs: {pb['bytes']:,} B in "
               f"{pb['entries']:,} entries -> {pa['bytes']:,} B in {pa['entries']:,} entries")
    flags = " ".join(("-fbasic-block-sections=list=CC_PROFILE", *plan.compiler_flags))
    out.append(f"build: clang {flags} ...; link: -Wl,--symbol-ordering-file=LD_PROFILE")
    if plan.unmapped:
        out.append(f"hot functions without a block map (listed in the symbol order, not "
                   f"clustered): {', '.join(plan.unmapped)}")
    return "\n".join(out) + "\n"


def _pct(a: float, b: float) -> str:
    if a == 0:
        return "new" if b > 0 else "="
    return f"{(b - a) / a * 100:+.1f}%"


def render_report_json(plan: LayoutPlan) -> str:
    """The report as one JSON document (fixed key order, one function per line)."""
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    doc = plan.to_json()
    funcs = doc.pop("functions")
    parts = ["{"]
    for k, v in doc.items():
        parts.append(f"{enc(k)}:{enc(v)},")
    parts.append(f"{enc('functions')}:[")
    parts.append(",\n".join(enc(f) for f in funcs))
    parts.append("]")
    parts.append("}")
    return "\n".join(parts) + "\n"


def render_propeller(result, *, version: int = 1) -> str:  # noqa: ANN001 - AnnotateResult
    """``annotate --format propeller``: the cluster file of the default plan."""
    return render_cc_profile(plan_layout(result), version=version)


def render_symorder(result) -> str:  # noqa: ANN001 - AnnotateResult
    """``annotate --format symorder``: the symbol order of the default plan."""
    return render_ld_profile(plan_layout(result))
