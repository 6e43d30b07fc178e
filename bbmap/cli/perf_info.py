"""``bbmap perf-info PERF_DATA [--json] [-o FILE]``: what a perf.data file holds."""

from __future__ import annotations

import json
import sys

import click

from bbmap.atomic import write_atomic
from bbmap.cli import EXIT_PROBLEMS, guarded, main
from bbmap.perf.info import format_text, perf_info


@main.command("perf-info")
@click.argument("perf_data", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write to FILE (atomically) instead of stdout.")
@guarded
def perf_info_cmd(perf_data: str, as_json: bool, output: str | None) -> None:
    """Header, events, features, build ids, mmaps, sample and record counts of PERF_DATA.

    Exits 1 when the file is damaged past a point (the counts cover what could be read).
    """
    info = perf_info(perf_data)
    text = json.dumps(info, indent=2) + "\n" if as_json else format_text(info) + "\n"
    if output:
        write_atomic(output, text)
    else:
        click.echo(text, nl=False)
    if output:  # stdout shows them in the document itself
        for w in info["warnings"]:
            click.echo(f"bbmap: warning: {w}", err=True)
    if info["errors"]:
        sys.exit(EXIT_PROBLEMS)
