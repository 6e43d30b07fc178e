"""A damaged ELF header or section header table: one line naming file, section and offset.

pyelftools reads the header and the section headers; on bad bytes it says
"Invalid EI_CLASS b'\\r'", "Too small e_phentsize: 1" or fails reading a name, and none of
that says where.  Each case below is a real corpus binary with one field changed (the
fields the fuzzer found, tests/mutate.py); the oracle is the field's offset in the ELF
specification's header layout (readelf -h names the same fields), checked against the
byte changed.  And a relocatable object: every command that places addresses or samples
refuses it the same way (exit 2, one message that says what to pass instead).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from helpers import CORPUS, PIE_BINARY, PIE_PROFILE, cli, have_corpus, one_error_line

OBJ = os.path.join(CORPUS, "bin", "clang-22", "addrmap", "layout.o")


def _mutant(tmp_path, name: str, *patches: tuple[str, int, int]) -> str:
    d = bytearray(Path(PIE_BINARY).read_bytes())
    for fmt, off, value in patches:
        struct.pack_into(fmt, d, off, value)
    p = tmp_path / name
    p.write_bytes(bytes(d))
    return str(p)


def _header(data: bytes) -> tuple[int, int, int]:
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    return e_shoff, e_shentsize, e_shstrndx


def _cases():
    data = Path(PIE_BINARY).read_bytes() if os.path.exists(PIE_BINARY) else b"\0" * 64
    shoff, shent, shstrndx = _header(data)
    return [
        # (name, patches, section, offset, words) -- was: "malformed ELF: Invalid EI_CLASS
        # b'\r'", "... Too small e_phentsize: 1", "a field holds a value no valid file has",
        # "a structure runs past the end of its data", with no section and no offset
        ("eiclass", [("<B", 4, 0x0D)], "ELF header", 4, "EI_CLASS is 0xd"),
        ("eidata", [("<B", 5, 7)], "ELF header", 5, "EI_DATA is 0x7"),
        ("phentsize", [("<H", 0x36, 1)], "ELF header", 0x36,
         "e_phentsize is 1, smaller than a program header (56 bytes)"),
        ("shentsize", [("<H", 0x3A, 1)], "ELF header", 0x3A,
         "e_shentsize is 1, smaller than a section header (64 bytes)"),
        ("shstrndx", [("<H", 0x3E, 200)], "ELF header", 0x3E, "e_shstrndx 200 names no section"),
        ("shname", [("<I", shoff + 3 * shent, 0x7FFFFFFF)], "section header [3]",
         shoff + 3 * shent, "sh_name 0x7fffffff of section [3] lies past the end"),
        ("strtab", [("<Q", shoff + shstrndx * shent + 24, 0x7FFFFFFFFFFF)],
         f"section header [{shstrndx}]", shoff + shstrndx * shent,
         "the section name table"),
        ("shoff", [("<Q", 0x28, 0xFF)], "section header [0]", 0xFF, "sh_name"),
    ]


@have_corpus
@pytest.mark.parametrize("name,patches,section,offset,words", _cases(),
                         ids=[c[0] for c in _cases()])
@pytest.mark.parametrize("cmd", ["dump", "verify", "lookup", "annotate"])
def test_header_damage_names_file_section_and_offset(tmp_path, cmd, name, patches, section,
                                                     offset, words):
    p = _mutant(tmp_path, f"{name}.elf", *patches)
    args = {"dump": ["dump", p], "verify": ["verify", p], "lookup": ["lookup", p, "0x1740"],
            "annotate": ["annotate", PIE_PROFILE, p, "--name", "layout.pie"]}[cmd]
    code, out = cli(*args)
    line = one_error_line(out)
    assert code == 3, out
    assert line.startswith(f"bbmap: error: {p}: {section}: offset {offset:#x}: "), line
    assert words in line, line
    for lib in ("Invalid EI_", "Too small", "runs past the end", "no valid file has"):
        assert lib not in line, line


@have_corpus
def test_a_short_file_says_how_long_a_header_is(tmp_path):
    p = tmp_path / "short.elf"
    p.write_bytes(Path(PIE_BINARY).read_bytes()[:40])
    code, out = cli("dump", str(p))
    line = one_error_line(out)
    assert code == 3 and f"{p}: ELF header: offset 0x0: the ELF header needs 64 bytes, " \
        "the file has 40" in line, line


RELOCATABLE = [("annotate", PIE_PROFILE, OBJ), ("cfg", PIE_PROFILE, OBJ, "-o", "x.svg"),
               ("layout", PIE_PROFILE, OBJ), ("lookup", OBJ, "0x10"),
               ("lookup", OBJ, "0x10", "--perf-data", PIE_PROFILE),
               ("verify", OBJ, "--profile", PIE_PROFILE)]


@have_corpus
@pytest.mark.skipif(not os.path.exists(OBJ), reason="corpus not built")
def test_every_command_refuses_a_relocatable_object_alike(tmp_path, monkeypatch):
    """Was: annotate and cfg exit 3 "never mapped by a process ... annotate the linked
    binary", lookup exit 2 "section-relative and overlap"; verify --profile and layout as
    annotate.  Now one message, exit 2 (a refusal: the request, not the file, is wrong)."""
    monkeypatch.chdir(tmp_path)
    lines = set()
    for args in RELOCATABLE:
        code, out = cli(*args)
        line = one_error_line(out)
        assert code == 2, (args, out)
        lines.add(line)
    assert len(lines) == 1, lines
    line = lines.pop()
    assert line.startswith(f"bbmap: error: {OBJ}: ELF header: offset 0x10: a relocatable "
                           "object"), line
    assert "pass the executable or shared library linked from it" in line, line
    assert not os.path.exists(tmp_path / "x.svg")


@have_corpus
@pytest.mark.skipif(not os.path.exists(OBJ), reason="corpus not built")
@pytest.mark.parametrize("cmd", ["dump", "verify"])
def test_dump_and_verify_still_read_a_relocatable_object(cmd):
    code, out = cli(cmd, OBJ)
    assert code == 0, out


EH = os.path.join(CORPUS, "bin", "clang-22", "eh", "unwind.pie")


@pytest.mark.skipif(not os.path.exists(EH), reason="corpus not built")
def test_a_text_section_outside_the_file_is_a_note_not_a_decoding_error(tmp_path):
    """.text's sh_offset set to 0xffffffff (a fuzzer's mutant): the disassembly is empty.
    Was: exit 3 "cannot decode: a field holds a value no valid file has" (an IndexError in
    the call-site check, with no section and no offset)."""
    d = bytearray(Path(EH).read_bytes())
    shoff, shent, _ = _header(d)
    text = next(i for i in range(64) if _section_name(d, i) == b".text")
    struct.pack_into("<Q", d, shoff + text * shent + 24, 0xFFFFFFFF)
    p = tmp_path / "text.elf"
    p.write_bytes(bytes(d))
    code, out = cli("verify", str(p))
    assert code == 1 and "cannot decode" not in out and "Traceback" not in out, out
    assert f"section [{text}] .text: size" in out and "file offset 0xffffffff cannot be " \
        "real" in out, out


def _section_name(d: bytes, i: int) -> bytes:
    shoff, shent, shstrndx = _header(d)
    str_off, = struct.unpack_from("<Q", d, shoff + shstrndx * shent + 24)
    name, = struct.unpack_from("<I", d, shoff + i * shent)
    return bytes(d[str_off + name:d.index(b"\0", str_off + name)])
