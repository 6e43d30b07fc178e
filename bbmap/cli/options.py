"""Options more than one command takes, declared once (flag, type and help text)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from bbmap.atomic import write_atomic

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def output_option(*, required: bool = False) -> Decorator:
    """``-o/--output FILE``: written atomically (``bbmap.atomic``), never over an input."""
    return click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                        required=required,
                        help="write here (atomically)" if required
                        else "write here (atomically) instead of stdout")


def debug_dir_option() -> Decorator:
    """``--debug-dir DIR``: where ``Binary.debug_file`` looks for a separate debug file."""
    return click.option("--debug-dir", "debug_dirs", multiple=True,
                        type=click.Path(file_okay=False),
                        help="directory searched for a separate debug file by build-id "
                             "(repeatable; /usr/lib/debug is always searched)")


def write_output(text: str, output: str | None) -> None:
    """``text`` to ``-o`` (atomically), else to stdout: what every text-writing command does."""
    if output:
        write_atomic(output, text)
    else:
        click.echo(text, nl=False)
