"""The sample model follows the event (bbmap/inference/events.py), every output names it,
and a Parquet aggregate annotates to the same inferred counts as the perf.data files it
was made from."""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers import PIE_BINARY, PIE_PROFILE, cli, have_corpus

from bbmap.formats import perfdata as fmt
from bbmap.inference.events import event_model, profile_model, split_event
from bbmap.perf.attrs import default_event_name


@pytest.mark.parametrize(("name", "model", "precise"), [
    ("instructions:upp", "precise", 2),
    ("instructions:ppp", "precise", 3),
    ("instructions:P", "precise", 3),
    ("cpu_core/instructions/pp", "precise", 2),
    ("inst_retired.prec_dist", "precise", 0),
    ("inst_retired.any:pp", "precise", 2),
    ("ibs_op//", "precise", 0),
    ("arm_spe_0//", "precise", 0),
    ("instructions:u", "time", 0),  # no precise_ip: the interrupt skids like a timer's
    ("cpu-clock", "time", 0),
    ("cpu-clock:u", "time", 0),
    ("task-clock", "time", 0),
    ("cycles", "time", 0),
    ("cycles:ppp", "time", 3),  # precise cycles still sample time
    ("cpu/event=0xc0,umask=0x1/pp", "time", 2),  # a raw event: not known to count insns
    ("branch-misses", "time", 0),
])
def test_event_models(name: str, model: str, precise: int) -> None:
    em = event_model(name)
    assert (em.model, em.precise) == (model, precise), em
    assert em.why


def test_unknown_events_say_so() -> None:
    assert "neither" in event_model("cache-misses:u").why
    assert profile_model([]).model == "time"
    assert profile_model(["instructions:pp", "cpu-clock"]).model == "time"
    assert profile_model(["instructions:pp", "inst_retired.prec_dist"]).model == "precise"


def test_split_event() -> None:
    assert split_event("instructions:upp") == ("instructions", "upp")
    assert split_event("cpu/event=0xc0,umask=1/pp") == ("cpu/event=0xc0,umask=1", "pp")
    assert split_event("cycles") == ("cycles", "")


def test_names_without_event_desc_carry_precise_ip() -> None:
    """A file without perf's EVENT_DESC: the name bbmap makes from the attr says the
    precise_ip level, as perf's modifiers would."""
    flags = fmt.F_EXCLUDE_KERNEL | (2 << fmt.F_PRECISE_IP_SHIFT)
    assert default_event_name(0, 1, flags) == "instructions:upp"
    assert default_event_name(1, 0, fmt.F_EXCLUDE_KERNEL) == "cpu-clock:u"
    assert event_model(default_event_name(0, 1, flags)).model == "precise"


@have_corpus
def test_outputs_name_the_model_and_event(tmp_path) -> None:  # noqa: ANN001
    code, out = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    sm = doc["sample_model"]
    assert sm["model"] == "time" and sm["event"].startswith("cpu-clock")
    assert sm["relative"] is True and sm["confidence"] == 0.95
    blk = doc["functions"][0]["blocks"][0]
    lo, hi = blk["interval"]
    assert lo <= blk["count"] and (hi is None or blk["count"] <= hi)
    code, out = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    model = [r for r in rows if r["record"] == "sample_model"]
    assert len(model) == 1 and model[0]["id"] == "time"
    assert model[0]["function"].startswith("cpu-clock")
    b = next(r for r in rows if r["record"] == "block" and r["source"] == "inferred")
    assert int(b["low"]) <= int(b["count"])
    code, out = cli("annotate", PIE_PROFILE, PIE_BINARY)
    assert "counts are estimates" in out and "relative" in out and "time" in out
    code, out = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json",
                       "--sample-model", "precise")
    assert json.loads(out)["sample_model"]["model"] == "precise"
    assert "--sample-model" in cli("annotate", "--help")[1]
    assert tmp_path.is_dir()


@have_corpus
def test_aggregate_annotates_to_the_same_inferred_counts(tmp_path) -> None:  # noqa: ANN001
    """An aggregate keeps the IP histogram and the event names, so its inferred counts
    are those of the perf.data file it was made from (before: the insn model)."""
    pytest.importorskip("pyarrow")
    agg = tmp_path / "one.parquet"
    code, err = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "aggregate",
                       "-o", str(agg))
    assert code == 0, err
    code, direct = cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json")
    code2, via = cli("annotate", str(agg), PIE_BINARY, "--format", "json")
    assert code == code2 == 0
    a, b = json.loads(direct), json.loads(via)
    assert a["sample_model"] == b["sample_model"]
    assert a["functions"] == b["functions"]
