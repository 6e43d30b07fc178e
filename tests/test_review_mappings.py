"""Review regressions: choosing the binary's mappings (spec/address-translation.md)."""

from __future__ import annotations

from types import SimpleNamespace

from test_mappings_synthetic import BID, BIN, classify, mmap

from bbmap.mappings import IN_BINARY, ProfileMappings


def test_mmap2_with_our_build_id_is_the_binary_when_the_path_also_had_another_build():
    # The same path held two builds while recording (rebuilt and rerun): the BUILD_ID
    # feature lists the old one first, the new run's MMAP2 carries the binary's build-id.
    # Spec: "an MMAP2 carrying a build-id is the binary iff it matches".
    old = "bb" * 20
    feat = [SimpleNamespace(pid=5, misc=2, build_id=old, filename="/build/out/layout.pie")]
    rec = [mmap(1, 6, 0x400000, 0x1000, 0, "/build/out/layout.pie", build_id=BID)]
    pm = ProfileMappings.from_perf(rec, BIN, build_ids=feat)
    assert pm.evidence.matched_by == "build-id"
    assert len(pm.binary_mappings()) == 1
    assert list(classify(pm, [6], [0x400010]).where) == [IN_BINARY]
    # and the other order (our MMAP2 first, then an MMAP2 of the old build at that path)
    rec2 = [mmap(1, 7, 0x500000, 0x1000, 0, "/build/out/layout.pie", build_id=old),
            mmap(2, 6, 0x400000, 0x1000, 0, "/build/out/layout.pie", build_id=BID)]
    pm2 = ProfileMappings.from_perf(rec2, BIN)
    assert [m.pid for m in pm2.binary_mappings()] == [6]
