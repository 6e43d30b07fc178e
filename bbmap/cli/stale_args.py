"""``--profiled-binary OLD`` of annotate and layout: the profile was recorded on another
build of BINARY; carry it over (bbmap.stale, spec/stale.md).  The options and the run
live here so the commands take them with a line each."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from bbmap.cli.options import InputFile, OutputFile
from bbmap.errors import UsageError

_STALE_OPTIONS = (
    click.option("--profiled-binary", "profiled_binary", type=InputFile(), default=None,
                 metavar="OLD",
                 help="the profile was recorded on OLD, an earlier build of BINARY: match "
                      "its functions and blocks to BINARY's and infer BINARY's counts "
                      "(exit 1 when too little carries over, unless --force)"),
    click.option("--carry-report", "carry_report", type=OutputFile(), default=None,
                 metavar="FILE",
                 help="with --profiled-binary: write how each function carried over "
                      "(JSON) here; a summary goes to stderr either way"),
)


def stale_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_STALE_OPTIONS):
        fn = option(fn)
    return fn


def annotate_any(perf_paths: list[str], binary: str, profiled_binary: str | None,
                 carry_report: str | None, options: Any, progress: Any = None) -> Any:
    """``bbmap.run.annotate`` with ``options`` (:class:`bbmap.options.AnnotateOptions`),
    or with ``profiled_binary`` the carried result (its report summarised on stderr and
    written to ``carry_report``)."""
    if profiled_binary is None:
        if carry_report:
            raise UsageError("--carry-report goes with --profiled-binary OLD")
        from bbmap.run import annotate

        return annotate(perf_paths, binary, options=options, progress=progress)
    from bbmap.stale.api import annotate_stale

    res, rep = annotate_stale(perf_paths, profiled_binary, binary, **options.counting(),
                              **options.deriving())
    if rep.functions:
        for line in rep.render_text(top=10).splitlines():
            click.echo(f"bbmap: note: {line}", err=True)
    if carry_report:
        from bbmap.atomic import write_atomic

        write_atomic(carry_report, json.dumps(rep.to_json(), indent=1) + "\n")
    return res


def refuse_format(fmt: str, profiled_binary: str | None) -> None:
    """Formats written from the profiled binary's own addresses cannot be carried."""
    if profiled_binary and fmt in ("fdata", "bolt-preagg", "aggregate"):
        raise UsageError(f"--format {fmt} is written from the profile's own addresses and "
                         "cannot be carried to another build; drop --profiled-binary, or "
                         "use json, csv, text, propeller or symorder")


def verify_clusters(binaries: tuple[str, ...], cc_profile: str | None,
                    profiled: str | None, *, as_json: bool, output: str | None,
                    debug_dirs: tuple[str, ...]) -> None:
    """``verify BINARY --cc-profile FILE [--profiled-binary OLD]``: exit 0 when the file
    places BINARY's blocks as it was made to, 1 naming each function it misplaces."""
    import sys

    from bbmap.binary import load_binary
    from bbmap.cli import EXIT_OK, EXIT_PROBLEMS, allow_quick_exit
    from bbmap.cli.options import write_output
    from bbmap.stale.clusters import check_clusters

    if not cc_profile:
        raise UsageError("--profiled-binary (of verify) goes with --cc-profile FILE")
    if len(binaries) != 1:
        raise UsageError(f"--cc-profile checks one BINARY (got {len(binaries)})")
    b = load_binary(binaries[0], debug_dirs=debug_dirs)
    old = load_binary(profiled, debug_dirs=debug_dirs) if profiled else None
    bad = check_clusters(cc_profile, b, old)
    if as_json:
        text = json.dumps({"ok": not bad, "binary": binaries[0], "cc_profile": cc_profile,
                           "profiled_binary": profiled,
                           "misplaced": [m.to_json() for m in bad]}, indent=1) + "\n"
    else:
        lines = [f"{cc_profile} against {binaries[0]}"
                 + (f" (made from {profiled})" if profiled else "") + ": "
                 + ("every listed block is where the file means it" if not bad else
                    f"{len(bad)} function(s) misplaced")]
        for m in bad:
            ids = f": {' '.join(map(str, m.ids[:20]))}" if m.ids else ""
            lines.append(f"  line {m.line}: {m.function}: {m.reason}{ids}")
        text = "\n".join(lines) + "\n"
    write_output(text, output)
    allow_quick_exit()
    if bad:
        names = ", ".join(m.function for m in bad[:10])
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        click.echo(f"bbmap: error: {cc_profile}: misplaces the blocks of {names}{more}",
                   err=True)
    sys.exit(EXIT_PROBLEMS if bad else EXIT_OK)


