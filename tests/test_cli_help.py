"""Every ``--help`` in one style (bbmap.cli.Command), walked command by command.

Was: "30%%" printed literally in five commands' help; option help capitalised in some
commands and not in others; "[default 0.2]" beside "[default: 20]"; ``TEXT`` and
``INTEGER`` placeholders; the top-level help cutting every command's description short
("Map the samples of PERF_DATA (files or @listfiles, merged)...").
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from bbmap.cli import SUBCOMMANDS, main

CLICK_METAVARS = ("TEXT", "INTEGER", "FLOAT", "PATH", "FILENAME", "DIRECTORY", "BOOLEAN",
                  "INTEGER RANGE", "FLOAT RANGE")


def help_of(*args: str) -> str:
    r = CliRunner().invoke(main, [*args, "--help"], terminal_width=80)
    assert r.exit_code == 0, r.output
    return r.stdout


def options(text: str) -> list[tuple[str, str]]:
    """(flags and metavar, help) of each option listed in ``text``."""
    out: list[tuple[str, str]] = []
    section = text.split("\nOptions:\n", 1)[1]
    for line in section.splitlines():
        m = re.match(r"  (-\S.*?)(?:\s{2,}(.*))?$", line)
        if m and not line.startswith("   "):
            out.append((m.group(1), m.group(2) or ""))
        elif out and line.startswith("   "):
            flags, h = out[-1]
            if not h and not line.strip().startswith(("-", "[")) and \
                    len(line) - len(line.lstrip()) < 10:
                out[-1] = (f"{flags} {line.strip()}", h)  # a long metavar wrapped
            else:
                out[-1] = (flags, f"{h} {line.strip()}".strip())
    return out


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_option_is_written_in_one_style(name):
    text = help_of(name)
    assert "%%" not in text
    assert not re.search(r"\[default [^:]", text), "defaults as click shows them: [default: X]"
    opts = options(text)
    assert len(opts) >= 2, text
    for flags, h in opts:
        metavar = re.sub(r"^(?:-\S+(?:,| /)? ?)+", "", flags).strip()
        for generic in CLICK_METAVARS:
            assert not re.search(rf"(?:^|\s){generic}(?:$|\s)", metavar), \
                f"{name}: {flags}: say what is expected (FILE, N, ADDR), not {generic}"
        assert h, f"{name}: {flags}: no help"
        body = re.sub(r"(?:\s*\[[^\]]*\])+$", "", h)  # click's [default: ...] [x>=0] [required]
        assert body[:1].isupper() or body[:1] in "-'(`@.", f"{name}: {flags}: {h!r}"
        assert body.endswith((".", "?", "!")), f"{name}: {flags}: {h!r}"


def test_the_command_list_says_each_command_in_a_whole_sentence():
    text = help_of()
    rows = text.split("\nCommands:\n", 1)[1].splitlines()
    listed: dict[str, str] = {}
    for line in rows:
        m = re.match(r"  (\S+)\s{2,}(.*)$", line)
        if m:
            listed[m.group(1)] = m.group(2)
        elif line.strip() and listed:
            last = list(listed)[-1]
            listed[last] += " " + line.strip()
    assert sorted(listed) == sorted(SUBCOMMANDS), text
    for name, desc in listed.items():
        assert not desc.endswith("..."), f"{name}: cut short: {desc!r}"
        assert desc[:1].isupper() and desc.endswith("."), f"{name}: {desc!r}"
        assert len(f"  {name:<11}{desc}") <= 80, f"{name}: does not fit the line: {desc!r}"
