"""``annotate|layout --profiled-binary OLD`` and ``verify --cc-profile`` on corpus/stale's
real releases (spec/stale.md)."""

from __future__ import annotations

import json

from bbmap.cli import main
from tests.helpers import CORPUS, cli, cli_stdout, one_error_line

STALE = CORPUS / "stale"
OLD, NEW = str(STALE / "bin" / "v1-O2"), str(STALE / "bin" / "v2-O2")
PERF = str(STALE / "profiles" / "v1-O2.perf.data")
UNIQ_NEW = "__uniq.300945515518545042383253058934608843049"


def test_annotate_json_for_the_new_build(tmp_path) -> None:  # noqa: ANN001
    rep = tmp_path / "carry.json"
    code, out = cli_stdout("annotate", PERF, NEW, "--profiled-binary", OLD, "--format",
                           "json", "--carry-report", str(rep))
    assert code == 0, out
    doc = json.loads(out)
    assert doc["binary"] == NEW
    names = [f["name"] for f in doc["functions"]]
    assert any("classify" in n for n in names)
    assert not any("retire" in n for n in names)  # gone in the new build
    carry = json.loads(rep.read_text())
    assert carry["profiled_binary"] == OLD and carry["binary"] == NEW
    assert 0.9 < carry["carried_share"] < 1 and not carry["too_little"]
    assert carry["functions"][0]["share"]["dropped"] == 1.0


def test_layout_writes_the_new_builds_names_and_ids(tmp_path) -> None:  # noqa: ANN001
    cc = tmp_path / "cc.txt"
    code, out = cli("layout", PERF, NEW, "--profiled-binary", OLD, "--cc-profile", str(cc))
    assert code == 0, out
    text = cc.read_text()
    assert UNIQ_NEW in text and "retire" not in text
    # the file fits the binary it was made for
    code, out = cli("verify", NEW, "--cc-profile", str(cc))
    assert code == 0, out


def test_verify_catches_an_old_cluster_file(tmp_path) -> None:  # noqa: ANN001
    cc = tmp_path / "old.txt"
    code, out = cli("layout", PERF, OLD, "--cc-profile", str(cc))
    assert code == 0, out
    code, out = cli("verify", NEW, "--cc-profile", str(cc), "--profiled-binary", OLD)
    assert code == 1, out
    line = one_error_line(out)
    assert "classify" in line and "checksum" in line
    assert "per-module suffix changed" in out
    # the names fixed up to the new suffix, block IDs left as they were: the IDs that
    # now name other blocks are found (classify's early return shifted them)
    old_uniq = [w for w in cc.read_text().split() if "__uniq." in w][0].split("__uniq.")[1]
    renamed = tmp_path / "renamed.txt"
    renamed.write_text(cc.read_text().replace(old_uniq, UNIQ_NEW.split(".")[1]))
    code, out = cli("verify", NEW, "--cc-profile", str(renamed), "--profiled-binary", OLD,
                    "--json")
    assert code == 1
    doc = json.loads(out[out.index("{"):out.rindex("}") + 1])
    why = {m["function"].split(".")[0]: m["reason"] for m in doc["misplaced"]}
    assert "other blocks" in why["_ZL8classifyj"]
    # without the profiled build only what the binary shows is caught
    code, out = cli("verify", NEW, "--cc-profile", str(renamed))
    assert code == 1 and "_ZL8classifyj" not in one_error_line(out)


def test_verify_cc_profile_bad_file(tmp_path) -> None:  # noqa: ANN001
    bad = tmp_path / "bad.txt"
    bad.write_text("v1\nf main\nc 0 x\n")
    code, out = cli("verify", NEW, "--cc-profile", str(bad))
    assert code == 3
    line = one_error_line(out)
    assert str(bad) in line and "offset" in line.lower() or "0xb" in line or "11" in line


def test_bolt_formats_refused_with_profiled_binary() -> None:
    code, out = cli("annotate", PERF, NEW, "--profiled-binary", OLD, "--format", "fdata")
    assert code == 2
    assert "cannot be carried" in one_error_line(out)


def test_too_little_carried_exits_1_unless_forced(tmp_path) -> None:  # noqa: ANN001
    other = str(CORPUS / "demo" / "layout")
    out_file = tmp_path / "x.json"
    code, out = cli("annotate", PERF, other, "--profiled-binary", OLD, "-o", str(out_file))
    assert code == 1
    assert "carried" in out and not out_file.exists()
    code, out = cli("annotate", PERF, other, "--profiled-binary", OLD, "--force",
                    "-o", str(out_file))
    assert code == 0, out
    assert out_file.exists()


def test_profiled_binary_is_the_binary() -> None:
    code, out = cli("annotate", PERF, OLD, "--profiled-binary", OLD)
    assert code == 2 and "is the binary itself" in one_error_line(out)


def test_help_names_the_options() -> None:
    from click.testing import CliRunner

    for cmd in ("annotate", "layout"):
        r = CliRunner().invoke(main, [cmd, "--help"])
        assert "--profiled-binary" in r.output and "--carry-report" in r.output
    r = CliRunner().invoke(main, ["verify", "--help"])
    assert "--cc-profile" in r.output


def test_carried_outputs_are_byte_identical_across_runs(tmp_path) -> None:  # noqa: ANN001
    outs = []
    for i in range(2):
        d, c = tmp_path / f"d{i}.json", tmp_path / f"c{i}.json"
        code, out = cli("annotate", PERF, NEW, "--profiled-binary", OLD, "-o", str(d),
                        "--carry-report", str(c))
        assert code == 0, out
        outs.append((d.read_bytes(), c.read_bytes()))
    assert outs[0] == outs[1]
