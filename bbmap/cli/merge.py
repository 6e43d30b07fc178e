"""``bbmap merge AGG... -o FILE``: the exact sum of aggregate files (spec/aggregate.md)."""

from __future__ import annotations

import click

from bbmap.cli import guarded, main
from bbmap.cli.options import output_option

MERGE_GROUP = 256  # aggregates read and summed at once (bounds memory, keeps it fast)


@main.command("merge", short_help="Sum aggregates of one binary into one aggregate file.")
@click.argument("aggregates", nargs=-1, required=True, metavar="AGG...")
@output_option(required=True)
@guarded
def merge_cmd(aggregates: tuple[str, ...], output: str) -> None:
    """Merge aggregate files (or @listfiles of them) of one binary into one.  The result
    is byte-identical whatever the order and grouping of the inputs; aggregates of
    different binaries (build-ids) or profile options are refused (exit 2).  Exit 1 when
    a source profile was unreadable or damaged (the file still holds everything else).

    \b
    Example:
      bbmap merge day1.parquet day2.parquet -o week.parquet
    """
    from bbmap.aggregate.store import merge_files, write_aggregate
    from bbmap.cli.profile_args import exit_if_incomplete
    from bbmap.run import expand_inputs

    paths = expand_inputs(list(aggregates))
    agg = merge_files(paths, group=MERGE_GROUP)
    write_aggregate(agg, output)
    exit_if_incomplete(agg)
