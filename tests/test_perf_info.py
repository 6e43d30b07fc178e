"""``bbmap perf-info``: the JSON shape, text output, exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from oracles import perf_oracle as oracle

from bbmap.cli import main
from bbmap.formats import perfdata as fmt
from bbmap.perf.info import perf_info
from bbmap.perf.writer import PerfWriter

SHARED = Path(__file__).resolve().parents[2] / "shared" / "perf-corpus"


@pytest.fixture()
def lbr_file(tmp_path) -> Path:
    path = tmp_path / "lbr.data"
    with PerfWriter(path, branch_sample_type=fmt.BR_ANY, hostname="host1",
                    cmdline=["perf", "record", "-b"]) as w:
        w.add_comm(10, 10, "prog", exec_=True)
        w.add_mmap2(10, 10, 0x400000, 0x1000, 0, "/bin/prog", build_id="12" * 20)
        w.add_mmap2(10, 10, 0x600000, 0x1000, 0, "/bin/prog", prot=3)
        for k in range(5):
            w.add_sample(0x400000 + k, 10, 10, time=k + 1, branches=[(1, 2, 0)] * k)
        w.add_sample(0xFFFFFFFF81000000, 10, 10, time=9, cpumode=1)
        w.add_lost_samples(3)
        w.add_build_id("/bin/prog", "12" * 20)
    return path


def test_json_shape(lbr_file):
    r = CliRunner().invoke(main, ["perf-info", "--json", str(lbr_file)])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    for key in ("mode", "events", "features", "build_ids", "records", "samples", "lost",
                "warnings"):
        assert key in info
    assert info["mode"] == "file"
    assert info["records"] == {"COMM": 1, "MMAP2": 2, "SAMPLE": 6, "LOST_SAMPLES": 1}
    assert info["samples"]["total"] == 6
    assert info["samples"]["by_cpumode"] == {"kernel": 1, "user": 5}
    assert info["samples"]["by_event"] == {"cycles:u": 6}
    assert info["samples"]["branch_entries"] == 10
    assert info["lost"] == 3
    assert info["features"]["hostname"] == "host1"
    assert info["features"]["cmdline"] == ["perf", "record", "-b"]
    assert info["build_ids"] == [{"build_id": "12" * 20, "filename": "/bin/prog", "pid": -1,
                                  "cpumode": 2}]
    assert info["events"][0]["name"] == "cycles:u"
    assert info["mmaps"] == [{"pid": 10, "comm": "prog", "mmaps": 2,
                              "exec_files": ["/bin/prog"], "exec_files_omitted": 0}]
    assert info["warnings"] == []


def test_text_and_output_file(lbr_file, tmp_path):
    out = tmp_path / "info.txt"
    r = CliRunner().invoke(main, ["perf-info", str(lbr_file), "-o", str(out)])
    assert r.exit_code == 0
    text = out.read_text()
    assert "cycles:u" in text and "SAMPLE" in text and "/bin/prog" in text


@pytest.mark.parametrize("content", [b"", b"not perf data at all, sorry"])
def test_not_perf_data_is_one_line_exit_3(tmp_path, content):
    path = tmp_path / "junk"
    path.write_bytes(content)
    r = CliRunner().invoke(main, ["perf-info", str(path)])
    assert r.exit_code == 3
    assert r.output.count("\n") == 1 and str(path) in r.output and "Traceback" not in r.output


def test_damaged_stream_exits_1_with_offset(lbr_file, tmp_path):
    data = bytearray(lbr_file.read_bytes())
    start = int.from_bytes(data[40:48], "little")
    data[start + 6:start + 8] = b"\0\0"  # first record: size 0
    bad = tmp_path / "bad.data"
    bad.write_bytes(bytes(data))
    r = CliRunner().invoke(main, ["perf-info", "--json", str(bad)])
    assert r.exit_code == 1
    info = json.loads(r.stdout)
    assert any(f"offset {start:#x}" in w for w in info["warnings"])
    # was: exit 1 and nothing on stderr (the reason only inside the JSON on stdout)
    assert f"bbmap: error: {bad}" in r.stderr and f"offset {start:#x}" in r.stderr, r.stderr


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/perf-corpus not present")
def test_pipe_file_from_kernel_6_12():
    info = perf_info(SHARED / "perf.data.piped.header_features_aligned-6.12")
    assert info["mode"] == "pipe"
    assert info["features"]["hostname"] == "skanev.svl.corp.google.com"
    assert info["features"]["nrcpus"] == {"avail": 12, "online": 12}
    assert info["events"][0]["name"] == "cycles:u"
    assert info["records"]["FEATURE"] == 20
    if oracle.have_perf():
        assert info["records"] == oracle.report_d_stats(
            str(SHARED / "perf.data.piped.header_features_aligned-6.12"))


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/perf-corpus not present")
def test_lost_samples_counted():
    info = perf_info(SHARED / "perf.data.lost_samples-4.4")
    assert info["lost_detail"]["LOST_SAMPLES"] == 2
    assert info["samples"]["by_event"] == {"cycles:pp": 97, "instructions:pp": 80,
                                           "branch-instructions:pp": 14}
