"""``bbmap report PERF_DATA... BINARY -o report.html``: one self-contained HTML page."""

from __future__ import annotations

from typing import Any

import click

from bbmap.cli import guarded, main
from bbmap.cli.options import output_option
from bbmap.cli.profile_args import (
    exit_if_failed,
    profile_options,
    run_options,
    split_inputs,
)
from bbmap.options import Status

LAYOUT_TOP = 200


@main.command("report", short_help="Write one self-contained HTML page of a profile.")
@click.argument("inputs", nargs=-1, required=True, metavar="PERF_DATA... BINARY")
@output_option(required=True)
@click.option("--pictures", type=click.IntRange(min=0), default=50, show_default=True,
              metavar="N",
              help="embed CFG pictures of the hottest N functions (each is a whole SVG)")
@click.option("--params", type=click.Choice(["propeller", "llvm"]), default="propeller",
              show_default=True, help="the layout section's Ext-TSP weights")
@click.option("--layout-top", type=click.IntRange(min=0), default=LAYOUT_TOP, show_default=True,
              metavar="N",
              help="lay out the hottest N functions (0: all of them, as bbmap layout does; "
                   "Ext-TSP takes about a millisecond per function)")
@click.option("--no-layout", is_flag=True, help="leave the layout section out")
@profile_options
@guarded
def report_cmd(inputs: tuple[str, ...], output: str, pictures: int, params: str,
               layout_top: int, no_layout: bool, **profile: Any) -> None:
    """One HTML page of BINARY's profile in PERF_DATA (files, @listfiles or aggregates,
    merged): the run and where its samples landed, the hot functions (sortable,
    filterable), each function's blocks, edges and CFG picture, the layout bbmap layout
    would make, and -- when the binary has a PGO analysis map -- verify --profile's
    verdicts.  Self-contained (no network when viewed); readable with scripts off.  Exit
    1 when nothing could be put in a block.

    \b
    Example:
      bbmap report perf.data ./app -o report.html
    """
    from bbmap.atomic import write_atomic
    from bbmap.cli.cfg import range_labels
    from bbmap.outputs.report_html import render_report_html, report_data
    from bbmap.run import annotate

    perf_paths, binary = split_inputs(inputs, "bbmap report perf.data ./binary "
                                              "-o report.html")
    result = annotate(perf_paths, binary,
                      options=run_options(**profile).replace(cluster_stats=True))
    if result.status == Status.REFUSED:  # does not fit the binary: nothing written
        exit_if_failed(result)
    plan = verdicts = None
    if result.status != Status.NOTHING_MAPPED:
        if not no_layout:
            from bbmap.layout.plan import plan_layout

            plan = plan_layout(result, params=params, top=layout_top or None)
        if has_pgo_map(result):
            from bbmap.verify.api import judge_profile

            verdicts = judge_profile(result, binary=binary, profiles=perf_paths)
    data = report_data(result, plan=plan, verdicts=verdicts, pictures=pictures,
                       layout_top=layout_top or None,
                       range_labels=range_labels(result))
    write_atomic(output, render_report_html(data))  # (exit 1: no existing file replaced)
    exit_if_failed(result)


def has_pgo_map(result: Any) -> bool:
    """Does the block map carry any PGO analysis (entry counts, frequencies, branch
    probabilities)?"""
    from bbmap.formats.bbaddrmap import FEAT_BB_FREQ, FEAT_BR_PROB, FEAT_FUNC_ENTRY_COUNT

    m = result.block_map
    pgo = FEAT_BB_FREQ | FEAT_BR_PROB | FEAT_FUNC_ENTRY_COUNT
    return bool(m.num_functions and (m.func_feature & pgo).any())
