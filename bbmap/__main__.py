"""``python -m bbmap`` and the ``bbmap`` console script (``run``).

``bbmap --version`` is answered here, before click and the command modules load: half
the start-up of the click path (spec/startup.md).  Everything else goes to click; a
command that allowed it (``bbmap.cli.allow_quick_exit``) ends without the interpreter's
teardown once its output is flushed.
"""

from __future__ import annotations

import os
import sys


def run() -> None:
    if sys.argv[1:] == ["--version"]:
        from bbmap import __version__

        sys.stdout.write(f"bbmap, version {__version__}\n")  # what click's option prints
        return
    from bbmap.cli import main, quick_exit_allowed

    try:
        main(prog_name="bbmap")
    except SystemExit as e:
        if quick_exit_allowed() and (e.code is None or isinstance(e.code, int)):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                raise e from None  # the usual exit reports it
            os._exit(e.code or 0)
        raise


if __name__ == "__main__":
    run()
