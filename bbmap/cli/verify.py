"""``bbmap verify BINARY...``: check compiler-emitted block metadata; exit 0 only if clean.

``bbmap verify BINARY --profile PERF_DATA...`` instead holds the binary's PGO analysis map
against the measured run (bbmap.verify.profile); exit 0 only if no belief is mismatched.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from bbmap.cli import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    allow_quick_exit,
    guarded,
    main,
)
from bbmap.cli.options import InputFile, debug_dir_option, output_option, write_output
from bbmap.cli.profile_args import profile_options_besides_debug_dir
from bbmap.errors import BBMapError, UsageError


def _known_checks(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
                  ) -> tuple[str, ...]:
    from bbmap.verify.api import select_checks

    try:
        select_checks(value or None)
    except BBMapError as e:
        raise click.BadParameter(str(e)) from None
    return value


@main.command("verify", short_help="Check block maps (or the PGO map against a profile).")
@click.argument("binaries", nargs=-1)
@click.option("--check", "checks", multiple=True, metavar="NAME", callback=_known_checks,
              help="Run only this check (repeatable; see --list-checks).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document for all binaries; default with -o NAME.json")
@click.option("--coverage", "show_coverage", is_flag=True,
              help="Also print the byte coverage of each executable section.")
@click.option("--max-findings", default=50, show_default=True, metavar="N",
              help="Findings listed per check in text output (JSON lists all).")
@output_option()
@debug_dir_option()
@click.option("--list-checks", is_flag=True, help="List the checks and exit.")
@click.option("--allow-partial", is_flag=True,
              help="Exit 0 even when some checks could not run (a damaged section, "
                   "another machine's instructions); they are still listed.")
@click.option("--profile", "profiles", multiple=True, metavar="PERF_DATA", type=InputFile(),
              help="Hold the PGO analysis map against this profile instead of running the "
                   "checks (repeatable; further perf.data arguments after it count too; "
                   "@listfile reads paths from a file).")
@click.option("--threshold", type=float, default=None, metavar="P",
              help="--profile: a branch matches when its measured probability is within "
                   "+-P of the map's.  [default: 0.2]")
@click.option("--freq-factor", type=float, default=None, metavar="F",
              help="--profile: block frequencies (relative to the entry) and entry-count "
                   "shares match within a factor of F.  [default: 2]")
@click.option("--confidence", type=float, default=None, metavar="C",
              help="--profile: two-sided confidence of the intervals.  [default: 0.95]")
@click.option("--function", "functions", multiple=True, metavar="NAME",
              help="--profile: judge only this function (repeatable).")
@click.option("--top", type=int, default=20, show_default=True, metavar="N",
              help="--profile: mismatches listed in text output (JSON lists all).")
@click.option("--cc-profile", "cc_profile", type=InputFile(), default=None, metavar="FILE",
              help="check this Propeller cluster file against BINARY instead (exit 1 naming "
                   "each function whose blocks it misplaces; with --profiled-binary OLD, "
                   "the build it was made for, also IDs that now name other blocks)")
@click.option("--profiled-binary", "cc_profiled", type=InputFile(), default=None,
              metavar="OLD", help="--cc-profile: the build the cluster file was made from")
@profile_options_besides_debug_dir
@guarded
def verify_cmd(binaries: tuple[str, ...], checks: tuple[str, ...], as_json: bool,
               show_coverage: bool, max_findings: int, output: str | None,
               debug_dirs: tuple[str, ...], list_checks: bool, allow_partial: bool,
               profiles: tuple[str, ...],
               threshold: float | None, freq_factor: float | None,
               confidence: float | None, functions: tuple[str, ...], top: int,
               cc_profile: str | None = None, cc_profiled: str | None = None,
               **profile: Any) -> None:
    """Check the basic-block address maps in each BINARY against its symbols and code.

    With --profile, hold BINARY's PGO analysis map (branch probabilities, block
    frequencies, entry counts, post-link CFG) against what the profiled run did.

    Exit status: 0 when every selected check ran and passed on every binary (with
    --profile: no belief is mismatched), 1 when a check fails or could not run (unless
    --allow-partial; with --profile: a belief is mismatched, or the profile cannot be
    judged), 2 for a usage error, 3 when a file cannot be read.

    \b
    Example:
      bbmap verify ./app --debug-dir ./debug   # a stripped binary: give its debug file
    """
    from bbmap.cli.options import json_from_output

    as_json = json_from_output(as_json, output)
    from bbmap.verify.api import select_checks, verify
    from bbmap.verify.checks import CHECKS

    if cc_profile or cc_profiled:
        from bbmap.cli.stale_args import verify_clusters

        verify_clusters(binaries, cc_profile, cc_profiled, as_json=as_json, output=output,
                        debug_dirs=debug_dirs)
    if profiles:
        _profile_mode(binaries, profiles, as_json=as_json, output=output,
                      debug_dirs=debug_dirs, threshold=threshold, freq_factor=freq_factor,
                      confidence=confidence, functions=functions, top=top, checks=checks,
                      profile=profile)
    profile_only = {"threshold": threshold, "freq_factor": freq_factor,
                    "confidence": confidence, "name": profile["name"],
                    "pid": profile["pid"]}
    given = [k.replace("_", "-") for k, v in profile_only.items() if v is not None]
    given += ["function"] if functions else []
    given += [k.replace("_", "-") for k in ("duplicate_lbr", "inference", "inference_solver")
              if profile[k] != "auto"]
    given += ["no-demangle"] if profile["no_demangle"] else []
    if given:
        raise UsageError(f"--{', --'.join(given)} only make sense with --profile PERF_DATA")
    if list_checks:
        for c in CHECKS.values():
            click.echo(f"{c.name:<24}{c.group:<14}{c.rule}")
        sys.exit(EXIT_OK)
    if not binaries:
        click.echo("bbmap: error: give at least one BINARY (or --list-checks)", err=True)
        sys.exit(EXIT_USAGE)
    names = select_checks(checks) if checks else None
    reports = []
    errors: list[tuple[str, str]] = []
    refused = False
    for b in binaries:
        try:
            reports.append(verify(b, names, debug_dirs=debug_dirs,
                                  allow_partial=allow_partial))
        except BBMapError as e:  # one unreadable file does not hide the others' reports
            click.echo(f"bbmap: error: {e}", err=True)
            errors.append((b, str(e)))
            refused |= isinstance(e, UsageError)  # a perf.data given as the binary
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
    write_output(text, output)
    for r in reports:  # the report is on stdout or in -o; stderr says why the exit is 1
        if not r.ok:
            click.echo(f"bbmap: error: {failure_line(r)}", err=True)
    allow_quick_exit()  # output written: nothing left for the interpreter's teardown
    sys.exit(EXIT_USAGE if refused else EXIT_FAILED if errors else EXIT_OK if ok
             else EXIT_PROBLEMS)


def _profile_mode(binaries: tuple[str, ...], profiles: tuple[str, ...], *, as_json: bool,
                  output: str | None, debug_dirs: tuple[str, ...], threshold: float | None,
                  freq_factor: float | None, confidence: float | None,
                  functions: tuple[str, ...], top: int, checks: tuple[str, ...],
                  profile: dict[str, Any]) -> None:
    """``verify BINARY --profile PERF_DATA...``: one binary, any number of profiles."""
    from bbmap.cli.profile_args import _is_perf_data, run_options
    from bbmap.run import expand_inputs
    from bbmap.verify.api import verify_profile

    if checks:
        raise UsageError("--check selects structural checks; --profile judges the PGO map "
                         "against a run: run them as two commands")
    # `--profile a.data b.data`: click gives b.data as a positional; take perf data back
    extra = [b for b in binaries if _is_perf_data(b)]  # file and pipe mode: PERFILE2
    bins = [b for b in binaries if b not in extra]
    if len(bins) != 1:
        raise UsageError("--profile judges one BINARY at a time "
                         f"(got {len(bins)}: {', '.join(bins) or 'none'})")
    binary = bins[0]
    if _is_perf_data(binary):
        raise UsageError(f"{binary} is perf data, not the binary")
    perf = expand_inputs([*profiles, *extra])
    rep = verify_profile(binary, perf, threshold=threshold, freq_factor=freq_factor,
                         confidence=confidence, functions=list(functions) or None,
                         options=run_options(debug_dirs=debug_dirs, **profile))
    if as_json:
        text = rep.dumps()
    else:
        text = rep.format(top=top) + "\n"
    write_output(text, output)
    allow_quick_exit()  # output written, the disassembly cache entry renamed into place
    for e in rep.errors:
        click.echo(f"bbmap: error: {e}", err=True)
    if not rep.ok and not rep.errors:
        why = ("nothing could be judged" if rep.comparison is None else
               "the PGO analysis map does not match the profile (the report lists the "
               "mismatched beliefs, worst first)")
        click.echo(f"bbmap: error: {binary}: {why}", err=True)
    sys.exit(EXIT_OK if rep.ok else EXIT_PROBLEMS)


def failure_line(r: Any) -> str:
    """Why a :class:`~bbmap.verify.api.VerifyReport` is not OK, in one line."""
    parts = []
    if r.failed_checks:
        parts.append(f"{len(r.failed_checks)} check(s) failed ({', '.join(r.failed_checks)})")
    if r.not_run and not r.allow_partial:
        parts.append(f"{len(r.not_run)} could not run ({', '.join(r.not_run)}; "
                     "--allow-partial accepts that)")
    return f"{r.path}: verification failed: {'; '.join(parts)}"

