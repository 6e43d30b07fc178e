"""The ``bbmap`` command: a thin shell over the library API.

Each subcommand lives in its own module (``bbmap/cli/<name>.py``) and only parses
arguments, calls the library, and prints.  :func:`guarded` turns every
:class:`~bbmap.errors.BBMapError` (and any unexpected exception on bad input) into
one line on stderr and a non-zero exit code: never a traceback.
"""

from __future__ import annotations

import os

# bbmap does no linear algebra: numpy's BLAS (OpenBLAS, MKL) and OpenMP would start a
# thread pool per core at import for nothing (spec/startup.md).  Set before anything
# can load numpy; a value the user exported wins.
THREAD_POOL_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
for _var in THREAD_POOL_ENV:
    os.environ.setdefault(_var, "1")

import contextlib  # noqa: E402
import functools  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import click  # noqa: E402

from bbmap import __version__  # noqa: E402
from bbmap.atomic import Terminated  # noqa: E402
from bbmap.errors import BBMapError, UsageError, is_decoding_error, library_words  # noqa: E402

EXIT_OK = 0
EXIT_PROBLEMS = 1  # ran, but the output is incomplete or wrong (errors in the input)
EXIT_USAGE = 2
EXIT_FAILED = 3  # could not produce any output
EXIT_SIGPIPE = 128 + 13  # stdout's reader went away (| head), as a shell reports SIGPIPE

# A command whose process holds nothing that needs Python's shutdown (no thread left, no
# temporary file, no atexit work of a library) calls allow_quick_exit() once its output
# is complete: the console script (bbmap/__main__.py) then ends the process at once
# instead of tearing the interpreter down (freeing every object and module: ~25 ms of
# a 20,000-function `dump --json`'s ~0.2 s of CPU).  Library callers and CliRunner never
# go through the console script, so they never exit early.
_quick_exit = False


def allow_quick_exit() -> None:
    global _quick_exit
    _quick_exit = True


def quick_exit_allowed() -> bool:
    return _quick_exit


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click command body: errors become one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            click.echo(f"bbmap: error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except BBMapError as e:
            click.echo(f"bbmap: error: {e}", err=True)
            sys.exit(EXIT_FAILED)
        except BrokenPipeError:  # the reader left (| head): quiet, as a SIGPIPE'd tool
            with contextlib.suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())  # no second error at exit's flush
            sys.exit(EXIT_SIGPIPE)
        except (OSError, MemoryError) as e:
            click.echo(f"bbmap: error: {e}", err=True)
            sys.exit(EXIT_FAILED)
        except KeyboardInterrupt:
            click.echo("bbmap: interrupted", err=True)
            sys.exit(130)
        except Terminated:  # SIGTERM while writing: the temporary output is gone
            click.echo("bbmap: terminated", err=True)
            sys.exit(128 + 15)
        except (click.exceptions.Exit, click.exceptions.ClickException):
            raise
        except Exception as e:  # noqa: BLE001 - last line of defence, still one line
            if os.environ.get("BBMAP_DEBUG"):
                raise
            if is_decoding_error(e):  # a decoder without its own guard: still bbmap's words
                names = ", ".join(_input_files(kwargs)) or "input"
                click.echo(f"bbmap: error: {names}: cannot decode: {library_words(e)}",
                           err=True)
                sys.exit(EXIT_FAILED)
            click.echo(f"bbmap: internal error: {type(e).__name__}: {e} "
                       "(set BBMAP_DEBUG=1 for a traceback)", err=True)
            sys.exit(EXIT_FAILED)

    return wrapper


def _input_files(kwargs: dict[str, Any]) -> list[str]:
    """The existing files among a command's arguments (what an error can name)."""
    out: list[str] = []
    for k, v in kwargs.items():
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, str) and k != "output" and os.path.isfile(x) and x not in out:
                out.append(x)
    return out


def refuse_output_over_input(output: str | None, inputs: list[str] | tuple[str, ...]) -> None:
    """A usage error when ``-o`` names one of the inputs (it would be destroyed)."""
    if not output or not os.path.exists(output):
        return
    for p in inputs:
        if p.startswith("@"):
            from bbmap.aggregate.api import expand_inputs
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
                raise click.UsageError(f"-o {output} is an input ({c}); refusing to "
                                       "overwrite it")


# subcommand name -> module that registers it on ``main`` when imported
SUBCOMMANDS = {
    "annotate": "bbmap.cli.annotate",
    "cfg": "bbmap.cli.cfg",
    "dump": "bbmap.cli.dump",
    "fleet": "bbmap.cli.fleet",
    "layout": "bbmap.cli.layout",
    "lookup": "bbmap.cli.lookup",
    "merge": "bbmap.cli.merge",
    "perf-info": "bbmap.cli.perf_info",
    "report": "bbmap.cli.report",
    "verify": "bbmap.cli.verify",
}


class LazyGroup(click.Group):
    """Import a subcommand's module only when that subcommand runs (or help lists it),
    so ``bbmap annotate`` does not pay for the disassembler ``verify`` loads."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(SUBCOMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in SUBCOMMANDS:
            import importlib

            importlib.import_module(SUBCOMMANDS[name])
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bbmap")  # not package_name: that reads the
# installed metadata through importlib.metadata (~15 ms of imports); tests hold the two equal
def main() -> None:
    """Map sampled program counters to compiler basic blocks."""
    # file names are bytes on Linux; ones that are not UTF-8 reach us as surrogates
    # (os.fsdecode) and are printed back as the same bytes, whatever the locale
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="surrogateescape")
