"""``bbmap perf-info PERF_DATA [--json] [-o FILE]``: what a perf.data file holds."""

from __future__ import annotations

import json
import sys

import click

from bbmap.cli import EXIT_PROBLEMS, allow_quick_exit, guarded, main
from bbmap.cli.options import output_option, write_output


@main.command("perf-info", short_help="Show what a perf.data file holds.")
@click.argument("perf_data")
@click.option("--json", "as_json", is_flag=True,
              help="Print the JSON document; default with -o NAME.json")
@output_option()
@guarded
def perf_info_cmd(perf_data: str, as_json: bool, output: str | None) -> None:
    """Header, events, features, build ids, mmaps, sample and record counts of PERF_DATA.

    Exits 1 when the file is damaged past a point (the counts cover what could be read).

    \b
    Example:
      bbmap perf-info perf.data -o info.json
    """
    from bbmap.cli.options import json_from_output

    as_json = json_from_output(as_json, output)
    from bbmap.perf.info import format_text, perf_info

    diags: list = []
    info = perf_info(perf_data, diagnostics=diags)
    errors = {str(d) for d in diags if d.severity == "error"}
    text = json.dumps(info, indent=2) + "\n" if as_json else format_text(info, errors) + "\n"
    write_output(text, output)
    allow_quick_exit()  # output written; the reader holds nothing shutdown must free
    for w in info["warnings"]:
        if w in errors:  # said on stderr whatever the output holds: every exit 1 says why
            click.echo(f"bbmap: error: {w}", err=True)
        elif output:
            click.echo(f"bbmap: warning: {w}", err=True)
    if info["trust_end"] is not None and not any(w in errors for w in info["warnings"]):
        # the reader marked where trust ends (a truncated or damaged stream): the counts
        # above are incomplete, so the exit code says so, with the reason
        click.echo(f"bbmap: error: {perf_data}: the file is damaged or truncated at offset "
                   f"{info['trust_end']:#x}: the counts cover only what precedes it",
                   err=True)
    if info["errors"] or info["trust_end"] is not None:
        sys.exit(EXIT_PROBLEMS)
