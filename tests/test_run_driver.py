"""The driver of a run (bbmap/run.py): the binary opened once and one disassembler for the
whole run, whatever phases need its code; the result carries the binary to the renderers;
the options object, the CLI's choices and the statuses are the library's own."""

from __future__ import annotations

import os

import pytest
from helpers import PIE_BINARY, PIE_PROFILE, have_corpus

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
