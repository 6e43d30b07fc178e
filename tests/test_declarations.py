"""One source of truth: each rule, code and name is declared once and every layer agrees.

These failed on round 1's code, where copies had drifted apart: the build-id rule of the
mapping decision and of its explanation, the bucket codes of the mapping layer and of
accounting, and two unrelated classes both called ``Evidence``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import bbmap
from bbmap import buckets, index, mappings
from bbmap.aggregate import accounting, explain
from bbmap.aggregate.explain import Evidence, diagnose
from bbmap.binary.types import PF_R, PF_X, PT_LOAD, Segment
from bbmap.mappings import ProfileMappings
from bbmap.perf.records import CPUMODE_USER, MmapRecord, SideRecords

PACKAGE = Path(bbmap.__file__).parent

# ---------------------------------------------------------------------- build-ids
SEGS = [Segment(PT_LOAD, PF_R | PF_X, 0, 0, 0x1000, 0x1000, 0x1000)]
ID_PAIRS = [("12345678", "1234"), ("1234", "12345678"), ("abcd" + "00" * 18, "abcd"),
            ("abcd", "abce"), ("ab" * 20, "ab" * 20), ("abcd0000", "ABCD")]


def _decided(binary_id: str, profile_id: str) -> bool:
    """Did the mapping layer take the profile's mmap (same path, ``profile_id``) as the binary?"""
    binary = SimpleNamespace(path="/b/prog", build_id=binary_id, segments=SEGS)
    rec = MmapRecord(seq=1, time=0, pid=7, tid=7, start=0x400000, length=0x1000, pgoff=0,
                     filename="/b/prog", prot=5, flags=2, build_id=profile_id,
                     cpumode=CPUMODE_USER, is_mmap2=True)
    return bool(ProfileMappings.from_perf([SideRecords([rec])], binary).binary_mappings())


def _explained_mismatch(binary_id: str, profile_id: str) -> bool:
    ev = Evidence(binary="/b/prog", binary_build_id=binary_id, has_block_map=True,
                  producer=None, profile_build_ids=[("/b/prog", profile_id)], binary_mmaps=1)
    a = accounting.Accounting()
    a.samples[buckets.IN_BLOCK] = a.total_samples = 10
    return any("build-id mismatch" in d.message for d in diagnose(a, ev)[1])


def test_strict_prefix_is_another_build():
    """perf pads a short id with zeros; a prefix followed by other digits is another build."""
    assert not explain.build_ids_match("12345678", "1234")
    assert not mappings.build_ids_match("12345678", "1234")
    assert explain.build_ids_match("abcd" + "00" * 18, "abcd")


@pytest.mark.parametrize(("binary_id", "profile_id"), ID_PAIRS)
def test_explanation_never_contradicts_the_mapping_decision(binary_id, profile_id):
    assert _decided(binary_id, profile_id) != _explained_mismatch(binary_id, profile_id)


# ---------------------------------------------------------------------- bucket codes
def test_one_bucket_enumeration():
    """A code means the same in the mapping layer, the index and accounting (which names
    the codes of bbmap.buckets, declared once)."""
    for name in ("OTHER_DSO", "KERNEL", "UNMAPPED"):
        assert getattr(mappings, name) == getattr(buckets, name)
    for name in ("IN_BLOCK", "IN_FUNCTION_NO_BLOCK", "OUTSIDE_FUNCTION"):
        assert getattr(index, name) == getattr(buckets, name)
    assert accounting.BUCKETS is buckets.BUCKETS and accounting.OTHER_DSO == buckets.OTHER_DSO
    assert mappings.FILTERED == buckets.OTHER_PID
    assert accounting.BUCKETS[mappings.KERNEL] == "kernel"
    assert accounting.BUCKETS[mappings.OTHER_DSO] == "other_dso"
    assert index.STATUS_NAMES == {0: "in-block", 1: "in-function-no-block",
                                  2: "outside-function"}


def test_mapping_codes_count_into_the_right_bucket():
    """A kernel sample classified by the mapping layer is tallied as a kernel sample."""
    binary = SimpleNamespace(path="/b/prog", build_id=None, segments=SEGS)
    pm = ProfileMappings.from_perf([], binary)
    c = pm.classify(pid=np.array([1, 1]), ip=np.array([0xFFFF_FFFF_8100_0000, 0x10], np.uint64),
                    seq=np.array([1, 2]), cpumode=np.array([1, 2]))
    a = accounting.Accounting()
    a.add_samples(c.where.astype(np.int64), np.ones(2, np.uint64))
    assert a.sample_buckets()["kernel"] == 1 and a.sample_buckets()["unmapped"] == 1


# ---------------------------------------------------------------------- names
# A name defined at the top level of two modules must be the same thing declared twice
# (the drift this file guards against), unless listed here with the reason it is not.
SAME_NAME_ALLOWED = {
    "FORMATS": "each CLI command's own --format choices",
    "JSON_FORMAT_VERSION": "each JSON document versions its own schema",
    "CONSTRUCT_TYPES": "each format module's construct types, built on first use "
                       "(bbmap.formats.lazy_declarations)",
}


def _declared() -> dict[str, list[str]]:
    """Top-level constants (UPPER_CASE) and public classes -> the modules declaring them.
    (Functions are left out: a verb like ``classify`` fits many things.)"""
    seen: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                names = [node.name] if not node.name.startswith("_") else []
            elif isinstance(node, ast.Assign) and not isinstance(node.value, ast.Name
                                                                  | ast.Attribute):
                # (``_X = fmt.X`` is an alias of a declaration, not a second one)
                names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id] if node.target.id.isupper() else []
            else:
                continue
            for n in names:
                if rel not in seen[n]:
                    seen[n].append(rel)
    return seen


@pytest.mark.slow
def test_no_class_name_twice():
    classes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name].append(str(path.relative_to(PACKAGE)))
    assert {k: v for k, v in classes.items() if len(v) > 1} == {}


@pytest.mark.slow
def test_no_constant_or_class_declared_twice():
    twice = {n: where for n, where in _declared().items()
             if len(where) > 1 and n not in SAME_NAME_ALLOWED}
    assert twice == {}


# ---------------------------------------------------------------------- CLI options
def _commands():
    import importlib

    from bbmap.cli import SUBCOMMANDS, main

    for module in SUBCOMMANDS.values():
        importlib.import_module(module)
    return main.commands


@pytest.mark.parametrize("dest", ["output", "debug_dirs"])
def test_shared_options_declared_once(dest):
    """``-o`` and ``--debug-dir`` mean the same in every command (flag, type, help); a
    required ``-o`` (cfg, merge, fleet: ``OutputFile(required=True)``) says "required"
    where the others say "instead of stdout"."""
    seen = {}
    for name, cmd in _commands().items():
        for p in cmd.params:
            if p.name == dest:
                required = p.required or getattr(p.type, "required", False)
                help_ = p.help.replace("; required)", ") instead of stdout") if required \
                    else p.help
                seen[name] = (tuple(p.opts), type(p.type).__name__, p.multiple, help_)
    assert len(seen) >= 3, seen
    assert len(set(seen.values())) == 1, seen
