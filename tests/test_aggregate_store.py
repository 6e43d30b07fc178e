"""Parquet aggregates (bbmap/aggregate/store.py): exact, order-free merging; every command
that reads perf.data reads aggregates with the same answer as the profiles themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import CORPUS, PIE_BINARY, PIE_PROFILE, cli, cli_stdout

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from bbmap.aggregate import store  # noqa: E402
from bbmap.outputs.jsonout import render_json  # noqa: E402
from bbmap.run import Session  # noqa: E402

LBR = os.path.join(CORPUS, "lbr", "c22-addrmap-pie-lbr", "perf.data")
TWO = os.path.join(CORPUS, "profiles", "c22-addrmap-pie-two-processes", "perf.data")
NOPIE = os.path.join(CORPUS, "bin", "clang-22", "addrmap", "layout.nopie")


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


@pytest.fixture(scope="module")
def bad_profiles(tmp_path_factory):
    """A truncated profile (damaged: partly counted) and one that is not perf data."""
    d = tmp_path_factory.mktemp("bad")
    with open(PIE_PROFILE, "rb") as fh:
        raw = fh.read()
    trunc = d / "trunc.data"
    trunc.write_bytes(raw[: len(raw) // 2])
    garbage = d / "garbage.data"
    garbage.write_bytes(b"not a profile at all" * 100)
    return str(trunc), str(garbage)


@pytest.fixture(scope="module")
def session():
    return Session(PIE_BINARY, cluster_stats=True, keep_going=True, hash_profiles=True,
                   addresses=True)


@pytest.fixture(scope="module")
def parts(session, bad_profiles):
    """One aggregate per profile: plain, LBR, two processes, truncated, unreadable."""
    out = []
    for p in (PIE_PROFILE, LBR, TWO, *bad_profiles):
        s = session.fresh()
        s.add(p)
        out.append(s.aggregate())
    return out


@pytest.mark.slow
def test_round_trip_is_byte_identical(parts, tmp_path):
    for i, a in enumerate(parts):
        f = tmp_path / f"{i}.agg"
        store.write_aggregate(a, str(f))
        assert f.read_bytes() == store.aggregate_bytes(a)
        assert store.aggregate_bytes(store.read_aggregate(str(f))) == f.read_bytes()


@pytest.mark.slow
def test_merge_orders_and_groupings_give_identical_bytes(parts):
    a, b, c, d, e = parts
    m = store.merge
    flat = store.aggregate_bytes(m([a, b, c, d, e]))
    assert store.aggregate_bytes(m([e, d, c, b, a])) == flat
    assert store.aggregate_bytes(m([m([c, a]), m([e, m([b, d])])])) == flat
    assert store.aggregate_bytes(m([m([d, b, e]), m([a, c])])) == flat


def test_merged_aggregate_gives_the_one_process_json(session, parts, bad_profiles):
    one = session.fresh()
    for p in (LBR, *bad_profiles, TWO, PIE_PROFILE):  # any order: profiles are sorted
        one.add(p)
    direct = render_json(one.result())
    via = session.fresh()
    via.add_aggregate(store.merge(parts[::-1]), "merged")
    assert render_json(via.result()) == direct
    doc = json.loads(direct)
    assert [p["path"] for p in doc["profiles"]] == sorted(p["path"] for p in doc["profiles"])
    errors = {p["path"]: p.get("error") for p in doc["profiles"]}
    assert "not perf data" in errors[bad_profiles[1]]
    assert any(w["severity"] == "error" and w.get("file") == bad_profiles[0]
               for w in doc["warnings"])


def test_cluster_moments_and_addresses_survive_merging(session, parts):
    one = session.fresh()
    for p in (PIE_PROFILE, LBR, TWO):
        one.add(p)
    want = one.result().cluster
    via = session.fresh()
    via.add_aggregate(store.merge(parts[:3]), "merged")
    got = via.result().cluster
    for k in ("x2", "o2", "xe", "xE", "edge_key", "k2", "ko", "kx"):
        assert np.array_equal(getattr(got, k), getattr(want, k)), k
    assert got.E2 == want.E2 > 0
    wa, ga = one.result().addresses, via.result().addresses
    for k in ("trace_from", "trace_to", "trace_end", "trace_count", "trace_mispred", "ip_addr",
              "ip_samples"):
        assert np.array_equal(getattr(ga, k), getattr(wa, k)), k
    assert (ga.events, ga.entries, ga.kernel, ga.external) == (
        wa.events, wa.entries, wa.kernel, wa.external)
    assert len(ga.trace_count) and len(ga.ip_addr)


def test_the_file_is_plain_parquet_for_sql_engines(parts, tmp_path):
    f = tmp_path / "lbr.agg"
    store.write_aggregate(parts[1], str(f))
    t = pq.read_table(str(f))
    meta = t.schema.metadata
    assert meta[b"bbmap.format_version"] == str(store.FORMAT_VERSION).encode()
    assert meta[b"bbmap.build_id"] == b"3f47b43925492b1e415945c0467ba65fa3eca0b1"
    rows = t.to_pylist()
    edges = [r for r in rows if r["section"] == "edge"]
    assert edges and {r["kind"] for r in edges} <= {"branch", "call", "return", "other",
                                                    "fallthrough"}
    prof = [r for r in rows if r["section"] == "profile"]
    assert len(prof) == 1 and len(prof[0]["sha256"]) == 64
    assert prof[0]["size"] == os.path.getsize(LBR)
    blocks = [r for r in rows if r["section"] == "block"]
    assert sum(r["count"] for r in blocks) == int(parts[1].blocks.cols["count"].sum())
    assert all(r["block_id"] is not None and r["address"] for r in blocks)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), min_size=12, max_size=12), min_size=1,
                max_size=6), st.randoms())
@pytest.mark.slow
def test_sparse_sum_is_the_dense_sum_in_any_order(rows, rnd):
    parts = [store.Sparse.of_dense({"c": np.array(r, np.int64)}) for r in rows]
    rnd.shuffle(parts)
    got = store.Sparse.sum(parts).dense(12)["c"]
    assert np.array_equal(got, np.sum(np.array(rows, np.int64), axis=0))


# ----------------------------------------------------------------------------- CLI
def test_cli_annotate_aggregate_merge_and_json(tmp_path, bad_profiles):
    a, b, c = (str(tmp_path / n) for n in ("a.agg", "b.agg", "c.agg"))
    assert cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "aggregate", "-o", a)[0] == 0
    assert cli("annotate", LBR, PIE_BINARY, "--format", "aggregate", "-o", b)[0] == 0
    code, out = cli("annotate", "--keep-going", *bad_profiles, PIE_BINARY, "--format",
                    "aggregate", "-o", c)
    assert code == 1 and "incomplete: 2 of 2 profiles" in out
    m1, m2 = str(tmp_path / "m1.agg"), str(tmp_path / "m2.agg")
    assert cli("merge", a, b, c, "-o", m1)[0] == 1  # complete merge of incomplete inputs
    assert cli("merge", c, a, b, "-o", m2)[0] == 1
    assert _read(m1) == _read(m2)
    j1, j2 = str(tmp_path / "j1.json"), str(tmp_path / "j2.json")
    assert cli("annotate", m1, PIE_BINARY, "--format", "json", "-o", j1)[0] == 1
    assert cli("annotate", "--keep-going", LBR, PIE_PROFILE, *bad_profiles, PIE_BINARY,
               "--format", "json", "-o", j2)[0] == 1
    assert _read(j1) == _read(j2)


def test_layout_reads_aggregates(tmp_path):
    agg = str(tmp_path / "lbr.agg")
    assert cli("annotate", LBR, PIE_BINARY, "--format", "aggregate", "-o", agg)[0] == 0
    l1, l2 = str(tmp_path / "l1"), str(tmp_path / "l2")
    assert cli("layout", agg, PIE_BINARY, "-o", l1)[0] == 0
    assert cli("layout", LBR, PIE_BINARY, "-o", l2)[0] == 0
    assert _read(l1) == _read(l2)


def test_merge_refuses_other_binaries_naming_both_build_ids(tmp_path):
    a, b = str(tmp_path / "pie.agg"), str(tmp_path / "nopie.agg")
    assert cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "aggregate", "-o", a)[0] == 0
    nopie_prof = os.path.join(CORPUS, "profiles", "c22-addrmap-nopie-plain", "perf.data")
    assert cli("annotate", nopie_prof, NOPIE, "--format", "aggregate", "-o", b)[0] == 0
    code, out = cli("merge", a, b, "-o", str(tmp_path / "m.agg"))
    assert code == 2
    assert "3f47b43925492b1e415945c0467ba65fa3eca0b1" in out
    assert "f41bcbf39fc73bd294f5520ae6b3b246704c5959" in out
    code, out = cli("annotate", a, NOPIE, "--format", "json")
    assert code == 2 and "different binaries" in out
    assert not os.path.exists(tmp_path / "m.agg")


def test_damaged_and_foreign_files_are_clear_errors(tmp_path):
    a = str(tmp_path / "a.agg")
    assert cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "aggregate", "-o", a)[0] == 0
    raw = _read(a)
    cut = tmp_path / "cut.agg"
    cut.write_bytes(raw[: len(raw) // 2])
    code, out = cli("merge", a, str(cut), "-o", str(tmp_path / "m.agg"))
    assert code == 3 and "cut.agg" in out and "Traceback" not in out
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), str(foreign))
    code, out = cli("annotate", str(foreign), PIE_BINARY)
    assert code == 3 and "not a bbmap aggregate" in out
    t = pq.read_table(a)
    meta = dict(t.schema.metadata)
    meta[b"bbmap.format_version"] = b"99"
    newer = tmp_path / "newer.agg"
    pq.write_table(t.replace_schema_metadata(meta), str(newer))
    code, out = cli("merge", str(newer), a, "-o", str(tmp_path / "m.agg"))
    assert code == 3 and "newer" in out
    assert cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "aggregate")[0] == 2  # no -o


def test_a_string_column_read_back_as_bytes_is_named(tmp_path):
    """A one-bit flip in the footer can drop a column's UTF-8 annotation: pyarrow then
    reads it as bytes.  Found by the aggregate fuzz test (merge failed comparing str with
    bytes); now the column is named and the exit says the input is bad."""
    a = str(tmp_path / "a.agg")
    assert cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "aggregate", "-o", a)[0] == 0
    t = pq.read_table(a)
    i = t.schema.get_field_index("sha256")
    t = t.set_column(i, pa.field("sha256", pa.binary()), t.column(i).cast(pa.binary()))
    bad = tmp_path / "bytes.agg"
    pq.write_table(t, str(bad))
    for args in (("merge", str(bad), a, "-o", str(tmp_path / "m.agg")),
                 ("annotate", str(bad), PIE_BINARY)):
        code, out = cli(*args)
        assert code == 3 and "column sha256 holds binary, not string" in out, out


@pytest.mark.slow
def test_core_commands_do_not_import_pyarrow_or_dask():
    code = ("import sys; from click.testing import CliRunner; from bbmap.cli import main; "
            f"r = CliRunner().invoke(main, ['annotate', {PIE_PROFILE!r}, {PIE_BINARY!r}, "
            "'--format', 'json']); assert r.exit_code == 0, r.output; "
            "bad = [m for m in ('pyarrow', 'dask', 'distributed') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
    code = ("import sys; from click.testing import CliRunner; from bbmap.cli import main; "
            "r = CliRunner().invoke(main, ['--version']); assert r.exit_code == 0; "
            "bad = [m for m in ('numpy', 'pyarrow', 'dask') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_verify_profile_reads_an_aggregate_with_its_moments(tmp_path):
    """issue 16's design effects need the per-stack moments: an aggregate carries them, so
    verify --profile judges it exactly as it judges the profile."""
    exe = os.path.join(CORPUS, "bin", "clang-22", "pgoflip", "pgoflip.pie")
    prof = os.path.join(CORPUS, "lbr", "c22-pgoflip-pie-lbr-train", "perf.data")
    if not (os.path.exists(exe) and os.path.exists(prof)):
        pytest.skip("pgoflip corpus case absent")
    agg = str(tmp_path / "train.agg")
    assert cli("annotate", prof, exe, "--format", "aggregate", "-o", agg)[0] == 0
    code_a, a = cli_stdout("verify", exe, "--profile", agg, "--json")
    code_p, p = cli_stdout("verify", exe, "--profile", prof, "--json")
    da, dp = json.loads(a), json.loads(p)
    assert code_a == code_p and da.pop("profiles") == [agg] and dp.pop("profiles") == [prof]
    assert da == dp


def test_damaged_parquet_names_section_and_offset(tmp_path):
    """pyarrow's errors name no place in the file: the reader checks the Parquet frame
    (size, closing magic, footer length) and names the footer for the rest."""
    pytest.importorskip("pyarrow")
    from bbmap.aggregate.store import read_aggregate
    from bbmap.errors import BBMapError

    agg = tmp_path / "a.parquet"
    assert cli("annotate", PIE_PROFILE, PIE_BINARY, "--format", "aggregate",
               "-o", str(agg))[0] == 0
    data = agg.read_bytes()
    import pyarrow.parquet as pq

    md = pq.ParquetFile(agg).metadata
    col = md.row_group(0).column(0)
    first_page = col.dictionary_page_offset or col.data_page_offset
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")

    def damaged(name: str, b: bytes) -> BBMapError:
        p = tmp_path / name
        p.write_bytes(b)
        with pytest.raises(BBMapError) as ei:
            read_aggregate(str(p))
        return ei.value

    cases = {
        "short": (data[:10], "file", 10),
        "tail": (data[:-4] + b"XXXX", "Parquet footer", len(data) - 4),
        "footer": (data[:footer] + bytes(b ^ 0xFF for b in data[footer:footer + 24])
                   + data[footer + 24:], "Parquet footer (file metadata)", footer),
        "chunk": (data[:first_page + 4] + bytes(64) + data[first_page + 68:],
                  "Parquet footer (file metadata)", footer),
    }
    for name, (b, section, offset) in cases.items():
        d = damaged(name, b).diagnostic
        assert (d.section, d.offset) == (section, offset), name
