"""The Go identities as the commands show them: dump, lookup, perf-info (seed 002).

``bbmap dump --json`` must report, for each of the three builds (and the changed one), the
Go build id ``go tool buildid`` printed and the GNU build-id ``readelf -n`` printed (or
none); lookup and perf-info carry the same two ids.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner
from helpers import CORPUS, go_case, go_cases

from bbmap.cli import main
from bbmap.perf.writer import PerfWriter

GO_BINARIES = go_cases("go_binaries")


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _readelf_gnu(entry: dict) -> str | None:
    m = re.search(r"Build ID: ([0-9a-f]+)", (CORPUS / entry["goldens"]["readelf_n"]).read_text())
    return m.group(1) if m else None


@pytest.mark.parametrize("entry", GO_BINARIES, ids=[e["name"] for e in GO_BINARIES])
def test_dump_json_reports_both_build_ids(entry):
    r = _run("dump", "--json", str(CORPUS / entry["path"]))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    go_tool = (CORPUS / entry["goldens"]["go_buildid"]).read_text().strip()
    assert doc["go"]["build_id"] == go_tool
    assert doc["build_id"] == _readelf_gnu(entry)  # None: readelf -n shows no GNU note
    assert doc["go"]["version"] == "go1.19.8" and doc["go"]["compiler"] == "gc"
    assert doc["go"]["build_info"]["path"] == "bbmap.test/gohot"
    assert doc["functions"] == [] and doc["warnings"] == []
    if doc["build_id"] is None:
        assert "-ldflags=-B 0x<hex>" in doc["go"]["gnu_build_id_flag"]
    else:
        assert doc["go"]["gnu_build_id_flag"] is None
    # the text dump says the same, and the no-map warning is Go's
    r = _run("dump", str(CORPUS / entry["path"]))
    assert go_tool in r.stdout and "Go gc compiler (go1.19.8)" in r.stderr
    assert "clang" not in r.stderr


def test_dump_json_of_a_c_binary_has_no_go():
    c = next((e for e in json.loads((CORPUS / "manifest.json").read_text())["binaries"]
              if e["name"] == "demo"), None)
    if c is None:
        pytest.skip("corpus absent")
    doc = json.loads(_run("dump", "--json", str(CORPUS / c["path"])).stdout)
    assert doc["go"] is None


def test_lookup_shows_both_ids_and_the_function_of_a_stripped_binary():
    e = go_case("go-stripped")
    plain = go_case("go-plain")
    # main.mix's address from the unstripped build's symbol table (readelf would do)
    from bbmap.binary import load_binary

    sym = load_binary(CORPUS / plain["path"]).symbols
    addr = int(sym.address[sym.names.index("main.mix")])
    r = _run("lookup", "--json", str(CORPUS / e["path"]), hex(addr + 5))
    rep = json.loads(r.stdout)[0]
    assert rep["function"] == "main.mix" and rep["status"] == "in-function-no-block"
    assert rep["go_build_id"] == e["go_build_id"] and rep["build_id"] is None
    assert "Go gc compiler" in rep["note"] and ".gopclntab" in rep["note"]
    text = _run("lookup", str(CORPUS / e["path"]), hex(addr)).stdout
    assert text.splitlines()[0].endswith("to match exactly") and e["go_build_id"] in text


def test_perf_info_shows_the_named_binaries_as_they_are_on_disk(tmp_path):
    """Build-id records and mmaps name files; perf-info reads them from disk: the recorded
    GNU build-id against the file's, and the Go build id perf never records."""
    bid, plain = go_case("go-bid"), go_case("go-plain")
    same, other, nobid = tmp_path / "same" / "gohot", tmp_path / "other" / "gohot", \
        tmp_path / "plain" / "gohot"
    for dst, src in ((same, bid), (other, go_case("go-bid-v2")), (nobid, plain)):
        dst.parent.mkdir()
        shutil.copy2(CORPUS / src["path"], dst)
    data = tmp_path / "perf.data"
    w = PerfWriter(str(data), event_name="cpu-clock")
    for i, f in enumerate((same, other, nobid)):
        w.add_comm(100 + i, 100 + i, "gohot", exec_=True)
        w.add_mmap2(100 + i, 100 + i, 0x400000, 0x65000, 0, str(f))
        w.add_sample(0x464d45, 100 + i, 100 + i)
    w.add_build_id(str(same), bid["build_id"])
    w.add_build_id(str(other), bid["build_id"])  # recorded as go-bid, on disk go-bid-v2
    w.close()
    r = _run("perf-info", "--json", str(data))
    info = {b["filename"]: b for b in json.loads(r.stdout)["binaries"]}
    assert info[str(same)]["same_build"] is True
    assert info[str(same)]["go"]["build_id"] == bid["go_build_id"]
    assert info[str(other)]["same_build"] is False
    assert info[str(other)]["build_id"] == go_case("go-bid-v2")["build_id"]
    assert info[str(nobid)]["recorded_build_id"] is None
    assert info[str(nobid)]["go"]["build_id"] == plain["go_build_id"]
    text = _run("perf-info", str(data)).stdout
    assert "another build is on disk now" in text and "matches by path" in text
