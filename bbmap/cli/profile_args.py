"""Arguments shared by the commands that read profiles against a binary (annotate, cfg)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from bbmap.cli import EXIT_PROBLEMS
from bbmap.cli.options import debug_dir_option
from bbmap.errors import UsageError
from bbmap.options import (
    DUPLICATE_LBR,
    INFERENCE_MODES,
    MISMATCH_THRESHOLD,
    OUTPUT_DERIVES,
    SAMPLE_MODEL_CHOICES,
    SOLVER_CHOICES,
    AnnotateOptions,
)

# the CLI parameter of each derived option (the keys of ``AnnotateOptions.deriving``)
DERIVING_PARAMS = {"inference": "inference", "solver": "inference_solver",
                   "sample_model": "sample_model", "disasm_cache": "no_cache",
                   "force": "force"}

_OPTIONS = (
    click.option("--name", "name", default=None, metavar="NAME",
                 help="the binary's file name as the profile mapped it (if renamed or moved)"),
    click.option("--pid", type=int, default=None, metavar="PID",
                 help="only samples of this process"),
    click.option("--no-demangle", is_flag=True, help="show raw (mangled) names"),
    debug_dir_option(),
    click.option("--duplicate-lbr", "duplicate_lbr", type=click.Choice(list(DUPLICATE_LBR)),
                 default="auto", show_default=True,
                 help="the hardware's duplicated newest LBR entry: detect it per batch, or "
                      "always drop / always keep entry 0 when it equals entry 1"),
    click.option("--inference", type=click.Choice(INFERENCE_MODES), default="auto",
                 show_default=True,
                 help="infer block and edge counts from IP samples over the CFG recovered "
                      "from the binary (min-cost flow): auto = when the profile has no "
                      "branch stacks"),
    click.option("--inference-solver", "inference_solver",
                 type=click.Choice(SOLVER_CHOICES), default="auto",
                 show_default=True,
                 help="min-cost flow solver: auto = OR-Tools if installed "
                      "(pip install 'bbmap[inference]'), else the built-in one"),
    click.option("--sample-model", "sample_model",
                 type=click.Choice(SAMPLE_MODEL_CHOICES), default="auto",
                 show_default=True,
                 help="how inference turns IP samples into executions: auto = by the event "
                      "(precise instruction events such as instructions:pp per instruction, "
                      "timer and cycle events by time; spec/inference.md)"),
    click.option("--no-cache", "no_cache", is_flag=True,
                 help="do not read or write the caches inference keeps: the binary's "
                      "disassembly, solved functions and whole results "
                      "($XDG_CACHE_HOME/bbmap/disasm; also BBMAP_NO_CACHE=1)"),
    click.option("--event", "event", default=None, metavar="NAME",
                 help="count only this event's samples (a profile of several events: "
                      "cpu-clock, or with perf's modifiers cpu-clock:u); default: all, summed"),
    click.option("--force", is_flag=True,
                 help="keep a result whose addresses do not fit the binary's instructions "
                      "(sampled IPs off instruction starts, branch sources that are not "
                      f"branches, jump targets mid-block: over {MISMATCH_THRESHOLD:.0%} is "
                      "refused)"),
)


def profile_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the options above; the command receives them as keyword arguments."""
    for option in reversed(_OPTIONS):
        fn = option(fn)
    return fn


def profile_options_besides_debug_dir(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The same, for a command that already takes ``--debug-dir`` (verify)."""
    for option in reversed(_OPTIONS):
        if option is not _OPTIONS[3]:  # debug_dir_option()
            fn = option(fn)
    return fn


def ignored_deriving(output: str) -> list[str]:
    """The CLI parameters of the derived work ``output`` does not read
    (``bbmap.options.OUTPUT_DERIVES``)."""
    reads = OUTPUT_DERIVES.get(output)
    if reads is None:
        return []
    return [DERIVING_PARAMS[k] for k in AnnotateOptions().deriving() if k not in reads]


def refuse_ignored(what: str, params: list[str]) -> None:
    """A flag the user gave that ``what`` (an output) would not read is a usage error
    (exit 2): the run would silently do something else than asked."""
    ctx = click.get_current_context()
    given = [p for p in dict.fromkeys(params)
             if ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE]
    if not given:
        return
    flags = [next(x.opts[0] for x in ctx.command.params if x.name == p) for p in given]
    raise UsageError(f"{what} does not read {', '.join(flags)}; drop "
                     f"{'it' if len(flags) == 1 else 'them'}")


def run_options(**profile: Any) -> AnnotateOptions:
    """The profile options as the one options object of a run (``bbmap.options``)."""
    return AnnotateOptions.from_cli(**profile)


def exit_if_incomplete(agg: Any) -> None:
    """After an aggregate is written: exit 1 naming each profile whose counts it lacks (an
    unreadable or damaged one), as ``exit_if_failed`` does for a result."""
    bad = [p for p in agg.profiles
           if p.error or any(w.severity == "error" for w in p.warnings)]
    if not bad:
        return
    for p in bad[:20]:
        if p.error:
            click.echo(f"bbmap: error: {p.error}", err=True)
        else:
            w = next(w for w in p.warnings if w.severity == "error")
            click.echo(f"bbmap: error: {w}", err=True)
    if len(bad) > 20:
        click.echo(f"bbmap: error: ... and {len(bad) - 20} more (the aggregate's profile "
                   "rows name each one)", err=True)
    click.echo(f"bbmap: error: incomplete: {len(bad)} of {len(agg.profiles)} profiles were "
               "unreadable or damaged", err=True)
    sys.exit(EXIT_PROBLEMS)


def aggregate_maps_nothing(agg: Any) -> bool:
    """No sample and no branch of the aggregate landed in the binary: no block row, no edge,
    no instruction address (what ``status == "nothing_mapped"`` is for a result)."""
    if len(agg.blocks.index) or len(agg.edges.index):
        return False
    a = agg.addresses
    return a is None or not (int(a.ip_samples.sum()) or int(a.trace_count.sum()))


def write_aggregate_and_exit(agg: Any, output: str, binary: str, session_opts: dict,
                             extra_outputs: tuple[Callable[[], None], ...] = ()) -> None:
    """Write the aggregate (and ``extra_outputs``) and exit as its contents say: an
    aggregate that maps nothing is said, with why (the diagnosis of a result made from it),
    and exits 1 (so it replaces no existing ``-o``: ``bbmap.atomic.OutputRun``); one
    missing unreadable profiles exits 1 (``exit_if_incomplete``)."""
    from bbmap.aggregate.store import write_aggregate

    if not aggregate_maps_nothing(agg):
        write_aggregate(agg, output)
        for write in extra_outputs:
            write()
        exit_if_incomplete(agg)
        return
    reasons = []
    try:
        from bbmap.run import Session

        s = Session(binary, **session_opts)
        s.add_aggregate(agg, output)
        reasons = [d for d in s.result(inference="off").warnings if d.severity == "error"]
    except Exception:  # noqa: BLE001 - the diagnosis is a courtesy; the verdict stands
        pass
    for d in reasons:
        click.echo(f"bbmap: error: {d}", err=True)
    n = len(agg.profiles)
    click.echo(f"bbmap: error: nothing mapped: no sample or branch of the {n} "
               f"profile{'s' * (n != 1)} lies in a block of {binary}", err=True)
    write_aggregate(agg, output)
    exit_if_incomplete(agg)
    sys.exit(EXIT_PROBLEMS)


def split_inputs(inputs: tuple[str, ...], example: str) -> tuple[list[str], str]:
    """``PERF_DATA... BINARY`` -> (profiles, binary), refusing what would go wrong."""
    if len(inputs) < 2:
        raise UsageError(f"need at least one perf.data file and the binary ({example})")
    *perf_paths, binary = inputs
    if _is_perf_data(binary):
        raise UsageError(f"{binary} is perf data, but the last argument must be the binary "
                         f"({example})")
    return perf_paths, binary


def exit_if_failed(result: Any) -> None:
    """After the output is written: exit 1 with the reasons when it would be wrong or empty
    (an ``AnnotateResult`` whose ``failed`` is set).  Notices about this machine (a
    damaged disassembly cache) are said first."""
    for n in getattr(result, "notices", ()):
        click.echo(f"bbmap: warning: {n}", err=True)
    if not result.failed:
        from bbmap.aggregate.fit import DOES_NOT_FIT

        for d in result.warnings:  # kept by --force: still said, whatever -o
            if d.message.startswith(DOES_NOT_FIT):
                click.echo(f"bbmap: warning: {d}", err=True)
        return
    from bbmap.aggregate.profile import DAMAGED

    errors = [d for d in result.warnings if d.severity == "error"]
    # a damaged profile first: "no samples" or "pass --name" follow from it
    errors.sort(key=lambda d: not d.message.startswith(DAMAGED))
    for d in errors:
        click.echo(f"bbmap: error: {d}", err=True)
    if not errors:
        click.echo("bbmap: error: nothing could be put in a block", err=True)
    sys.exit(EXIT_PROBLEMS)


def _is_perf_data(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == b"PERFILE2"
    except OSError:
        return False
