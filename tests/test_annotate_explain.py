"""Diagnosis messages: the evidence they show and the flag they name."""

from __future__ import annotations

import numpy as np

from bbmap.aggregate.accounting import Accounting
from bbmap.aggregate.explain import Evidence, build_ids_match, diagnose, flag_advice


def acct(**buckets) -> Accounting:
    a = Accounting()
    names = ["in_block", "in_function_no_block", "outside_function", "other_dso", "kernel",
             "unmapped", "other_pid"]
    a.samples = np.array([buckets.get(n, 0) for n in names], np.int64)
    a.total_samples = int(a.samples.sum())
    return a


def ev(**kw) -> Evidence:
    base = dict(binary="/x/prog", binary_build_id="ab" * 20, has_block_map=True,
                producer="clang version 22.1.8")
    base.update(kw)
    return Evidence(**base)


def test_flag_advice_by_producer():
    assert "clang 22 -fbasic-block-address-map" in flag_advice("clang version 22.1.8")
    assert "clang 14 -fbasic-block-sections=labels" in flag_advice("Debian clang version 14.0.6")
    assert "GCC does not emit" in flag_advice("GCC: (Debian 12.2.0-14) 12.2.0")
    assert "-fbasic-block-address-map" in flag_advice(None)


def test_build_id_padding_ignored():
    assert build_ids_match("abcd" + "00" * 18, "abcd")
    assert not build_ids_match("abcd", "abce")


def test_each_reason_names_its_evidence():
    s, m = diagnose(acct(kernel=9), ev())
    assert s == "nothing_mapped" and "all 9 samples are kernel samples" in m[0].message
    s, m = diagnose(acct(other_dso=5), ev(profile_build_ids=[("/old/prog", "cd" * 20)]))
    assert s == "nothing_mapped" and "cd" * 20 in m[0].message and "ab" * 20 in m[0].message
    a = acct(other_dso=5)
    a.dso_samples = {"/usr/lib/libc.so.6": 5}
    s, m = diagnose(a, ev())
    assert "never appears" in m[0].message and "/usr/lib/libc.so.6 (5)" in m[0].message
    s, m = diagnose(acct(in_function_no_block=7), ev(has_block_map=False, binary_mmaps=1,
                                                     producer="GCC: (Debian 12.2.0) 12.2.0"))
    assert s == "nothing_mapped" and "no basic-block address map" in m[0].message
    assert "GCC" in m[0].message
    s, m = diagnose(acct(in_function_no_block=7), ev(binary_mmaps=1,
                                                     hot_no_block=[("memcpy_impl", 7)]))
    assert s == "nothing_mapped" and "memcpy_impl (7)" in m[0].message
    s, m = diagnose(acct(in_block=90, in_function_no_block=10), ev(binary_mmaps=1))
    assert s == "partial" and "10 of 100" in m[0].message
    s, m = diagnose(acct(in_block=100), ev(binary_mmaps=1))
    assert s == "ok" and not m


def test_lbr_in_blocks_is_a_result_even_when_no_ip_sample_is():
    """Every IP sample interrupted the kernel, but the branch stacks are user code: the
    block counts come from LBR, so this is partial with a warning, not nothing_mapped."""
    a = acct(kernel=9)
    a.total_branches = 40
    a.branches[0] = 30  # in_block
    a.branches[4] = 10  # kernel
    s, m = diagnose(a, ev())
    assert s == "partial"
    assert all(d.severity == "warning" for d in m)
    assert any("come from the 30 LBR records" in d.message for d in m)
    a.branches[0], a.branches[4] = 0, 40  # no record in a block: IP verdicts stand
    assert diagnose(a, ev())[0] == "nothing_mapped"


def test_no_decodable_sample_names_where_the_reader_first_failed(tmp_path):
    """A damaged data size in a pipe-mode profile (a fuzzer's mutant of the corpus's
    c22-addrmap-pie-pipe): every SAMPLE record is there but none fits the attrs.  Was: the
    error line named neither the file nor an offset ("the reader's warnings say which and
    where"); now the profile and the offset of the reader's first fault."""
    import os
    import struct

    from helpers import CORPUS, PIE_BINARY, cli, one_error_line

    src = CORPUS / "profiles" / "c22-addrmap-pie-pipe" / "perf.data"
    if not (src.exists() and os.path.exists(PIE_BINARY)):
        import pytest

        pytest.skip("corpus not built")
    d = bytearray(src.read_bytes())
    struct.pack_into("<Q", d, 0x30, 0xFFFFFFFFFFFFFFFF)
    p = tmp_path / "perf.data"
    p.write_bytes(bytes(d))
    code, out = cli("annotate", str(p), PIE_BINARY, "--inference", "off")
    line = one_error_line(out)
    assert code == 1, out
    assert line.startswith(f"bbmap: error: {p}: data: offset 0x"), line
    assert "none of the 3015 SAMPLE records could be decoded" in line, line
