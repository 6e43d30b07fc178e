"""``bbmap annotate PERF_DATA... BINARY``: per-block counts, edges and accounting."""

from __future__ import annotations

import sys
from typing import Any

import click

from bbmap.cli import guarded, main
from bbmap.cli.options import output_option, write_output
from bbmap.cli.profile_args import (
    exit_if_failed,
    ignored_deriving,
    profile_options,
    refuse_ignored,
    run_options,
    split_inputs,
)
from bbmap.cli.stale_args import annotate_any, refuse_format, stale_options
from bbmap.options import ANNOTATE_FORMAT_OPTIONS, BOLT_FORMATS, Status
from bbmap.options import ANNOTATE_FORMATS as FORMATS


@main.command("annotate", short_help="Count a profile's samples and branches per basic block.")
@click.argument("inputs", nargs=-1, required=True, metavar="PERF_DATA... BINARY")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="text report, JSON/CSV per-block data, Propeller cluster file, lld "
                   "symbol-ordering file, a mergeable Parquet aggregate (needs -o; "
                   "pip install 'bbmap[fleet]'), BOLT's fdata (as perf2bolt writes it), "
                   "BOLT's pre-aggregated text (perf2bolt/llvm-bolt --pa) or clang 22's "
                   "match-infer profile (counts and block hashes; spec/stale.md) or BOLT's "
                   "YAML profile with its block hashes (bolt-yaml); default: "
                   "from -o's "
                   "extension (.json, .csv, .parquet, .fdata), else text")
@output_option()
@click.option("--top", type=click.IntRange(min=0), default=None, metavar="N",
              help="hottest functions to list (text default 20; json/csv default all; 0 = all)")
@click.option("--cluster-version", type=click.Choice(["0", "1"]), default="1",
              show_default=True, help="Propeller cluster file format")
@click.option("--keep-going", is_flag=True,
              help="an unreadable profile does not stop the run: it is named with its error "
                   "and the exit code is 1")
@profile_options
@stale_options
@guarded
def annotate_cmd(inputs: tuple[str, ...], fmt: str | None, output: str | None,
                 top: int | None, cluster_version: str, keep_going: bool,
                 profiled_binary: str | None = None, carry_report: str | None = None,
                 **profile: Any) -> None:
    """Map the samples of PERF_DATA (files or @listfiles, merged) to BINARY's basic blocks.

    Every sample and branch record lands in exactly one accounting bucket; when little or
    nothing maps, the report says why.  Exit 1 when nothing could be put in a block.

    \b
    Example:
      perf record -e cpu-clock -o perf.data -- ./app
      bbmap annotate perf.data ./app -o blocks.json   # JSON, from the extension
    """
    from bbmap.cli.options import format_from_output
    from bbmap.run import render

    fmt = format_from_output(fmt, output, FORMATS, "text")

    perf_paths, binary = split_inputs(inputs, "bbmap annotate perf.data ./binary")
    refuse_format(fmt, profiled_binary)
    refuse_ignored(f"--format {fmt}", [p for p, fmts in ANNOTATE_FORMAT_OPTIONS.items()
                                       if fmt not in fmts] + ignored_deriving(fmt))
    progress = _progress_bar() if sys.stderr.isatty() else None
    if fmt == "aggregate":
        try:
            _write_aggregate(perf_paths, binary, output, keep_going, progress, profile)
        finally:
            if progress:
                progress.close()
        return
    opts = run_options(**profile).replace(keep_going=keep_going)
    from bbmap.memory import keep_freed_memory

    keep_freed_memory()  # batches' and slices' temporaries reuse the heap (bbmap/memory.py)
    if fmt in BOLT_FORMATS:  # instruction addresses, not inferred block counts
        opts = opts.replace(address_only=True, inference="off")
    try:
        result = annotate_any(perf_paths, binary, profiled_binary, carry_report, opts,
                              progress=progress.update if progress else None)
    finally:
        if progress:
            progress.close()
    text = render(result, fmt, top=top, cluster_version=int(cluster_version),
                  tty=output is None and sys.stdout.isatty())
    if result.status != Status.REFUSED:  # does not fit the binary: nothing written (the evidence
        write_output(text, output)  # below)
    if fmt in BOLT_FORMATS or fmt in ("json", "csv", "text"):  # output complete; no
        # thread, temporary file or cache left (the disassembly cache, when inference ran,
        # was written and renamed before rendering)
        from bbmap.cli import allow_quick_exit

        allow_quick_exit()  # (no teardown of the interpreter and its arrays: ~30 ms)
    exit_if_failed(result)


def _write_aggregate(perf_paths: list[str], binary: str, output: str | None,
                     keep_going: bool, progress: Any, profile: dict[str, Any]) -> None:
    """``--format aggregate``: the raw counts and provenance as Parquet (spec/aggregate.md);
    derived data (inference, diagnosis) is made when the aggregate is read."""
    from bbmap.cli.profile_args import write_aggregate_and_exit
    from bbmap.errors import UsageError
    from bbmap.run import Session, expand_inputs

    if not output:
        raise UsageError("--format aggregate writes a Parquet file: give it with -o FILE")
    counting = run_options(**profile).counting()
    session = Session(binary, **counting, keep_going=keep_going,
                      cluster_stats=True, hash_profiles=True, addresses=True)
    session.add_all(expand_inputs(perf_paths), progress=progress.update if progress else None)
    agg = session.aggregate()
    write_aggregate_and_exit(agg, output, binary, counting)


class _progress_bar:  # noqa: N801 - used like a function
    """A rich progress display on stderr: samples read so far, per file; in file mode the
    share of the file read and the time left (a pipe's length is unknown)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._p = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                           BarColumn(), TaskProgressColumn(),
                           TextColumn("{task.fields[samples]:,} samples"), TimeElapsedColumn(),
                           TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self._task = None
        self._path: str | None = None

    def update(self, path: str, done: int, fraction: float | None = None) -> None:
        if self._task is None:
            self._p.start()
            self._task = self._p.add_task(path, total=None, samples=0)
        if path != self._path:  # a new file: its own bar and time left
            self._path = path
            self._p.reset(self._task, total=None if fraction is None else 1000,
                          description=path, samples=done)
        self._p.update(self._task, description=path, samples=done,
                       completed=0 if fraction is None else round(1000 * fraction))

    update.takes_fraction = True  # type: ignore[attr-defined]  # (bbmap.run)

    def close(self) -> None:
        if self._task is not None:
            self._p.stop()
