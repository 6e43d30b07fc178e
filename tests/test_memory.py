"""bbmap.memory: the malloc tuning the numpy-heavy CLI commands (dump, annotate) apply."""

from __future__ import annotations

import platform

import numpy as np
import pytest
from helpers import PIE_BINARY, PIE_PROFILE, cli, have_corpus


def test_keep_freed_memory_is_taken_by_glibc_and_harmless() -> None:
    from bbmap.memory import keep_freed_memory

    took = keep_freed_memory()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert took is True
    # allocation after the tuning behaves as before (large and small blocks)
    a = np.arange(5 << 20, dtype=np.uint64)
    assert int(a[-1]) == (5 << 20) - 1 and int(np.sort(a[::-1])[0]) == 0


@have_corpus
@pytest.mark.parametrize("args", [
    ("dump", PIE_BINARY),
    ("dump", "--json", PIE_BINARY),
    ("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json", "--inference", "off"),
    ("annotate", PIE_PROFILE, PIE_BINARY, "--format", "csv", "--inference", "off"),
    ("annotate", PIE_PROFILE, PIE_BINARY, "--format", "fdata"),
], ids=["dump", "dump-json", "annotate-json", "annotate-csv", "annotate-fdata"])
def test_commands_tune_malloc_before_their_work(args, monkeypatch) -> None:
    """Each of these commands asks for the tuning once, before it loads the binary (the
    decoder's temporaries are the first to profit)."""
    import bbmap.binary
    import bbmap.memory

    calls: list[str] = []
    real_load = bbmap.binary.load_binary
    monkeypatch.setattr(bbmap.memory, "keep_freed_memory", lambda: calls.append("tune"))
    monkeypatch.setattr(bbmap.binary, "load_binary",
                        lambda *a, **k: (calls.append("load"), real_load(*a, **k))[1])
    code, out = cli(*args)
    assert code == 0, out
    assert calls[0] == "tune" and calls.count("tune") == 1 and "load" in calls, calls
