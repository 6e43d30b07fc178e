"""Observed block weights from IP samples: how many executions a block's samples stand for.

A ``cpu-clock`` sample lands on the instruction running when the timer fires, so a block
executed ``E`` times collects samples in proportion to ``E`` times the time of one
execution.  The weight of block ``b`` is ``WEIGHT_SCALE * samples_b / units_b``, where
``units_b`` estimates that time from the disassembly (relative executions: comparable
inside one profile, not absolute).  Which model applies depends on the event that took the
samples (:mod:`bbmap.inference.events`); the models (``SAMPLE_MODELS``), measured against
exact valgrind counts in spec/inference.md ("Samples and executions"):

* ``precise`` (precise instruction events: ``instructions:pp``, ``inst_retired.prec_dist``,
  AMD IBS ops, ARM SPE): every retired instruction is equally likely to be sampled and the
  IP is the instruction itself, so a block's samples over its instructions per execution
  estimate its executions without bias.  The trailing ``jmp`` of a ``jcc A; jmp B`` block
  runs only when the jcc falls through: neither its samples nor its unit count;
* ``time`` (timer and cycle events: ``cpu-clock``, ``task-clock``, ``cycles``): samples
  fall in proportion to time, per instruction after undoing where the interrupt puts a
  sample (below).  The IP of a timer
  sample is the *next* instruction to retire, one instruction after the one that held
  retirement up (measured on the corpus and zstd: a block's first instruction holds 2-10%
  of its samples against 16-30% for a uniform spread, the instruction after a load most
  of them).  So

  - samples on a block's first instruction belong to the last instruction of whichever
    block ran before it (unknown without branch records): they are credited to no block
    (``Skid.first``), and a block's last instruction is not counted in its units (its
    samples went to a successor);
  - samples on the second instruction belong to the first.  When that instruction is a
    cheap register operation (no memory operand, no multiply/divide: ``_cheap``), time
    spent there is mostly the front end refilling after the branch into the block (a
    mispredicted loop exit put 1,399 samples on one ``movsxd``, 300x its block's share),
    not the cost of one execution: those samples (``Skid.refill``) count
    ``REFILL_WEIGHT`` each.

  A block left with no unit (one instruction) has no observation (``known`` false) and
  the flow fills it.  Every sample in a block is in exactly one bucket of :class:`Skid`.
  In a ``jcc A; jmp B`` block the jcc's own samples land on the trailing ``jmp`` only
  when it falls through (taken, on A's first instruction): both leave the units, and the
  samples on the ``jmp`` count as first-instruction samples (the jcc's, not credited);
* ``insn``: samples per instruction from per-block sample counts alone (no IP histogram:
  e.g. an aggregate made without one);
* ``bytes``, ``block``: per byte, per block (measured worse; kept for the bench).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bbmap.binary.disasm import CHEAP_UNKNOWN, CHEAP_YES, NOP, OTHER, is_cheap
from bbmap.cfg import CFG

WEIGHT_SCALE = 1000  # weight units per (sample / unit of per-execution cost)
PRECISE_MODEL = "precise"  # precise instruction events, with the IP histogram
TIME_MODEL = "time"  # timer and cycle events, with the IP histogram (the skid model)
SAMPLE_MODEL = "insn"  # without the IP histogram
SAMPLE_MODELS = (PRECISE_MODEL, TIME_MODEL, "insn", "bytes", "block")
HISTOGRAM_MODELS = (PRECISE_MODEL, TIME_MODEL)  # the models that read the IP histogram
MODEL_ALIASES = {"skid": TIME_MODEL}  # the time model's earlier name
SKID_MODEL = TIME_MODEL
# a front-end refill sample counts for this many ordinary ones: a mispredicted branch
# costs ~15-20 cycles against ~1-2 per instruction, so a refill stands for ~1/10 of an
# execution's share.  Measured (spec/inference.md): 0 (dropping the refill) 9.9-20.0%
# corpus block error and 90.5% on pgoflip-train; 0.05, 0.1, 0.2: the corpus 11.0-13.2%,
# 10.4-14.4%, 9.5-21.0%, pgoflip-train 83.0%, 81.5%, 76.1%, zstd unchanged within 1.5
REFILL_WEIGHT = 0.1

# precise model: a block's raise/lower costs scale with the precision of its own estimate.
# Its count estimate ``samples * period / units`` has a Poisson standard deviation
# proportional to ``sqrt(samples) / units``, so the cost of moving it one unit is weighted by
# ``units / sqrt(samples)`` (normalised to the median block of its own function, clipped to
# PRECISE_COST_CLIP, in steps of 1 / PRECISE_COST_STEPS).  Measured on profiles drawn from
# exact counts (bench_inference.py --noise-floor; spec/inference.md, "Noise floor"): zstd at 40k
# samples
# 9.0 / 12.9 -> 7.7 / 11.3 (block / edge), clip [0.5, 2] 8.7 / 12.3, [0.1, 10] within 0.1
# of [0.25, 4]; the raise cost 12, 15, 20 within the draws' spread (15 chosen, between).
PRECISE_COST_CLIP = (0.25, 4.0)
PRECISE_COST_STEPS = 4
PRECISE_BLOCK_INC = 15

# which first instructions are "cheap register operations" (their slow mnemonic prefixes,
# stack words, and memory-operand rule): bbmap.binary.disasm.is_cheap / SLOW_PREFIXES,
# decided once per block when the CFG is recovered (``CFG.first_cheap``)


@dataclass
class Skid:
    """Where the skid model put the samples of the blocks it saw."""

    used: int = 0  # samples that became block weights
    first: int = 0  # on a block's first instruction: the predecessor's, not credited
    refill: int = 0  # on the instruction after a cheap first one: front-end refill,
    # counted REFILL_WEIGHT each
    no_unit: int = 0  # in blocks left without a unit (e.g. undecodable bytes)

    def to_json(self) -> dict:
        return {"used": self.used, "first_instruction": self.first, "refill": self.refill,
                "no_unit": self.no_unit}


def block_weights(samples: np.ndarray, cfg: CFG, model: str = SAMPLE_MODEL
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(weight, known) per block from per-block sample counts (models without skid)."""
    ev = block_evidence(samples, cfg, model)
    return ev.weight, ev.known


def _scaled(samples: np.ndarray, units: np.ndarray, known: np.ndarray) -> np.ndarray:
    w = np.zeros(len(units), np.int64)
    w[known] = np.rint(WEIGHT_SCALE * samples[known] / units[known]).astype(np.int64)
    return w


_cheap = is_cheap  # the text rule (tests)


def locate(cfg: CFG, addr: np.ndarray) -> np.ndarray:
    """Block of every address (ELF vaddr), -1 outside every block.  Needs unique block
    starts (executables and shared objects; a relocatable object's sections overlap)."""
    m = cfg.block_map
    nz = np.flatnonzero(m.block_size > 0)
    ss = cfg.block_start[nz]
    if len(ss) > 1 and not bool((ss[1:] >= ss[:-1]).all()):  # map order is usually address
        order = nz[np.argsort(ss, kind="stable")]  # order: then no sort is needed
        ss = cfg.block_start[order]
    else:
        order = nz
    k = np.searchsorted(ss, np.asarray(addr, np.uint64), side="right") - 1
    ok = k >= 0
    b = np.full(len(addr), -1, np.int64)
    b[ok] = order[k[ok]]
    inside = ok.copy()
    inside[ok] = np.asarray(addr, np.uint64)[ok] < cfg.block_start[b[ok]] + \
        m.block_size[b[ok]].astype(np.uint64)
    b[~inside] = -1
    return b


def unique_starts(cfg: CFG) -> bool:
    """No two non-empty blocks start at one address (a sort: numpy's hashing ``unique``
    took 10 ms on 100k blocks)."""
    nz = cfg.block_start[cfg.block_map.block_size > 0]
    if bool((nz[1:] > nz[:-1]).all()):  # ascending already (map order is address order)
        return True
    nz = np.sort(nz)
    return not bool((nz[1:] == nz[:-1]).any())


def _trail_units(cfg: CFG) -> np.ndarray:
    """1 for blocks ending ``jcc A; jmp B`` (their trailing ``jmp``), else 0."""
    return (_trail_jumps(cfg) > 0).astype(np.int64)


def _trail_jumps(cfg: CFG) -> np.ndarray:
    """The address of each block's trailing ``jmp`` after a ``jcc`` (0 elsewhere)."""
    return cfg.trail_jump if len(cfg.trail_jump) == cfg.num_blocks else \
        np.zeros(cfg.num_blocks, np.uint64)


def _histogram_in_blocks(cfg: CFG, ip_addr: np.ndarray, ip_samples: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(address, samples, block, on a trailing jmp) of the histogram's addresses that lie
    in a block."""
    addr = np.asarray(ip_addr, np.uint64)
    cnt = np.asarray(ip_samples, np.int64)
    b = locate(cfg, addr)
    inb = b >= 0
    addr, cnt, b = addr[inb], cnt[inb], b[inb]
    tj = _trail_jumps(cfg)
    return addr, cnt, b, (tj[b] > 0) & (addr == tj[b])


@dataclass
class SampleEvidence:
    """What a sample model made of the samples, per block: the samples it credits to the
    block (``samples``, refill samples at their weight), the block's units of cost per
    execution (``units``) and whether it has an observation (``known``: units > 0).  The
    weight is ``WEIGHT_SCALE * samples / units``; the intervals of
    :mod:`bbmap.inference.evidence` start from the same two columns."""

    samples: np.ndarray  # f8 per block
    units: np.ndarray  # f8 per block
    known: np.ndarray  # bool per block

    @property
    def weight(self) -> np.ndarray:
        return _scaled(self.samples, self.units, self.known)


def block_evidence(samples: np.ndarray, cfg: CFG, model: str = SAMPLE_MODEL) -> SampleEvidence:
    """:class:`SampleEvidence` from per-block sample counts (models without the histogram)."""
    m = cfg.block_map
    if model == "insn":
        cost = cfg.n_insn.astype(np.float64)
    elif model == "bytes":
        cost = m.block_size.astype(np.float64)
    elif model == "block":
        cost = (cfg.n_insn > 0).astype(np.float64)
    else:
        raise ValueError(f"unknown sample model {model!r} ({', '.join(SAMPLE_MODELS)})")
    return SampleEvidence(np.asarray(samples, np.float64), cost, cfg.n_insn > 0)


def precise_weights(cfg: CFG, ip_addr: np.ndarray, ip_samples: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, SampleEvidence]:
    """(weight, known, evidence) per block from the IP histogram of a precise
    instruction event: samples per instruction executed on every pass through the block
    (all of them but a trailing ``jmp`` after a ``jcc``, whose samples are left out)."""
    B = cfg.num_blocks
    _, cnt, b, on_trail = _histogram_in_blocks(cfg, ip_addr, ip_samples)
    trail = _trail_units(cfg)
    used = np.bincount(b[~on_trail], weights=cnt[~on_trail], minlength=B)
    units = np.maximum(cfg.n_insn.astype(np.float64) - trail, 0)
    ev = SampleEvidence(used, units, units > 0)
    return ev.weight, ev.known, ev


def precision_cost_scale(ev: SampleEvidence, comp: np.ndarray) -> np.ndarray:
    """Integer cost multipliers (>= 1) per block from the precision of its precise-sample
    estimate (see PRECISE_COST_CLIP); blocks without samples count as one sample.  Each
    block is measured against the median of its own component's sampled blocks (``comp``:
    sorted, per block), so a function's costs, and its flow, depend on that function alone
    (per-function solves, their cache and their workers rely on it); a component without
    sampled blocks gets the neutral multiplier."""
    r = ev.units / np.sqrt(np.maximum(ev.samples, 1.0))
    med = _median_by_group(r, comp, ev.known & (ev.samples > 0))
    lo, hi = PRECISE_COST_CLIP
    scale = np.rint(PRECISE_COST_STEPS * np.clip(r / med, lo, hi))
    return np.maximum(scale, 1).astype(np.int64)


def _median_by_group(x: np.ndarray, group: np.ndarray, use: np.ndarray) -> np.ndarray:
    """Per element: the median of ``x[use]`` over the elements of its group (``group``
    sorted ascending); 1.0 where the group has no used element or its median is 0."""
    out = np.ones(len(x), np.float64)
    if not use.any():
        return out
    g, v = group[use], x[use]
    order = np.lexsort((v, g))
    g, v = g[order], v[order]
    ids, start, n = np.unique(g, return_index=True, return_counts=True)
    med = (v[start + (n - 1) // 2] + v[start + n // 2]) / 2
    med[med <= 0] = 1.0
    pos = np.minimum(np.searchsorted(ids, group), len(ids) - 1)
    has = ids[pos] == group
    out[has] = med[pos[has]]
    return out


def skid_weights(cfg: CFG, ip_addr: np.ndarray, ip_samples: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, Skid]:
    """(weight, known, where the samples went) per block from the IP histogram
    (``ip_addr`` ELF vaddrs, ``ip_samples`` samples at each): the ``time`` model."""
    ev, skid = skid_evidence(cfg, ip_addr, ip_samples)
    return ev.weight, ev.known, skid


def skid_evidence(cfg: CFG, ip_addr: np.ndarray, ip_samples: np.ndarray
                  ) -> tuple[SampleEvidence, Skid]:
    """:class:`SampleEvidence` of the ``time`` model and where it put the samples."""
    B = cfg.num_blocks
    addr, cnt, b, on_trail = _histogram_in_blocks(cfg, ip_addr, ip_samples)
    start = cfg.block_start[b]
    trail = _trail_units(cfg)
    # a jcc's samples land on the trailing jmp only when it falls through: like a first
    # instruction's, they are not credited
    at_first = (addr == start) | on_trail
    at_second = (addr == start + cfg.first_size[b].astype(np.uint64)) & ~at_first
    rest = np.bincount(b[~at_first & ~at_second], weights=cnt[~at_first & ~at_second],
                       minlength=B)
    second = np.bincount(b[at_second], weights=cnt[at_second], minlength=B)
    first = np.bincount(b[at_first], weights=cnt[at_first], minlength=B)
    # is the first instruction a cheap register operation? (it matters for blocks with
    # samples on their second instruction; the CFG decided it when it decoded the block,
    # else its text is decoded again)
    cheap = cfg.first_kind == NOP
    other = (second > 0) & (cfg.first_kind == OTHER)
    fc = cfg.first_cheap if len(cfg.first_cheap) == B else np.full(B, CHEAP_UNKNOWN, np.uint8)
    cheap[other] = fc[other] == CHEAP_YES
    for blk in np.flatnonzero(other & (fc == CHEAP_UNKNOWN)).tolist():
        cheap[blk] = is_cheap(cfg.first_insn_text(blk))
    cheap &= cfg.n_insn >= 2
    units = np.maximum(cfg.n_insn.astype(np.float64) - 1 - trail, 0)
    used = rest + np.where(cheap, 0, second)
    known = units > 0
    skid = Skid(used=int(used[known].sum()), first=int(first.sum()),
                refill=int(second[cheap].sum()), no_unit=int(used[~known].sum()))
    return SampleEvidence(used + REFILL_WEIGHT * np.where(cheap, second, 0), units, known), skid
