"""``bbmap verify BINARY --profile PERF_DATA...``: exit codes, text and JSON, refusals,
and the pytest fixture a compiler test suite would use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bbmap.cli import main
from tests.conftest import CORPUS, corpus_binary

TRAIN = CORPUS / "lbr/c22-pgoflip-pie-lbr-train/perf.data"
SHIFT = CORPUS / "lbr/c22-pgoflip-pie-lbr-shift/perf.data"
PLAIN = CORPUS / "profiles/c22-pgoflip-pie-train-plain/perf.data"
STEADY = ["--function", "pf_low_bits", "--function", "pf_every"]


@pytest.fixture(scope="module")
def flip() -> str:
    if not SHIFT.exists():
        pytest.skip("pgoflip LBR profiles not built")
    return str(corpus_binary("c22-pgoflip-pie"))


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, ["verify", *args])
    return r.exit_code, r.stdout, r.stderr


def test_matching_functions_exit_0(flip: str) -> None:
    code, out, _ = run(flip, "--profile", str(TRAIN), *STEADY)
    assert code == 0, out
    assert ": OK" in out.splitlines()[0]
    assert "pf_low_bits" in out and "pf_digits" not in out


def test_shifted_input_exits_1_with_the_ranking(flip: str) -> None:
    code, out, err = run(flip, "--profile", str(SHIFT), "--top", "3")
    # every exit 1 says why on stderr, in one line (the ranking is on stdout)
    assert code == 1 and err.count("\n") == 1 and "does not match the profile" in err, err
    assert "MISMATCHED" in out.splitlines()[0]
    rows = [ln for ln in out.splitlines() if ln.strip()[:2] in ("1 ", "2 ", "3 ")]
    assert len(rows) >= 3 and "... and" in out
    assert any(f in rows[0] for f in ("pf_digits", "pf_magnitude", "pf_sign", "pf_apply"))


def test_json_is_keyed_by_function_and_block(flip: str) -> None:
    code, out, _ = run(flip, "--profile", str(SHIFT), "--json")
    assert code == 1
    doc = json.loads(out)
    sign = doc["functions"]["pf_sign"]
    assert sign["branches"]["0"]["verdict"] == "mismatched"
    succ = sign["branches"]["0"]["successors"][0]
    assert set(succ) >= {"id", "believed", "measured", "interval", "count", "verdict"}
    assert set(sign["blocks"]) and sign["entry"]["verdict"] in ("matched", "mismatched",
                                                                "unknown")
    assert doc["count_source"] == "lbr" and doc["options"]["threshold"] == 0.2
    assert doc["worst_branches"][0]["off_by_at_least"] >= doc["worst_branches"][-1][
        "off_by_at_least"]
    assert doc["summary"]["branches"]["mismatched"] == len(
        [r for r in doc["worst_branches"] if r["source"] == "compiler"])


def test_profiles_after_the_flag_and_in_any_order_give_the_same_bytes(flip: str,
                                                                      tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run(flip, "--profile", str(TRAIN), str(SHIFT), "--json", "-o", str(a))[0] == 1
    assert run("--profile", str(SHIFT), "--profile", str(TRAIN), flip, "--json",
               "-o", str(b))[0] == 1
    assert a.read_bytes() == b.read_bytes()
    assert json.loads(a.read_text())["samples"] > 900


def test_threshold_and_confidence_change_verdicts(flip: str) -> None:
    loose = json.loads(run(flip, "--profile", str(TRAIN), "--json", "--threshold",
                           "0.9")[1])
    assert loose["summary"]["branches"]["mismatched"] == 0
    tight = json.loads(run(flip, "--profile", str(TRAIN), "--json", "--threshold",
                           "0.02", "--confidence", "0.5")[1])
    assert tight["summary"]["branches"]["mismatched"] > 3


@pytest.mark.parametrize("args, msg", [
    (["--threshold", "0.1"], "only make sense with --profile"),
    (["--check", "md-return", "--profile", str(TRAIN)], "two commands"),
    (["--profile", str(TRAIN), "--threshold", "1.5"], "threshold"),
])
def test_usage_errors_exit_2(flip: str, args: list[str], msg: str) -> None:
    code, _, err = run(flip, *args)
    assert code == 2 and msg in err


def test_two_binaries_are_refused(flip: str) -> None:
    code, _, err = run(flip, flip, "--profile", str(TRAIN))
    assert code == 2 and "one BINARY" in err


def test_output_over_an_input_is_refused(flip: str) -> None:
    code, _, err = run(flip, "--profile", str(TRAIN), "-o", str(TRAIN))
    assert code == 2 and "refusing to overwrite" in err


def test_missing_profile_exits_3(flip: str, tmp_path: Path) -> None:
    code, _, err = run(flip, "--profile", str(tmp_path / "nope.data"))
    assert code == 3 and "nope.data" in err and "Traceback" not in err


def test_binary_without_pgo_map_is_an_input_problem() -> None:
    b = corpus_binary("c22-addrmap-pie")
    perf = CORPUS / "lbr/c22-addrmap-pie-lbr/perf.data"
    code, out, err = run(str(b), "--profile", str(perf))
    assert code == 1 and "no PGO analysis map" in err and "FAILED" in out


def test_ip_only_profile_is_judged_on_inferred_counts(flip: str) -> None:
    if not PLAIN.exists():
        pytest.skip("cpu-clock profile not built")
    code, out, _ = run(flip, "--profile", str(PLAIN))
    assert "INFERRED from IP samples" in out.splitlines()[0]
    assert "indicative" in out
    doc = json.loads(run(flip, "--profile", str(PLAIN), "--json")[1])
    assert doc["count_source"] == "inferred" and doc["branch_records"] == 0
    b = doc["summary"]["branches"]
    # the evidence is the IP samples behind each estimate, the least-sampled successor's:
    # most branches of this small program stay unknown rather than falsely decided
    assert b["unknown"] >= b["matched"] + b["mismatched"]
    # time samples cannot decide a branch share (the counts' intervals carry the time
    # model's spread): unknown, never a false "mismatched" (exact counts: 0.69)
    assert doc["functions"]["pf_digits"]["branches"]["1"]["verdict"] == "unknown"
    assert b["mismatched"] == 0
    # ... while a block the compiler believed never runs, yet sampled, is decided: its
    # samples prove it ran (exact counts: 0.69 of the entry's executions, believed 0)
    assert doc["functions"]["pf_digits"]["blocks"]["3"]["verdict"] == "mismatched"
    assert code == 1


def test_assert_refuses_inferred_unless_allowed(flip: str) -> None:
    if not PLAIN.exists():
        pytest.skip("cpu-clock profile not built")
    import bbmap

    with pytest.raises(AssertionError, match="no branch stacks"):
        bbmap.assert_pgo_map_matches(flip, PLAIN, functions=["pf_sign"])
    bbmap.assert_pgo_map_matches(flip, PLAIN, functions=["pf_sign"], allow_inferred=True)


def test_unknown_function_is_an_error(flip: str) -> None:
    code, _, err = run(flip, "--profile", str(TRAIN), "--function", "no_such_fn")
    assert code == 1 and "no_such_fn" in err


# ------------------------------------------------------------------ the pytest fixture
def test_fixture_passes_on_matching_functions(bb_map_verifier, flip: str) -> None:
    rep = bb_map_verifier.profile(flip, TRAIN, functions=["pf_low_bits", "pf_sign"])
    assert rep.summary()["branches"]["matched"] >= 2


def test_fixture_fails_naming_the_branch(bb_map_verifier, flip: str) -> None:
    with pytest.raises(pytest.fail.Exception) as ei:
        bb_map_verifier.profile(flip, [TRAIN], functions="pf_digits", threshold=0.1)
    msg = str(ei.value)
    assert "pf_digits block 1 -> 2: believed 0.000, measured 0.6" in msg


def test_fixture_unreadable_profile_is_one_line(bb_map_verifier, flip: str,
                                                tmp_path: Path) -> None:
    bad = tmp_path / "bad.data"
    bad.write_bytes(b"not perf data at all")
    with pytest.raises(pytest.fail.Exception) as ei:
        bb_map_verifier.profile(flip, bad)
    assert "bad.data" in str(ei.value)


def test_assert_api(flip: str) -> None:
    import bbmap

    bbmap.assert_pgo_map_matches(flip, TRAIN, functions=["pf_every"])
    with pytest.raises(AssertionError, match="pf_sign block 0 -> 1"):
        bbmap.assert_pgo_map_matches(flip, SHIFT, functions=["pf_sign"])


def test_inference_off_leaves_an_ip_only_profile_unjudgeable(flip: str) -> None:
    if not PLAIN.exists():
        pytest.skip("cpu-clock profile not built")
    code, out, err = run(flip, "--profile", str(PLAIN), "--inference", "off")
    assert code == 1 and "no branch stacks" in err and "FAILED" in out
    code, _, err = run(flip, "--inference", "on")
    assert code == 2 and "--inference" in err
