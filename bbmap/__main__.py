"""``python -m bbmap`` and the ``bbmap`` console script (``run``).

``bbmap --version`` is answered here, before click and the command modules load: half
the start-up of the click path (spec/startup.md).  Everything else goes to click.
"""

from __future__ import annotations

import sys


def run() -> None:
    if sys.argv[1:] == ["--version"]:
        from bbmap import __version__

        sys.stdout.write(f"bbmap, version {__version__}\n")  # what click's option prints
        return
    from bbmap.cli import main

    main(prog_name="bbmap")


if __name__ == "__main__":
    run()
