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
import stat  # noqa: E402
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
EXIT_SIGINT = 128 + 2  # Ctrl-C, whenever it comes
EXIT_SIGTERM = 128 + 15
INTERRUPTED = "bbmap: interrupted"
TERMINATED = "bbmap: terminated"

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
    """Decorate a click command body: the one place every command's policy lives.

    Before the body: its outputs are checked (``check_outputs``: exit 2, one line, before
    anything is loaded).  While it runs: SIGTERM raises like SIGINT does, and the outputs
    it writes are held (``bbmap.atomic.OutputRun``).  After: errors become one line and an
    exit code (never a traceback), stdout is flushed (a reader that left is exit 141), and
    the held outputs go where the exit code says (a failing run never replaces a file)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from bbmap.atomic import OutputRun, signal_received, signals_never_unraisable, signals_raise
        from bbmap.cli.options import check_outputs

        signal_received(reset=True)
        with signals_raise(), signals_never_unraisable():
            try:
                run = OutputRun(check_outputs(click.get_current_context(), kwargs))
            except UsageError as e:
                click.echo(f"bbmap: error: {e}", err=True)
                sys.exit(EXIT_USAGE)
            with run:
                code, said, click_exc = _outcome(fn, args, kwargs)
                sig = signal_received()
                # a signal lost on the way (raised where it could not propagate) ends a run
                # that would have succeeded; a failure already said stays the outcome
                if sig and code == EXIT_OK:
                    code, said = ((EXIT_SIGINT, INTERRUPTED) if sig == 2
                                  else (EXIT_SIGTERM, TERMINATED))
                if code == EXIT_OK and not run.held and _stdout_reader_gone():
                    code = EXIT_SIGPIPE  # (see _stdout_reader_gone)
                if said:
                    click.echo(said, err=True)
                try:  # what happened to each output: a note, not an input's error
                    settled, kind = run.settle(code), "note"
                except BBMapError as e:
                    settled, kind = [str(e)], "error"
                    code = code or EXIT_FAILED
                for line in settled:
                    click.echo(f"bbmap: {kind}: {line}", err=True)
            if click_exc is not None:
                raise click_exc
            sys.exit(code)

    return wrapper


def _outcome(fn: Callable[..., Any], args: Any, kwargs: dict[str, Any]
             ) -> tuple[int, str | None, BaseException | None]:
    """Run the command body: (exit code, the line stderr must say, a click exception to
    re-raise after the outputs are settled)."""
    try:
        try:
            fn(*args, **kwargs)
            code = EXIT_OK
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else EXIT_OK if e.code is None \
                else EXIT_PROBLEMS
        sys.stdout.flush()  # a reader that left (| head) is said here, not at exit
        return code, None, None
    except UsageError as e:
        return EXIT_USAGE, f"bbmap: error: {e}", None
    except BBMapError as e:
        return EXIT_FAILED, f"bbmap: error: {e}", None
    except BrokenPipeError:  # the reader left (| head): quiet, as a SIGPIPE'd tool
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error at exit's flush
        return EXIT_SIGPIPE, None, None
    except (OSError, MemoryError) as e:
        return EXIT_FAILED, f"bbmap: error: {e}", None
    except KeyboardInterrupt:
        return EXIT_SIGINT, INTERRUPTED, None
    except Terminated:  # SIGTERM: the temporary outputs are removed on the way out
        return EXIT_SIGTERM, TERMINATED, None
    except (click.exceptions.Exit, click.exceptions.ClickException) as e:
        return getattr(e, "exit_code", EXIT_USAGE), None, e
    except Exception as e:  # noqa: BLE001 - last line of defence, still one line
        if os.environ.get("BBMAP_DEBUG"):
            raise
        cause = _signal_cause(e)
        if cause is not None:  # a signal Python wrapped (a class body's __set_name__)
            return (EXIT_SIGINT, INTERRUPTED, None) if isinstance(cause, KeyboardInterrupt) \
                else (EXIT_SIGTERM, TERMINATED, None)
        if is_decoding_error(e):  # a decoder without its own guard: still bbmap's words
            names = ", ".join(_input_files(kwargs)) or "input"
            return EXIT_FAILED, f"bbmap: error: {names}: cannot decode: {library_words(e)}", \
                None
        return EXIT_FAILED, (f"bbmap: internal error: {type(e).__name__}: {e} "
                             "(set BBMAP_DEBUG=1 for a traceback)"), None


def _signal_cause(e: BaseException) -> BaseException | None:
    """The KeyboardInterrupt or ``Terminated`` behind ``e``, where Python wrapped a signal
    raised inside machinery that re-raises as another type (``__set_name__`` while a
    dataclass module imports raises RuntimeError from it)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, (KeyboardInterrupt, Terminated)):
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (``| head`` that quit early).

    A write the reader's exit interrupts returns a short count, with no error, and
    Python's buffered writer drops the rest (measured: 4,096 of 13,647 bytes, exit 0):
    only a further write would have failed.  So, once the output is complete, the pipe is
    asked (POLLERR: no reader left) -- the exit is then 141, as for a tool SIGPIPE ended."""
    try:
        fd = sys.stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
    except (OSError, ValueError, AttributeError):
        return False
    import select

    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    if not any(ev & select.POLLERR for _, ev in poll.poll(0)):
        return False
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)  # no error at exit's flush
    return True


def _input_files(kwargs: dict[str, Any]) -> list[str]:
    """The existing files among a command's arguments (what an error can name)."""
    out: list[str] = []
    for k, v in kwargs.items():
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, str) and k != "output" and os.path.isfile(x) and x not in out:
                out.append(x)
    return out


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


class Command(click.Command):
    """Every bbmap command (``@main.command``): option help in one style, set here once --
    a sentence (capital first letter, full stop), whoever wrote the option.  Metavars name
    what is expected (FILE, N, ADDR), never click's TEXT or INTEGER; defaults are shown by
    click's ``show_default`` ("[default: 20]") or written the same way.  The top-level help
    lists each command by its ``short_help``: one complete sentence that fits the line.
    tests/test_cli_help.py holds every command's --help to these rules."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for p in self.params:
            if isinstance(p, click.Option) and p.help:
                p.help = sentence(p.help)


def sentence(text: str) -> str:
    """``text`` with a capital first letter and a full stop."""
    text = text.strip()
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


class LazyGroup(click.Group):
    """Import a subcommand's module only when that subcommand runs (or help lists it),
    so ``bbmap annotate`` does not pay for the disassembler ``verify`` loads."""

    command_class = Command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(SUBCOMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in SUBCOMMANDS:
            import importlib

            importlib.import_module(SUBCOMMANDS[name])
        return super().get_command(ctx, name)

    # A signal before a command body runs (parsing, importing the command's module) gets
    # the same answer as one inside it (``guarded``): not click's "Aborted!" and exit 1.
    def main(self, *args: Any, **kwargs: Any) -> Any:
        with interrupts_exit():
            return super().main(*args, **kwargs)

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with interrupts_exit():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        from bbmap.atomic import signals_raise

        with interrupts_exit(), signals_raise():
            return super().invoke(ctx)


@contextlib.contextmanager
def interrupts_exit() -> Any:
    """SIGINT (KeyboardInterrupt) and SIGTERM (``Terminated``) raised inside: one line on
    stderr and exit 130 or 143."""
    try:
        yield
    except KeyboardInterrupt:
        _say_and_exit(INTERRUPTED, EXIT_SIGINT)
    except Terminated:
        _say_and_exit(TERMINATED, EXIT_SIGTERM)


def _say_and_exit(line: str, code: int) -> None:
    with contextlib.suppress(OSError, ValueError):
        click.echo(line, err=True)
    sys.exit(code)


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
