"""The driver of a run (bbmap/run.py): the binary opened once and one disassembler for the
whole run, whatever phases need its code; the result carries the binary to the renderers;
the options object, the CLI's choices and the statuses are the library's own."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import PIE_BINARY, PIE_PROFILE, have_corpus, one_error_line

from bbmap import cfg
from bbmap.binary import disasm, elf
from bbmap.options import (
    INFERENCE_MODES,
    SAMPLE_MODEL_CHOICES,
    SOLVER_CHOICES,
    AnnotateOptions,
    Status,
)
from bbmap.run import annotate, render

pytestmark = pytest.mark.skipif(not have_corpus(), reason="needs the corpus")


@pytest.fixture
def opened(monkeypatch):
    """Counts of ``Binary`` objects made per path and of disassemblers made."""
    counts: dict = {"binaries": {}, "disassemblers": 0}
    init_b, init_d = elf.Binary.__init__, disasm.Disassembler.__init__

    def binary(self, path, *a, **k):  # noqa: ANN001
        p = os.path.realpath(os.fspath(path))
        counts["binaries"][p] = counts["binaries"].get(p, 0) + 1
        init_b(self, path, *a, **k)

    def disassembler(self, *a, **k):  # noqa: ANN001
        counts["disassemblers"] += 1
        init_d(self, *a, **k)

    monkeypatch.setattr(elf.Binary, "__init__", binary)
    monkeypatch.setattr(disasm.Disassembler, "__init__", disassembler)
    # every range a sweep read (a bool mask per call of sweep_rows)
    counts["swept"] = []
    sweep = disasm.sweep_rows

    def sweep_rows(dis, data, sections, m, *a, **k):  # noqa: ANN001
        want = a[3] if len(a) > 3 else k.get("want")
        counts["swept"].append(np.ones(m.num_ranges, bool) if want is None
                               else np.asarray(want, bool).copy())
        return sweep(dis, data, sections, m, *a, **k)

    monkeypatch.setattr(disasm, "sweep_rows", sweep_rows)
    monkeypatch.setattr(cfg, "sweep_rows", sweep_rows)
    return counts


@pytest.mark.parametrize("fmt", ["text", "json", "fdata"])
def test_one_open_and_one_disassembler_when_fit_and_inference_both_read_code(opened, fmt):
    # --name: matched by name, so the fit phase disassembles; IP samples only, so the
    # infer phase recovers the CFG: both read the code through the run's one disassembler
    r = annotate(PIE_PROFILE, PIE_BINARY, name_override="layout.pie",
                 addresses=fmt == "fdata")
    assert r.fit["judged"] and r.count_source == "inferred"
    render(r, fmt)
    assert opened["binaries"].get(os.path.realpath(PIE_BINARY)) == 1, opened
    assert opened["disassemblers"] == 1
    assert r.loaded is not None and r.loaded.path == PIE_BINARY
    # the fit's ranges and the CFG's: each swept once between the two phases
    assert np.sum(opened["swept"], axis=0).max() == 1, opened["swept"]


def test_bolt_formats_render_from_the_loaded_binary(opened):
    r = annotate(PIE_PROFILE, PIE_BINARY, address_only=True, inference="off")
    text = render(r, "fdata")
    assert text and opened["binaries"].get(os.path.realpath(PIE_BINARY)) == 1


def test_options_object_and_keywords_are_the_same_run():
    a = annotate(PIE_PROFILE, PIE_BINARY, options=AnnotateOptions(inference="off"))
    b = annotate(PIE_PROFILE, PIE_BINARY, inference="off")
    assert a.to_json() == b.to_json()


def test_statuses_are_an_enum_that_prints_as_before():
    r = annotate(PIE_PROFILE, PIE_BINARY, inference="off")
    assert r.status is Status.OK and r.to_json()["status"] == "ok"
    assert [s.value for s in Status] == ["ok", "partial", "nothing_mapped", "refused"]


def test_cli_choices_are_the_library_constants():
    from bbmap.cli.annotate import annotate_cmd

    choices = {p.name: tuple(p.type.choices) for p in annotate_cmd.params
               if hasattr(p.type, "choices")}
    assert choices["inference"] == INFERENCE_MODES
    assert choices["inference_solver"] == SOLVER_CHOICES
    assert choices["sample_model"] == SAMPLE_MODEL_CHOICES


def test_the_result_is_frozen_and_phases_make_new_ones():
    r = annotate(PIE_PROFILE, PIE_BINARY, name_override="layout.pie")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = Status.REFUSED  # type: ignore[misc]
    raw = annotate(PIE_PROFILE, PIE_BINARY, name_override="layout.pie", inference="off")
    assert raw.count_source == "none" and r.count_source == "inferred"
    assert r.loaded is not None and raw.fit == r.fit


@pytest.mark.parametrize("argv", [
    ["annotate", "--format", "text"], ["annotate", "--format", "json"],
    ["annotate", "--format", "fdata"], ["annotate", "--format", "propeller"],
    ["cfg", "--format", "svg", "-o", "@OUT/c.svg"], ["cfg", "--format", "dot", "-o", "@OUT/c.dot"],
    ["layout", "--cc-profile", "@OUT/cc.txt"],
], ids=lambda a: "-".join(x for x in a if not x.startswith(("-", "@"))))
def test_cli_walk_opens_and_disassembles_the_binary_once(opened, argv, tmp_path):
    """From the command line to the output file: one Binary, one disassembler, whatever
    the phases (fit by name, inference, BOLT's function table, pictures) read."""
    from bbmap.cli import main

    cmd, *rest = argv
    args = [cmd, PIE_PROFILE, PIE_BINARY, "--name", "layout.pie",
            *[a.replace("@OUT", str(tmp_path)) for a in rest]]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert opened["binaries"].get(os.path.realpath(PIE_BINARY)) == 1, opened
    assert opened["disassemblers"] == 1, opened


@pytest.mark.parametrize("argv, flag", [
    (["annotate", "--format", "propeller", "--top", "3"], "--top"),
    (["annotate", "--format", "symorder", "--cluster-version", "0"], "--cluster-version"),
    (["annotate", "--format", "text", "--cluster-version", "0"], "--cluster-version"),
    (["annotate", "--format", "fdata", "--inference", "on"], "--inference"),
    (["annotate", "--format", "bolt-preagg", "--sample-model", "time"], "--sample-model"),
    (["annotate", "--format", "fdata", "--inference-solver", "builtin"],
     "--inference-solver"),
    (["annotate", "--format", "aggregate", "-o", "@OUT/a.parquet", "--no-cache"],
     "--no-cache"),
    (["annotate", "--format", "aggregate", "-o", "@OUT/a.parquet", "--force"], "--force"),
    (["layout", "--cluster-version", "0"], "--cluster-version"),
    (["layout", "--verbose"], "--verbose"),
    (["cfg", "--format", "dot", "--function", "main", "--top", "2", "-o", "@OUT/c.dot"],
     "--top"),
])
def test_flags_the_output_does_not_read_are_refused(argv, flag, tmp_path):
    from bbmap.cli import main

    cmd, *rest = argv
    args = [cmd, PIE_PROFILE, PIE_BINARY, *[a.replace("@OUT", str(tmp_path)) for a in rest]]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    line = one_error_line(r.output)
    assert flag in line and "does not read" in line, line
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("argv", [
    ["annotate", "--format", "json", "--top", "3", "--inference", "off"],
    ["annotate", "--format", "propeller", "--cluster-version", "0"],
    ["annotate", "--format", "fdata", "--force"],
    ["layout", "--cc-profile", "@OUT/cc.txt", "--cluster-version", "0", "--verbose"],
    ["cfg", "--format", "svg", "--function", "main", "--top", "2", "-o", "@OUT/c.svg"],
])
def test_flags_the_output_reads_are_taken(argv, tmp_path):
    from bbmap.cli import main

    cmd, *rest = argv
    args = [cmd, PIE_PROFILE, PIE_BINARY, *[a.replace("@OUT", str(tmp_path)) for a in rest]]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output


def test_fleet_refuses_derived_flags_without_json(tmp_path):
    from bbmap.cli import main

    for extra, flag in ((["--inference", "on"], "--inference"),
                        (["--json", str(tmp_path / "f.json"), "--no-cache"], "--no-cache")):
        r = CliRunner().invoke(main, ["fleet", PIE_PROFILE, PIE_BINARY, "-o",
                                      str(tmp_path / "f.parquet"), *extra])
        assert r.exit_code == 2, r.output
        assert flag in one_error_line(r.output)
