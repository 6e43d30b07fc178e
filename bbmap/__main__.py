"""``python -m bbmap``: the same as the ``bbmap`` command."""

from bbmap.cli import main

if __name__ == "__main__":
    main(prog_name="bbmap")
