"""``bbmap annotate PERF_DATA... BINARY``: per-block counts, edges and accounting."""

from __future__ import annotations

import sys

import click

from bbmap.cli import EXIT_PROBLEMS, guarded, main, refuse_output_over_input
from bbmap.errors import UsageError

FORMATS = ("text", "json", "csv", "propeller", "symorder")
DUPLICATE_LBR = {"auto": None, "drop": True, "keep": False}  # --duplicate-lbr -> API value


@main.command("annotate")
@click.argument("inputs", nargs=-1, required=True, metavar="PERF_DATA... BINARY")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text report, JSON/CSV per-block data, Propeller cluster file, or lld "
                   "symbol-ordering file")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="write here (atomically) instead of stdout")
@click.option("--name", "name", default=None,
              help="the binary's file name as the profile mapped it (if renamed or moved)")
@click.option("--pid", type=int, default=None, help="only samples of this process")
@click.option("--top", type=click.IntRange(min=0), default=None,
              help="hottest functions to list (text default 20; json/csv default all; 0 = all)")
@click.option("--cluster-version", type=click.Choice(["0", "1"]), default="1",
              show_default=True, help="Propeller cluster file format")
@click.option("--no-demangle", is_flag=True, help="show raw (mangled) names")
@click.option("--debug-dir", "debug_dirs", multiple=True, type=click.Path(file_okay=False),
              help="where to look for separate debug files (repeatable)")
@click.option("--duplicate-lbr", "duplicate_lbr", type=click.Choice(["auto", "drop", "keep"]),
              default="auto", show_default=True,
              help="the hardware's duplicated newest LBR entry: detect it per batch, or "
                   "always drop / always keep entry 0 when it equals entry 1")
@guarded
def annotate_cmd(inputs: tuple[str, ...], fmt: str, output: str | None, name: str | None,
                 pid: int | None, top: int | None, cluster_version: str, no_demangle: bool,
                 debug_dirs: tuple[str, ...], duplicate_lbr: str) -> None:
    """Map the samples of PERF_DATA (files or @listfiles, merged) to BINARY's basic blocks.

    Every sample and branch record lands in exactly one accounting bucket; when little or
    nothing maps, the report says why.  Exit 1 when nothing could be put in a block.
    """
    from bbmap.aggregate import annotate
    from bbmap.atomic import write_atomic

    if len(inputs) < 2:
        raise UsageError("need at least one perf.data file and the binary "
                         "(bbmap annotate perf.data ./binary)")
    *perf_paths, binary = inputs
    refuse_output_over_input(output, inputs)
    if _is_perf_data(binary):
        raise UsageError(f"{binary} is perf data, but the last argument must be the binary "
                         "(bbmap annotate perf.data ./binary)")
    progress = _progress_bar() if sys.stderr.isatty() else None
    try:
        result = annotate(perf_paths, binary, name_override=name, pid=pid,
                          demangle=not no_demangle, debug_dirs=debug_dirs,
                          drop_duplicate_newest=DUPLICATE_LBR[duplicate_lbr],
                          progress=progress.update if progress else None)
    finally:
        if progress:
            progress.close()
    text = _render(result, fmt, top, int(cluster_version), output is None)
    if output:
        write_atomic(output, text)
    else:
        click.echo(text, nl=False)
    if result.failed:
        errors = [d for d in result.warnings if d.severity == "error"]
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


def _render(result, fmt: str, top: int | None, cluster_version: int, tty: bool  # noqa: ANN001
            ) -> str:
    if fmt == "json":
        from bbmap.outputs.jsonout import render_json
        return render_json(result, top=top or None)
    if fmt == "csv":
        from bbmap.outputs.csvout import render_csv
        return render_csv(result, top=top or None)
    if fmt == "propeller":
        from bbmap.outputs.propeller import render_propeller
        return render_propeller(result, version=cluster_version)
    if fmt == "symorder":
        from bbmap.outputs.propeller import render_symorder
        return render_symorder(result)
    import shutil

    from bbmap.outputs.text import render_text
    term = tty and sys.stdout.isatty()  # a person at a terminal: rich tables, colour
    width = shutil.get_terminal_size((120, 40)).columns if term else 120
    return render_text(result, top=20 if top is None else (top or 10**9), width=max(width, 80),
                       color=term, rich=term)


class _progress_bar:  # noqa: N801 - used like a function
    """A rich progress display on stderr: samples read so far, per file."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._p = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                           TextColumn("{task.completed:,} samples"), TimeElapsedColumn(),
                           console=Console(stderr=True), transient=True)
        self._task = None

    def update(self, path: str, done: int) -> None:
        if self._task is None:
            self._p.start()
            self._task = self._p.add_task(path, total=None)
        self._p.update(self._task, completed=done, description=path)

    def close(self) -> None:
        if self._task is not None:
            self._p.stop()
