"""``bbmap fleet PROFILES... BINARY -o FILE``: many profiles on Dask (spec/fleet.md)."""

from __future__ import annotations

import sys
from typing import Any

import click

from bbmap.atomic import Terminated
from bbmap.cli import allow_quick_exit, guarded, main
from bbmap.cli.options import OutputFile, output_option
from bbmap.cli.profile_args import ignored_deriving, profile_options, refuse_ignored


@main.command("fleet", short_help="Aggregate many profiles on Dask into one aggregate.")
@click.argument("inputs", nargs=-1, required=True, metavar="PROFILES... BINARY")
@output_option(required=True)
@click.option("--json", "json_out", type=OutputFile(), default=None, metavar="FILE",
              help="also write the annotate JSON of the merged aggregate here")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="a running Dask scheduler (tcp://host:8786); workers must see the "
                   "profiles and the binary at the same paths")
@click.option("--local-workers", type=click.IntRange(min=1), default=None, metavar="N",
              help="start a local cluster of N worker processes (default: the CPUs)")
@click.option("--memory-limit", default="2GiB", show_default=True, metavar="SIZE",
              help="per local worker; over it the worker restarts and its tasks rerun")
@click.option("--batch-files", type=click.IntRange(min=1), default=32, show_default=True,
              metavar="N",
              help="profiles per task at most")
@click.option("--batch-mib", type=click.IntRange(min=1), default=64, show_default=True,
              metavar="MIB",
              help="MiB of profiles per task at most (unless one is bigger)")
@click.option("--fan-in", type=click.IntRange(min=2), default=16, show_default=True,
              metavar="N",
              help="aggregates merged per reduction task")
@click.option("--progress/--no-progress", default=None,
              help="progress bar on stderr (default: when stderr is a terminal)")
@click.option("--dask-logs", is_flag=True, envvar="BBMAP_DASK_LOGS",
              help="let Dask's scheduler, nannies and workers log to stderr (debugging; "
                   "else silenced and lost workers said by bbmap; also BBMAP_DASK_LOGS=1)")
@profile_options
@guarded
def fleet_cmd(inputs: tuple[str, ...], output: str, json_out: str | None,
              scheduler: str | None, local_workers: int | None, memory_limit: str,
              batch_files: int, batch_mib: int, fan_in: int, progress: bool | None,
              dask_logs: bool, **profile: Any) -> None:
    """Aggregate PROFILES (paths, globs or @listfiles) against BINARY on Dask distributed:
    one task per small batch, a tree reduction of the aggregates, the merged aggregate
    written to -o.  An unreadable or corrupt profile does not stop the run: it is named
    with its error in the aggregate's provenance (and on stderr) and the exit code is 1.
    The result equals `bbmap annotate --keep-going` of the same profiles, byte for byte.
    Dask's own logs are kept off stderr (a worker that dies is said in one line by bbmap);
    --dask-logs shows them.

    \b
    Example:
      bbmap fleet 'profiles/*.data' ./app --local-workers 4 -o fleet.parquet
    """
    from bbmap.cli.profile_args import run_options, write_aggregate_and_exit
    from bbmap.errors import UsageError
    from bbmap.fleet.run import expand_profiles, run_fleet

    if len(inputs) < 2:
        raise UsageError("need profiles and the binary (bbmap fleet 'prof/*.data' ./binary "
                         "-o fleet.agg)")
    if scheduler and local_workers:
        raise UsageError("--scheduler and --local-workers exclude each other")
    *profs, binary = inputs
    # the aggregate is raw counts; only --json derives a result from it (no fit refusal,
    # no disassembly cache)
    refuse_ignored("fleet" + (" --json" if json_out else " without --json"),
                   ["no_cache", "force"] if json_out else ignored_deriving("aggregate"))
    paths = expand_profiles(profs)
    ro = run_options(**profile)
    opts = ro.counting()
    show = sys.stderr.isatty() if progress is None else progress
    bar = _Bar() if show else None
    try:
        run = run_fleet(paths, binary, options=opts, scheduler=scheduler,
                        local_workers=local_workers, memory_limit=memory_limit,
                        batch_bytes=batch_mib << 20, batch_files=batch_files, fan_in=fan_in,
                        progress=bar.update if bar else None, dask_logs=dask_logs)
    except (KeyboardInterrupt, Terminated):
        # the cluster is already stopped (bbmap.fleet.run.stop_local_cluster_now): end
        # without the interpreter's teardown, whose atexit hooks would wait on Dask
        allow_quick_exit()
        raise
    finally:
        if bar:
            bar.close()
    click.echo(f"bbmap: {run.profiles} profiles in {run.tasks} tasks and {run.merges} merges "
               f"on {run.workers} workers: {run.seconds:.1f} s "
               f"({run.profiles / max(run.seconds, 1e-9):.0f} profiles/s)", err=True)
    for line in losses(run):
        click.echo(f"bbmap: {line}", err=True)

    def write_json() -> None:
        from bbmap.atomic import write_atomic
        from bbmap.outputs.jsonout import render_json
        from bbmap.run import Session

        s = Session(binary, **opts)
        s.add_aggregate(run.aggregate, output)
        write_atomic(json_out, render_json(s.result(
            inference=ro.inference, solver=ro.solver, sample_model=ro.sample_model)))

    write_aggregate_and_exit(run.aggregate, output, binary, opts,
                            (write_json,) if json_out else ())


def losses(run: Any) -> list[str]:
    """What the run lost on the way, in bbmap's words (Dask's own logs are silenced)."""
    out = []
    if run.lost_workers:
        n = run.lost_workers
        out.append(f"{n} worker{'s' * (n != 1)} died or {'were' if n != 1 else 'was'} lost "
                   f"during the run (killed, out of memory, or unreachable); the scheduler "
                   f"ran {run.rerun_tasks} of the run's tasks again, so nothing is missing")
    if run.lost_tasks:
        n = len(run.lost_tasks)
        out.append(f"{n} batch{'es' * (n != 1)} failed on every try; "
                   f"{'their' if n != 1 else 'its'} profiles were run one per task")
    return out


class _Bar:
    """A rich progress bar on stderr: profiles done of all, rate, time left."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._p = Progress("profiles", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           TimeRemainingColumn(), console=Console(stderr=True),
                           transient=True)
        self._task = None

    def update(self, done: int, total: int) -> None:
        if self._task is None:
            self._p.start()
            self._task = self._p.add_task("profiles", total=total)
        self._p.update(self._task, completed=done)

    def close(self) -> None:
        if self._task is not None:
            self._p.stop()
