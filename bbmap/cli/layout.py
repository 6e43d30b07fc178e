"""``bbmap layout PERF_DATA... BINARY``: Propeller-style cluster and symbol-order files."""

from __future__ import annotations

from typing import Any

import click

from bbmap.cli import guarded, main
from bbmap.cli.options import OutputFile, output_option, write_output
from bbmap.cli.profile_args import (
    exit_if_failed,
    profile_options,
    refuse_ignored,
    run_options,
    split_inputs,
)
from bbmap.cli.stale_args import annotate_any, stale_options
from bbmap.errors import UsageError
from bbmap.options import Status


@main.command("layout",
              short_help="Order blocks and functions, split hot from cold (Propeller-style).")
@click.argument("inputs", nargs=-1, required=True, metavar="PERF_DATA... BINARY")
@click.option("--cc-profile", type=OutputFile(), default=None, metavar="FILE",
              help="write the basic-block cluster file here (clang "
                   "-fbasic-block-sections=list=FILE)")
@click.option("--ld-profile", type=OutputFile(), default=None, metavar="FILE",
              help="write the symbol-ordering file here (lld --symbol-ordering-file=FILE)")
@click.option("--params", type=click.Choice(["propeller", "llvm"]), default="propeller",
              show_default=True, help="Ext-TSP weights: Propeller's or LLVM's")
@click.option("--cluster-version", type=click.Choice(["0", "1"]), default="1",
              show_default=True, help="cluster file format (0 for clang <= 17)")
@click.option("--verbose", is_flag=True,
              help="add Propeller's #ext-tsp score / #entry-freq / #cfg lines to the "
                   "cluster file")
@click.option("--layout-only", is_flag=True,
              help="reorder but do not split: cold blocks stay in the function, after the "
                   "hot ones")
@click.option("--split-only", is_flag=True,
              help="split but do not reorder: hot blocks keep their order, cold ones move "
                   "to .cold")
@click.option("--function-order", type=click.Choice(["c3", "cdsort", "hot"]), default="c3",
              show_default=True,
              help="call-chain clustering, LLVM's cache-directed sort, or hottest first")
@click.option("--loop-alignment", type=click.Choice(["auto", "keep", "drop"]), default="auto",
              show_default=True,
              help="the relink's loop-header alignment: off when the new order runs the "
                   "compiler's padding on hot paths more than its own order did (auto), "
                   "always (drop) or never (keep); the report prints the flags")
@click.option("--json", "as_json", is_flag=True,
              help="the report as JSON; default with -o NAME.json")
@output_option()
@profile_options
@stale_options
@guarded
def layout_cmd(inputs: tuple[str, ...], cc_profile: str | None, ld_profile: str | None,
               params: str, cluster_version: str, verbose: bool, layout_only: bool,
               split_only: bool, function_order: str, loop_alignment: str, as_json: bool,
               output: str | None, profiled_binary: str | None = None,
               carry_report: str | None = None,
               **profile: Any) -> None:
    """Lay out BINARY's hot code from the branch profile in PERF_DATA (files or
    @listfiles, merged): Ext-TSP block order, hot/cold splitting, call-chain function
    order.  Prints (or -o writes) the report: per function the Ext-TSP score before and
    after, hot and cold bytes, fall-throughs gained.  Exit 1 when nothing could be put in
    a block.

    \b
    Example:
      bbmap layout perf.data ./app --cc-profile cc.txt --ld-profile ld.txt
    """
    from bbmap.cli.options import json_from_output

    as_json = json_from_output(as_json, output)
    from bbmap.atomic import write_atomic
    from bbmap.layout.plan import plan_layout
    from bbmap.outputs.propeller import (
        render_cc_profile,
        render_ld_profile,
        render_report,
        render_report_json,
    )

    if not cc_profile:  # the cluster file's options, without a cluster file
        refuse_ignored("layout without --cc-profile", ["cluster_version", "verbose"])
    if layout_only and split_only:
        raise UsageError("--layout-only and --split-only exclude each other (one reorders "
                         "without splitting, the other splits without reordering)")
    perf_paths, binary = split_inputs(inputs, "bbmap layout perf.data ./binary "
                                                      "--cc-profile cc.txt --ld-profile ld.txt")
    result = annotate_any(perf_paths, binary, profiled_binary, carry_report,
                          run_options(**profile))
    mode = "layout-only" if layout_only else "split-only" if split_only else "split"
    plan = plan_layout(result, params=params, mode=mode, function_order=function_order,
                       loop_alignment=loop_alignment)
    if result.status == Status.REFUSED:  # does not fit the binary: nothing written
        exit_if_failed(result)
    if cc_profile:  # (a run that maps nothing exits 1: no existing file is replaced)
        write_atomic(cc_profile, render_cc_profile(plan, version=int(cluster_version),
                                                   verbose=verbose))
    if ld_profile:
        write_atomic(ld_profile, render_ld_profile(plan))
    report = render_report_json(plan) if as_json else render_report(plan)
    write_output(report, output)
    exit_if_failed(result)
