"""``bbmap verify BINARY...``: check compiler-emitted block metadata; exit 0 only if clean."""

from __future__ import annotations

import json
import sys

import click

from bbmap.atomic import atomic_open
from bbmap.cli import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    guarded,
    main,
    refuse_output_over_input,
)
from bbmap.errors import BBMapError


def _known_checks(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
                  ) -> tuple[str, ...]:
    from bbmap.verify.api import select_checks

    try:
        select_checks(value or None)
    except BBMapError as e:
        raise click.BadParameter(str(e)) from None
    return value


@main.command("verify")
@click.argument("binaries", nargs=-1)
@click.option("--check", "checks", multiple=True, metavar="NAME", callback=_known_checks,
              help="Run only this check (repeatable; see --list-checks).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document for all binaries.")
@click.option("--coverage", "show_coverage", is_flag=True,
              help="Also print the byte coverage of each executable section.")
@click.option("--max-findings", default=50, show_default=True,
              help="Findings listed per check in text output (JSON lists all).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the report here (atomically) instead of stdout.")
@click.option("--debug-dir", "debug_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra directory searched for a debug file by build-id.")
@click.option("--list-checks", is_flag=True, help="List the checks and exit.")
@guarded
def verify_cmd(binaries: tuple[str, ...], checks: tuple[str, ...], as_json: bool,
               show_coverage: bool, max_findings: int, output: str | None,
               debug_dirs: tuple[str, ...], list_checks: bool) -> None:
    """Check the basic-block address maps in each BINARY against its symbols and code.

    Exit status: 0 when every selected check passes on every binary, 1 when a check
    fails, 3 when a file cannot be read as ELF.
    """
    from bbmap.verify.api import select_checks, verify
    from bbmap.verify.checks import CHECKS

    if list_checks:
        for c in CHECKS.values():
            click.echo(f"{c.name:<24}{c.group:<14}{c.rule}")
        sys.exit(EXIT_OK)
    if not binaries:
        click.echo("bbmap: error: give at least one BINARY (or --list-checks)", err=True)
        sys.exit(EXIT_USAGE)
    refuse_output_over_input(output, binaries)
    names = select_checks(checks) if checks else None
    reports = []
    errors: list[tuple[str, str]] = []
    for b in binaries:
        try:
            reports.append(verify(b, names, debug_dirs=debug_dirs))
        except BBMapError as e:  # one unreadable file does not hide the others' reports
            click.echo(f"bbmap: error: {e}", err=True)
            errors.append((b, str(e)))
    ok = not errors and all(r.ok for r in reports)
    if as_json:
        text = json.dumps({"ok": ok, "reports": [r.to_json() for r in reports],
                           "errors": [{"path": p, "error": m} for p, m in errors]},
                          indent=1) + "\n"
    else:
        parts = []
        for r in reports:
            parts.append(r.format(max_listed=max_findings))
            if show_coverage and r.coverage is not None:
                parts.append(r.coverage.format())
        text = "\n".join(parts) + "\n" if parts else ""
    if output:
        with atomic_open(output) as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    sys.exit(EXIT_FAILED if errors else EXIT_OK if ok else EXIT_PROBLEMS)
