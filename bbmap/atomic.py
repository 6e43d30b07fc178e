"""Write outputs atomically: a reader sees the old file or the whole new one.

(Atomic for readers, not a durability promise: the data is not fsync'ed before the
rename, so after a power loss the file may be empty, as after any unsynced write.)

A regular file (or a symlink to one: the link is kept, its target replaced) is written
to a temporary file beside it and renamed over it.  What cannot be renamed over -- a
device, a FIFO, a terminal, ``/dev/stdout`` -- is written through in place.  Every
failure is a :class:`~bbmap.errors.BBMapError` naming the output path (never the
temporary file).  Text is UTF-8; file names that are not (``os.fsdecode`` surrogates)
are written back as the bytes they came from.

A command's outputs are held until its exit code is known (:class:`OutputRun`, opened by
the CLI around every command): a good output must never be replaced by a worse one, and
the writer cannot know whether the run will fail after it wrote.  Exit 0 renames them
into place; a failing run (exit 1, 2 or 3) leaves an existing file exactly as it was and
puts what it wrote beside it as ``FILE.partial`` (a new file receives it directly: the
exit code says it is incomplete); an interrupted run (a signal, SIGPIPE) leaves nothing.
Library callers, and files that are not a command's outputs (the disassembly cache),
are renamed as soon as they are written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from typing import IO

from bbmap.errors import BBMapError


class Terminated(BaseException):  # noqa: N818 - named for the signal, like KeyboardInterrupt
    """SIGTERM arrived while a temporary output existed (``timeout``, a scheduler): raised
    like KeyboardInterrupt on SIGINT, so the temporary file is removed on the way out."""


class _Held:
    """While > 0, SIGTERM and SIGINT are noted, not raised: the few bytecodes between the
    temporary file's creation (inside ``_mkstemp``) and its name reaching the cleanup.  A
    signal raised there left ``.bbmap-*.tmp`` behind (2 of 10 runs SIGTERMed the moment the
    file appeared, at load 6).  Blocking the signal with ``pthread_sigmask`` would not do:
    another thread may take it and the main thread still runs the handler."""

    depth = 0
    pending: BaseException | None = None
    # the last SIGINT/SIGTERM raise_later saw: an exception raised where Python cannot
    # propagate it (a __del__, a weakref callback) is lost, the signal is not
    received = 0


@contextlib.contextmanager
def _held() -> Iterator[None]:
    _Held.depth += 1
    try:
        yield
    finally:
        _Held.depth -= 1
        if not _Held.depth and _Held.pending is not None:
            exc, _Held.pending = _Held.pending, None
            raise exc


def raise_later(signum: int, frame: object) -> None:
    """The handler of SIGTERM and SIGINT while bbmap runs a command: raise
    :class:`Terminated` or KeyboardInterrupt, once a temporary file's name is known."""
    exc = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
    _Held.received = signum
    if _Held.depth:
        _Held.pending = _Held.pending or exc
        return
    raise exc


def drop_unraisable_signal(u: object) -> None:
    """``sys.unraisablehook`` while bbmap runs: a KeyboardInterrupt or ``Terminated``
    raised inside a ``__del__`` or a weakref callback (importlib's module locks have one)
    cannot propagate, and Python printed it as "Exception ignored in ...".  The signal is
    not lost (``signal_received``: the exit is still 130 or 143); the print is dropped.
    Anything else goes to the hook that was in force before."""
    if not isinstance(getattr(u, "exc_value", None), (KeyboardInterrupt, Terminated)):
        _UNRAISABLE_BEFORE[-1](u)


_UNRAISABLE_BEFORE = [sys.__unraisablehook__]


@contextlib.contextmanager
def signals_never_unraisable() -> Iterator[None]:
    """:func:`drop_unraisable_signal` in force for the block (already in force when the
    console script set it before the CLI loaded: then it is not stacked on itself, which
    would hand every other unraisable exception back to itself)."""
    if sys.unraisablehook is drop_unraisable_signal:
        yield
        return
    _UNRAISABLE_BEFORE.append(sys.unraisablehook)
    sys.unraisablehook = drop_unraisable_signal
    try:
        yield
    finally:
        sys.unraisablehook = _UNRAISABLE_BEFORE.pop()


def signal_received(reset: bool = False) -> int:
    """The last SIGINT or SIGTERM seen by :func:`raise_later` (0: none); ``reset`` forgets
    it (a command starting)."""
    got = _Held.received
    if reset:
        _Held.received = 0
    return got


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While writing: SIGTERM raises :class:`Terminated` instead of killing the process
    with a temporary file left behind (only where the default action was in force), and
    SIGINT's KeyboardInterrupt (where Python's default handler is in force) waits, like
    Terminated, until the temporary file's name is known."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    term = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    intr = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if term:
        signal.signal(signal.SIGTERM, raise_later)
    if intr:
        signal.signal(signal.SIGINT, raise_later)
    try:
        yield
    finally:
        if term:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if intr:
            signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"
                ) -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it over ``path`` on success."""
    path = os.fspath(path)
    enc = None if "b" in mode else encoding
    errors = None if "b" in mode else "surrogateescape"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _output_error(path, e) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise BBMapError("cannot write output: it is a directory", file=path)
    real = os.path.realpath(path)
    if (st is not None and not stat.S_ISREG(st.st_mode)) or _is_fd_alias(path):
        # a device, FIFO, terminal or /dev/stdout: nothing to rename over; write through.
        # /dev/stdout is written through our own descriptor 1 (reopening it would not share
        # the shell's file offset: O_TRUNC empties a '>> log', later writes overwrite ours)
        fd = _fd_alias(path)
        try:
            if fd is not None:
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    sys.stdout.flush()
                    sys.stderr.flush()
                target = os.dup(fd)
            else:
                target = path
            with open(target, mode.replace("w", "a"), encoding=enc, errors=errors) as fh:
                yield fh
        except OSError as e:
            if e.errno == errno.EPIPE:  # `-o /dev/stdout | head`: the reader left (141)
                raise BrokenPipeError(e.errno, e.strerror) from None
            raise _output_error(path, e) from None
        return
    with signals_raise():
        yield from _write_renamed(path, real, st, mode, enc, errors)


def _write_renamed(path: str, real: str, st: os.stat_result | None, mode: str,
                   enc: str | None, errors: str | None) -> Iterator[IO]:
    if st is not None:
        perm = stat.S_IMODE(st.st_mode)  # replacing a file: keep its mode
    else:
        umask = os.umask(0)
        os.umask(umask)
        perm = 0o666 & ~umask  # _mkstemp makes 0600; outputs get the usual mode
    tmp: str | None = None
    fd = -1
    try:
        with _held():  # a signal now is raised once ``tmp`` is set (see _Held)
            try:
                fd, tmp = _mkstemp(os.path.dirname(real))
            except OSError as e:
                raise _output_error(path, e) from None
            os.fchmod(fd, perm)
            fh = os.fdopen(fd, mode, encoding=enc, errors=errors)
            fd = -1  # the file object owns it now
        with fh:
            yield fh
            fh.flush()
        # no fsync: the rename is what readers see atomically; forcing a few hundred MB of
        # JSON to disk before returning would cost more than producing it
        run = OutputRun.current
        if run is not None and real in run.targets:
            run.hold(real, tmp)  # renamed (or not) once the run's exit code is known
        else:
            os.replace(tmp, real)
    except BaseException as e:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError):
            raise _output_error(path, e) from None
        raise


# O_EXCL: never an existing file (or a link planted under the name); O_NOFOLLOW and
# O_CLOEXEC as tempfile.mkstemp opens it
_TMP_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))


def _mkstemp(directory: str) -> tuple[int, str]:
    """A new ``.bbmap-*.tmp`` file in ``directory``, mode 0600: what ``tempfile.mkstemp``
    does (a random name, created with ``O_EXCL``, another name on a clash), without
    importing tempfile, which brings shutil, bz2, lzma and random: 2.7 ms of every
    command that writes a file (~2 % of a 20,000-function ``dump --json``)."""
    for _ in range(100):  # tempfile.TMP_MAX
        name = os.path.join(directory, f".bbmap-{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, _TMP_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", directory)


def _is_fd_alias(path: str) -> bool:
    """``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``: an open descriptor, even when
    it is a regular file (``> out.txt``, ``>> log``): write to it, never rename over."""
    for _ in range(16):
        if path.startswith(("/proc/", "/dev/fd/")):
            return True
        if not os.path.islink(path):
            return False
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    return False


def _fd_alias(path: str) -> int | None:
    """The descriptor number ``path`` names in this process (``/dev/stdout`` -> 1), if any."""
    for _ in range(16):
        m = re.fullmatch(rf"/(?:proc/self|proc/{os.getpid()}|dev)/fd/(\d+)", path)
        if m:
            return int(m.group(1))
        if not os.path.islink(path):
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
    return None


def _output_error(path: str, e: OSError) -> BBMapError:
    return BBMapError(f"cannot write output: {e.strerror or e}", file=path)


class OutputRun:
    """The outputs of one command run, held as temporary files beside their targets until
    the run's exit code says where they go (:meth:`settle`).

    Only the paths named when the run begins (the command's ``-o`` and the like) are held;
    every writer (``atomic_open``, ``write_atomic``, the aggregate and perf.data writers)
    goes through ``_write_renamed``, so the rule holds for all of them in one place."""

    current: OutputRun | None = None

    def __init__(self, paths: list[str]) -> None:
        self.targets = {os.path.realpath(p): p for p in paths}
        self.held: dict[str, str] = {}  # target (real path) -> its temporary file

    def __enter__(self) -> OutputRun:
        OutputRun.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        OutputRun.current = None
        self.discard()  # settle() was not reached (an exception): nothing is renamed

    def hold(self, real: str, tmp: str) -> None:
        old = self.held.pop(real, None)
        if old is not None:  # written twice: the later output wins
            with contextlib.suppress(OSError):
                os.unlink(old)
        self.held[real] = tmp

    def discard(self) -> None:
        """Remove every held temporary file (an interrupted run leaves nothing)."""
        for tmp in self.held.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.held.clear()

    def settle(self, code: int) -> list[str]:
        """Rename the held outputs as exit ``code`` says; returns what stderr must say.

        0: each replaces its target.  1, 2, 3 (the run failed or is incomplete): an
        existing regular file is left exactly as it was and the output goes to
        ``FILE.partial`` beside it (an empty one is dropped); a new target receives it
        (unless empty).  Anything else (130, 141, 143): every held file is removed."""
        said: list[str] = []
        try:
            for real, tmp in list(self.held.items()):
                shown = self.targets.get(real, real)
                if code == 0:
                    os.replace(tmp, real)
                elif code not in (1, 2, 3):
                    os.unlink(tmp)
                elif os.path.isfile(real):
                    if os.path.getsize(tmp) == 0:
                        os.unlink(tmp)
                        said.append(f"{shown} not replaced (the run failed with exit {code} "
                                    "and wrote nothing): it keeps its previous contents")
                        continue
                    partial = real + ".partial"
                    os.replace(tmp, partial)
                    said.append(f"{shown} not replaced (the run failed with exit {code}): it "
                                "keeps its previous contents; this run's incomplete output "
                                f"is in {_beside(shown, partial)}")
                elif os.path.getsize(tmp) == 0:
                    os.unlink(tmp)
                else:
                    os.replace(tmp, real)
                del self.held[real]
        except OSError as e:
            self.discard()
            raise _output_error(shown, e) from None
        return said


def _beside(shown: str, partial: str) -> str:
    """``FILE.partial`` as the user named FILE (its real path when FILE is a link)."""
    named = shown + ".partial"
    return named if os.path.realpath(named) == partial else partial


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
