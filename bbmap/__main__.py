"""``python -m bbmap`` and the ``bbmap`` console script (``run``).

``bbmap --version`` is answered here, before click and the command modules load: half
the start-up of the click path (spec/startup.md).  Everything else goes to click; a
command that allowed it (``bbmap.cli.allow_quick_exit``) ends without the interpreter's
teardown once its output is flushed.
"""

from __future__ import annotations

import gc
import os
import sys

# Python runs a young-generation collection every 700 container allocations (its default
# gen0 threshold).  A bbmap command allocates millions of objects that are never in a
# reference cycle (imports of ~400 modules, then per-batch numpy work), so those passes
# find almost nothing: measured with cachegrind, they are 3.9 % of a small `annotate`'s
# instructions (1.31 G -> 1.26 G with the collector off), 2.9 % of a tiny `dump --json`,
# 0.8 % of a 500k-sample annotate.  A threshold of 50,000 keeps the collector (any cycle
# is still freed, after at most 50,000 allocations: a few MB) and saves most of that
# (1.31 G -> 1.28 G; 6.217 G -> 6.181 G on 500k samples).  The console script only:
# `import bbmap` leaves a host program's collector alone (spec/startup.md, rule 5).
GC_GEN0_THRESHOLD = 50_000


def run() -> None:
    if sys.argv[1:] == ["--version"]:
        from bbmap import __version__

        sys.stdout.write(f"bbmap, version {__version__}\n")  # what click's option prints
        return
    try:  # a signal while the CLI loads: the same line and code as in a command
        gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
        import signal

        policy = [sig for sig in (signal.SIGINT, signal.SIGTERM)  # an ignored one stays so
                  if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler)]
        for sig in policy:  # nothing to clean up yet: end at once
            signal.signal(sig, lambda signum, frame: _exit_on_signal(signum))
        from bbmap.atomic import drop_unraisable_signal, raise_later, signal_received

        sys.unraisablehook = drop_unraisable_signal  # (a signal inside an import's lock)
        for sig in policy:  # from here on: raised, so that outputs are cleaned up
            signal.signal(sig, raise_later)
        from bbmap.cli import main, quick_exit_allowed

        if signal_received():  # one raised where it could not propagate: not lost
            _exit_on_signal(signal_received())
    except BaseException as e:  # (Terminated may not be imported yet: matched by name)
        if type(e).__name__ in ("KeyboardInterrupt", "Terminated"):
            _exit_on_signal(2 if isinstance(e, KeyboardInterrupt) else 15)
        raise

    try:
        main(prog_name="bbmap")
    except SystemExit as e:
        # the outcome is decided and the outputs settled: a signal now (the interpreter's
        # teardown) ends the process at once with its own code, never a traceback
        signal.signal(signal.SIGINT, lambda signum, frame: _exit_on_signal(signum))
        signal.signal(signal.SIGTERM, lambda signum, frame: _exit_on_signal(signum))
        if quick_exit_allowed() and (e.code is None or isinstance(e.code, int)):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                raise e from None  # the usual exit reports it
            os._exit(e.code or 0)
        raise


def _exit_on_signal(signum: int) -> None:
    """One line and exit 128 + signum (SIGINT 2, SIGTERM 15), at once."""
    try:  # (a fleet's stop may have moved bbmap's stderr off descriptor 2: fleet/run.py)
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        fd = 2
    os.write(fd, b"bbmap: interrupted\n" if signum == 2 else b"bbmap: terminated\n")
    os._exit(128 + signum)


if __name__ == "__main__":
    run()
