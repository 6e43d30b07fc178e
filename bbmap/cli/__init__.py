"""The ``bbmap`` command: a thin shell over the library API.

Each subcommand lives in its own module (``bbmap/cli/<name>.py``) and only parses
arguments, calls the library, and prints.  :func:`guarded` turns every
:class:`~bbmap.errors.BBMapError` (and any unexpected exception on bad input) into
one line on stderr and a non-zero exit code: never a traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from bbmap.errors import BBMapError

EXIT_OK = 0
EXIT_PROBLEMS = 1  # ran, but the output is incomplete or wrong (errors in the input)
EXIT_USAGE = 2
EXIT_FAILED = 3  # could not produce any output


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click command body: errors become one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BBMapError as e:
            click.echo(f"bbmap: error: {e}", err=True)
            sys.exit(EXIT_FAILED)
        except (OSError, MemoryError) as e:
            click.echo(f"bbmap: error: {e}", err=True)
            sys.exit(EXIT_FAILED)
        except KeyboardInterrupt:
            click.echo("bbmap: interrupted", err=True)
            sys.exit(130)
        except click.exceptions.Exit:
            raise
        except Exception as e:  # noqa: BLE001 - last line of defence, still one line
            if os.environ.get("BBMAP_DEBUG"):
                raise
            click.echo(f"bbmap: internal error: {type(e).__name__}: {e} "
                       "(set BBMAP_DEBUG=1 for a traceback)", err=True)
            sys.exit(EXIT_FAILED)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bbmap")
def main() -> None:
    """Map sampled program counters to compiler basic blocks."""


def _register() -> None:
    import importlib

    for name in ("dump", "perf_info", "lookup", "annotate", "verify", "cfg"):
        try:
            importlib.import_module(f"bbmap.cli.{name}")
        except ModuleNotFoundError as e:  # a subcommand still being written
            if e.name != f"bbmap.cli.{name}":
                raise


_register()
