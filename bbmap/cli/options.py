"""Options more than one command takes, declared once (flag, type and help text)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click

from bbmap.atomic import write_atomic

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


class OutputFile(click.ParamType):
    """The type of every option naming a file a command writes (``-o``, ``--cc-profile``,
    ``fleet --json``): :func:`check_outputs` finds them by it and checks them all, in one
    place, before the command loads anything.  ``required``: the command cannot run
    without it (checked there too, with a one-line error, whatever click's version)."""

    name = "file"

    def __init__(self, required: bool = False) -> None:
        self.required = required


class InputFile(click.ParamType):
    """The type of an option naming a file a command reads (``--perf-data``,
    ``--profile``): an output naming it is refused like one naming an argument."""

    name = "file"


def output_option(*, required: bool = False) -> Decorator:
    """``-o/--output FILE``: written atomically (``bbmap.atomic``), never over an input."""
    return click.option("-o", "--output", type=OutputFile(required), default=None,
                        metavar="FILE",
                        help="Write here (atomically; required)" if required
                        else "Write here (atomically) instead of stdout.")


def check_outputs(ctx: click.Context, values: dict[str, Any]) -> list[str]:
    """Every output of the command about to run, checked before it does any work: a
    required one given, each writable (its directory exists and takes new files; not a
    directory), none naming an input or another output.  Returns their paths (what
    ``bbmap.atomic.OutputRun`` holds until the exit code is known); raises
    :class:`~bbmap.errors.UsageError` (exit 2, one line) otherwise."""
    from bbmap.errors import UsageError

    outputs: list[tuple[str, str]] = []  # (option as written, path)
    inputs: list[str] = []
    for p in ctx.command.params:
        value = values.get(p.name or "")
        if isinstance(p.type, OutputFile):
            flag = p.opts[0]  # as a user types it: -o
            if value in (None, ""):
                if p.type.required:
                    raise UsageError(f"bbmap {ctx.info_name} writes its output to a file: "
                                     f"give it with {flag} FILE")
                continue
            outputs.append((flag, value))
        elif isinstance(p, click.Argument) or isinstance(p.type, InputFile):
            inputs += [v for v in (value if isinstance(value, (list, tuple)) else [value])
                       if isinstance(v, str)]
    seen: dict[str, str] = {}
    for flag, path in outputs:
        problem = _unwritable(path)
        if problem:
            raise UsageError(f"cannot write output ({flag}): {problem}", file=path)
        real = os.path.realpath(path)
        if real in seen:
            raise UsageError(f"{seen[real]} and {flag} name the same file {path}")
        seen[real] = flag
        refuse_output_over_input(path, inputs, flag)
    return [path for _, path in outputs]


def _unwritable(path: str) -> str | None:
    """Why ``path`` cannot be written as an output, or None."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        return e.strerror or str(e)
    if st is not None and stat.S_ISDIR(st.st_mode):
        return "it is a directory"
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device, FIFO, /dev/stdout
        return None if os.access(path, os.W_OK) else "permission denied"
    parent = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(parent):
        return f"directory {os.path.dirname(path) or parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {os.path.dirname(path) or parent} is not writable"
    return None


def refuse_output_over_input(output: str | None, inputs: list[str] | tuple[str, ...],
                             flag: str = "-o") -> None:
    """A usage error when an output names one of the inputs (it would be destroyed);
    ``@listfile`` inputs are looked into."""
    from bbmap.errors import BBMapError, UsageError

    if not output or not os.path.exists(output):
        return
    for p in inputs:
        if p.startswith("@"):
            from bbmap.run import expand_inputs
            try:
                listed = expand_inputs([p])
            except BBMapError:
                listed = []
            candidates = [p[1:], *listed]
        else:
            candidates = [p]
        for c in candidates:
            try:
                same = os.path.samefile(output, c)
            except OSError:
                continue
            if same:
                raise UsageError(f"{flag} {output} is an input ({c}); refusing to "
                                 "overwrite it")


def debug_dir_option() -> Decorator:
    """``--debug-dir DIR``: where ``Binary.debug_file`` looks for a separate debug file;
    with it (every command that reads a binary) ``--max-section-size``."""
    debug = click.option("--debug-dir", "debug_dirs", multiple=True, metavar="DIR",
                         type=click.Path(file_okay=False),
                         help="directory searched for a separate debug file by build-id "
                              "(repeatable; /usr/lib/debug is always searched)")
    limit = max_section_size_option()

    def both(fn: Callable[..., Any]) -> Callable[..., Any]:
        return debug(limit(fn))
    return both


def _set_max_section_size(ctx: click.Context, param: click.Parameter, value: str | None
                          ) -> None:
    if value is None:
        return
    from bbmap.binary.elf import parse_size

    try:
        parse_size(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a size (bytes, or with K, M, G: 2G)",
                                 ctx=ctx, param=param) from None
    os.environ["BBMAP_MAX_SECTION_SIZE"] = value  # seen by bbmap.binary (and by workers)


def max_section_size_option() -> Decorator:
    """``--max-section-size SIZE``: the largest compressed section bbmap inflates
    (``bbmap.binary.elf.inflate_limit``; by default 32x its compressed bytes, at least
    16 MiB, at most 1 GiB)."""
    return click.option("--max-section-size", metavar="SIZE", expose_value=False,
                        callback=_set_max_section_size,
                        help="inflate compressed sections up to SIZE (e.g. 4G); by default "
                             "at most 32x their compressed size (at least 16M, at most 1G)")


# -o's extension picks the format when none is given (as cfg picks SVG or DOT)
EXTENSION_FORMATS = {".json": "json", ".csv": "csv", ".parquet": "aggregate", ".fdata": "fdata",
                     ".svg": "svg",
                     ".dot": "dot", ".gv": "dot", ".txt": "text"}


def format_from_output(fmt: str | None, output: str | None, choices: tuple[str, ...],
                       default: str) -> str:
    """``--format`` if given, else the one ``-o``'s extension names (among ``choices``),
    else ``default``."""
    if fmt is not None:
        return fmt
    if output:
        ext = os.path.splitext(output)[1].lower()
        picked = EXTENSION_FORMATS.get(ext)
        if picked in choices:
            return picked
    return default


def json_from_output(as_json: bool, output: str | None) -> bool:
    """``--json`` if given, else whether ``-o`` ends in ``.json``."""
    return as_json or bool(output and output.lower().endswith(".json"))


def write_output(text: str | bytes, output: str | None) -> None:
    """``text`` to ``-o`` (atomically; held until the exit code says where it goes:
    ``bbmap.atomic.OutputRun``), else to stdout: what every text-writing command does
    (bytes as they are: annotate's JSON and CSV come encoded)."""
    if output:
        write_atomic(output, text)
    else:
        click.echo(text, nl=False)
