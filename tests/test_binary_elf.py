"""load_binary: segments, sections, build-id, symbols (with .cold/.__part parts), debug
files found by build-id, relocatable objects -- checked against readelf/nm listings
stored in corpus/handmade/golden and the corpus manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bbmap.binary import load_binary
from bbmap.binary.types import parent_name
from bbmap.errors import BBMapError

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
GOLD = CORPUS / "handmade" / "golden"
LIST_PIE = CORPUS / "bin/clang-22/list/layout.pie"


def _need(p: Path) -> None:
    if not p.exists():
        pytest.skip(f"{p} not built")


def test_segments_match_readelf():
    _need(LIST_PIE)
    b = load_binary(LIST_PIE)
    loads = []
    for line in (GOLD / "c22-list-pie.readelf-l.txt").read_text().splitlines():
        f = line.split()
        if f[0] == "LOAD":
            loads.append(tuple(int(x, 16) for x in f[1:6]))
    ours = [(s.p_offset, s.p_vaddr, s.p_vaddr, s.p_filesz, s.p_memsz)
            for s in b.segments if s.is_load]
    assert ours == loads
    assert sum(s.is_exec for s in b.segments) == 1


def test_sections_match_readelf():
    _need(LIST_PIE)
    b = load_binary(LIST_PIE)
    rows = (GOLD / "c22-list-pie.readelf-S.txt").read_text().splitlines()[1:]
    assert len(rows) == len(b.sections)
    for row, s in zip(rows, b.sections):
        f = row.split("]", 1)[1].split()
        if s.index == 0:
            continue
        assert f[0] == s.name
        assert int(f[2], 16) == s.sh_addr and int(f[4], 16) == s.sh_size


def test_build_ids_match_manifest():
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    checked = 0
    for e in manifest["binaries"]:
        p = CORPUS / e["path"]
        if e.get("build_id") and p.exists():
            assert load_binary(p).build_id == e["build_id"], e["name"]
            checked += 1
    if not checked:
        pytest.skip("corpus not built")


def test_symbols_include_split_parts():
    _need(LIST_PIE)
    b = load_binary(LIST_PIE)
    fs = b.symbols
    assert np.all(np.diff(fs.address.astype(np.int64)) >= 0)
    nm = {}
    for line in (GOLD / "c22-list-pie.nm-S.txt").read_text().splitlines():
        f = line.split()
        if len(f) == 4:  # sized symbols only
            nm[f[3]] = (int(f[0], 16), int(f[1], 16))
    parts = [n for n in nm if n.endswith(".cold") or ".__part." in n]
    assert parts
    for n in parts:
        i = fs.names.index(n)
        assert (int(fs.address[i]), int(fs.size[i])) == nm[n]
        assert parent_name(n) in fs.names
    # the map's extra ranges start exactly at those part symbols
    m = b.block_map
    part_addrs = {nm[n][0] for n in parts}
    extra_bases = {int(m.range_base[r]) for f in range(m.num_functions)
                   for r in list(m.function_ranges(f))[1:]}
    assert extra_bases and extra_bases <= part_addrs | {a for a, _ in nm.values()}


def test_debug_file_by_build_id(tmp_path):
    stripped = CORPUS / "bin/clang-22/stripped/layout.pie"
    _need(stripped)
    b = load_binary(stripped)
    assert all(n is None for n in b.block_map.func_name)
    bid = b.build_id
    dbg = tmp_path / ".build-id" / bid[:2] / (bid[2:] + ".debug")
    dbg.parent.mkdir(parents=True)
    shutil.copy(CORPUS / "debug/.build-id" / bid[:2] / (bid[2:] + ".debug"), dbg)
    b2 = load_binary(stripped, debug_dirs=[tmp_path])
    assert b2.block_map.func_name[:2] == ["lay_die", "lay_scan"]
    assert len(b2.symbols) > 0


def test_relocatable_ranges_carry_their_section():
    obj = CORPUS / "bin/clang-22/list/layout.o"
    _need(obj)
    b = load_binary(obj)
    assert b.is_relocatable and b.e_type == "ET_REL"
    m = b.block_map
    secs = {int(s) for s in m.range_section}
    assert -1 not in secs
    assert all(b.sections[s].is_exec for s in secs)


def test_not_elf(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"#!/bin/sh\necho hi\n")
    with pytest.raises(BBMapError) as e:
        load_binary(p)
    assert str(p) in str(e.value) and "not an ELF" in str(e.value)
    with pytest.raises(BBMapError):
        load_binary(tmp_path / "missing")
