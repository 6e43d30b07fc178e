"""Options more than one command takes, declared once (flag, type and help text)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click

from bbmap.atomic import write_atomic

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def output_option(*, required: bool = False) -> Decorator:
    """``-o/--output FILE``: written atomically (``bbmap.atomic``), never over an input."""
    if required:  # no default: click 8.5 lets `default=None, required=True` pass as None
        return click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
                            help="write here (atomically)")
    return click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                        help="write here (atomically) instead of stdout")


def debug_dir_option() -> Decorator:
    """``--debug-dir DIR``: where ``Binary.debug_file`` looks for a separate debug file;
    with it (every command that reads a binary) ``--max-section-size``."""
    debug = click.option("--debug-dir", "debug_dirs", multiple=True,
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


def write_output(text: str | bytes, output: str | None, *, keep_existing: bool = False
                 ) -> None:
    """``text`` to ``-o`` (atomically), else to stdout: what every text-writing command does
    (bytes as they are: annotate's JSON and CSV come encoded).

    ``keep_existing`` (a result that mapped nothing): an existing ``-o`` file is left as it
    was -- a pipeline keeps its last good profile -- and stderr says so."""
    if output:
        if keep_existing and not keep_previous(output):
            return
        write_atomic(output, text)
    else:
        click.echo(text, nl=False)


def keep_previous(output: str) -> bool:
    """For a result that mapped nothing: True when ``output`` may be written (it does not
    exist yet, or is not a regular file); else say that it is kept and return False."""
    if not os.path.isfile(output):
        return True
    click.echo(f"bbmap: error: nothing mapped: {output} not replaced (it keeps its previous "
               "contents)", err=True)
    return False
