"""The recovered CFG held against the compiler's own: the successor lists of the PGO
analysis map (feature ``br_prob``), block by block (tests/test_cfg_recovery.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bbmap.cfg import CFG, T_INDIRECT, T_TABLE
from bbmap.formats.bbaddrmap import MD_HAS_INDIRECT_BRANCH
from bbmap.model import BlockMap


@dataclass
class OracleReport:
    """Recovered successors against the PGO analysis map's lists."""

    compared: int = 0  # blocks compared
    equal: int = 0
    skipped_indirect: int = 0  # blocks ending in an indirect jump (not compared)
    mismatches: list[tuple[str, int, list[int], list[int], str]] = field(default_factory=list)
    # (function, block ID, recovered IDs, map IDs, how the block ends)
    tables: list[tuple[str, int, bool]] = field(default_factory=list)
    # decoded jump tables: (function, block ID, the entries' blocks equal the map's list)
    guesses: list[tuple[str, int, bool]] = field(default_factory=list)


def compare_with_pgo_map(cfg: CFG, names: list[str | None] | None = None) -> OracleReport:
    """Successor block IDs of every block of every function whose map carries successor
    lists (feature ``br_prob``), recovered vs compiler-written."""
    from bbmap.formats.bbaddrmap import FEAT_BR_PROB

    m = cfg.block_map
    rep = OracleReport()
    names = names if names is not None else m.func_name
    for f in np.flatnonzero((m.func_feature & FEAT_BR_PROB) != 0).tolist():
        for b in m.function_blocks(f):
            mine = sorted(int(m.block_id[s]) for s in cfg.successors(b))
            theirs = sorted(int(s[0]) for s in m.block_successors(b))
            if cfg.term[b] in (T_TABLE, T_INDIRECT) or \
                    (m.block_md[b] & MD_HAS_INDIRECT_BRANCH):
                rep.skipped_indirect += 1
                if cfg.term[b] == T_TABLE:
                    rep.tables.append((_fname(names, m, f), int(m.block_id[b]),
                                       mine == theirs))
                elif cfg.term[b] == T_INDIRECT:
                    rep.guesses.append((_fname(names, m, f), int(m.block_id[b]),
                                        mine == theirs))
                continue
            rep.compared += 1
            if mine == theirs:
                rep.equal += 1
            else:
                rep.mismatches.append((_fname(names, m, f), int(m.block_id[b]), mine, theirs,
                                       cfg.term_name(b)))
    return rep


def _fname(names: list[str | None], m: BlockMap, f: int) -> str:
    return (names[f] if f < len(names) else None) or f"{int(m.func_address[f]):#x}"
