"""What a pipeline (and a person at a terminal) expects of every command (issue 18).

A perf.data given where the binary belongs is named as such (exit 2); a stripped binary's
verify says so and what to pass; ``-o NAME.json`` picks JSON when no format is given;
``--event NAME`` counts one event of a multi-event profile (checked against perf script's
own count); the progress callback gets the share of the file read; every ``--help`` shows
an example.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from helpers import CORPUS, PIE_BINARY, PIE_PROFILE, cli, have_corpus, one_error_line

from bbmap.cli import main
from bbmap.run import annotate

STRIPPED = str(CORPUS / "bin" / "clang-22" / "stripped" / "layout.pie")


@have_corpus
@pytest.mark.parametrize("args", [["dump", "{p}"], ["lookup", "{p}", "1210"], ["verify", "{p}"]])
def test_perf_data_given_as_the_binary_is_named(args):
    """Was: 'not an ELF file (bad magic)', exit 3 (annotate alone said 'swapped')."""
    code, out = cli(*[a.format(p=PIE_PROFILE) for a in args])
    line = one_error_line(out)
    assert code == 2, out
    assert "this is a perf.data profile, not an ELF binary" in line, line


@have_corpus
def test_verify_of_a_stripped_binary_says_so_and_what_to_pass():
    """Was: 17 'no function symbol' findings and no word that the file is stripped."""
    code, out = cli("verify", STRIPPED)
    assert code == 1
    head = out.splitlines()[1]
    assert head.startswith("  stripped: layout.pie is stripped: no .symtab") and \
        "--debug-dir" in head, out
    r = CliRunner().invoke(main, ["verify", STRIPPED, "--json"])
    assert "--debug-dir" in json.loads(r.stdout)["reports"][0]["stripped"]
    r = CliRunner().invoke(main, ["verify", PIE_BINARY, "--json"])
    assert "stripped" not in json.loads(r.stdout)["reports"][0]


@have_corpus
@pytest.mark.parametrize("cmd,ext,check", [
    (["annotate", PIE_PROFILE, PIE_BINARY], ".json", lambda t: json.loads(t)["binary"]),
    (["annotate", PIE_PROFILE, PIE_BINARY], ".csv", lambda t: t.startswith("function,")
     or "," in t.splitlines()[0]),
    (["perf-info", PIE_PROFILE], ".json", lambda t: json.loads(t)["schema"]),
    (["dump", PIE_BINARY], ".json", lambda t: json.loads(t)),
    (["verify", PIE_BINARY], ".json", lambda t: json.loads(t)["ok"]),
])
def test_output_extension_picks_the_format(tmp_path, cmd, ext, check):
    """Was: -o x.json without --format wrote text."""
    out = tmp_path / f"out{ext}"
    code, text = cli(*cmd, "-o", str(out))
    assert code == 0, text
    assert check(out.read_text())
    other = tmp_path / "out.txt"  # another extension: the default, as before
    cli(*cmd, "-o", str(other))
    with pytest.raises(json.JSONDecodeError):
        json.loads(other.read_text())


@have_corpus
def test_progress_gets_the_share_of_the_file_read(monkeypatch):
    import bbmap.aggregate.profile as prof
    monkeypatch.setattr(prof, "HOLD_BACK", 256)  # flush (and report) every 256 samples
    seen: list[tuple[str, int, float | None]] = []

    def progress(path, samples, fraction=None):
        seen.append((path, samples, fraction))
    progress.takes_fraction = True
    annotate(PIE_PROFILE, PIE_BINARY, progress=progress, chunk_samples=256, inference="off")
    fr = [f for _, _, f in seen]
    assert all(f is not None for f in fr) and fr == sorted(fr), fr
    assert 0.0 < fr[0] < 0.5 and fr[-1] > 0.95, fr
    plain: list = []
    annotate(PIE_PROFILE, PIE_BINARY, progress=lambda p, n: plain.append(n), inference="off")
    assert plain  # a two-argument callback is still called as before


@pytest.fixture(scope="module")
def two_events(tmp_path_factory):
    perf = shutil.which("perf")
    if not perf or not (CORPUS / "bin").is_dir():
        pytest.skip("perf or the corpus missing")
    out = tmp_path_factory.mktemp("ev") / "perf.data"
    r = subprocess.run([perf, "record", "-q", "-e", "cpu-clock,task-clock", "-F", "2000",
                        "-o", str(out), "--", PIE_BINARY, "250000"],
                       capture_output=True, timeout=120)
    if r.returncode or not out.exists():
        pytest.skip(f"perf record failed: {r.stderr[-200:]!r}")
    script = subprocess.run([perf, "script", "-i", str(out), "-F", "event"],
                            capture_output=True, text=True, timeout=120).stdout
    counts: dict[str, int] = {}
    for line in script.split():
        name = line.rstrip(":")
        counts[name] = counts.get(name, 0) + 1
    return str(out), counts


@pytest.mark.slow
def test_event_selects_one_event_of_several(two_events):
    """Was: every event summed, no way to pick one."""
    path, perf_counts = two_events
    for ev in ("cpu-clock", "task-clock"):
        code, out = cli("annotate", path, PIE_BINARY, "--event", ev, "--format", "json")
        doc = json.loads(out)
        assert doc["totals"]["samples"] == perf_counts[ev], (ev, doc["totals"], perf_counts)
        assert any(f"--event {ev}: counted" in w["message"] for w in doc["warnings"])
    code, out = cli("annotate", path, PIE_BINARY)
    assert "are counted together" in out
    code, out = cli("annotate", path, PIE_BINARY, "--event", "cycles")
    assert code == 2 and "no such event (it has cpu-clock, task-clock)" in \
        one_error_line(out), out


def test_every_command_help_shows_an_example():
    from bbmap.cli import SUBCOMMANDS
    for name in SUBCOMMANDS:
        code, out = cli(name, "--help")
        assert code == 0 and "Example:" in out, (name, out)
