"""One annotate run, in named phases: the driver above aggregation, fit and inference.

``bbmap annotate perf.data ./binary`` (and layout, cfg, report, verify --profile, fleet's
workers, merge's reader) is one walk down these phases, each a function with one owner:

    phase     function             does                                   owner
    read      expand_inputs        @listfiles expanded, files checked     here
    load      Session.__init__     the binary opened once; its tables     binary/, index.py
    resolve   Session.add          a batch's addresses -> blocks          aggregate/profile.py
    count     Annotator.add_batch  ... counted (one pass a profile)       aggregate/annotator.py
    diagnose  Session.diagnose     the raw result; why little mapped      aggregate/explain.py
    fit       check_fit            does the profile fit the code          aggregate/fit.py
    infer     apply_inference      counts from IP samples over the CFG    cfg.py, inference/
    render    render               the report in the asked format         outputs/

The :class:`Session` owns the loaded :class:`~bbmap.binary.Binary` and the one
disassembler the fit and inference phases share; the result it makes carries that binary
(``AnnotateResult.loaded``), so a renderer that needs the file's bytes (BOLT's formats,
the CFG pictures) does not open it again.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from bbmap.aggregate.annotator import Annotator, ProgressFn
from bbmap.aggregate.explain import Evidence, ProfileEvidence
from bbmap.aggregate.fit import DOES_NOT_FIT, LOCAL_MIN_MISSES, FitCollector, judge_fit
from bbmap.aggregate.result import AnnotateResult, ProfileInfo
from bbmap.errors import BBMapError, Diagnostic
from bbmap.options import (
    BOLT_FORMATS,
    INFERENCE_MODES,
    MISMATCH_THRESHOLD,
    SAMPLE_MODEL_CHOICES,
    AnnotateOptions,
    Status,
)


# ----------------------------------------------------------------------------- inputs
def expand_inputs(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """Expand ``@listfile`` arguments (one path a line; ``#`` comments; relative paths
    are relative to the list file) and check every file exists."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[str] = []
    origin: dict[int, str] = {}  # index in out -> "listfile: line N" it came from
    for p in paths:
        p = os.fspath(p)
        if p.startswith("@"):
            lst = p[1:]
            try:
                # paths are bytes on Linux: undecodable ones come back via surrogateescape
                with open(lst, encoding="utf-8", errors="surrogateescape") as fh:
                    lines = fh.read().splitlines()
            except OSError as e:
                raise BBMapError(f"cannot read list file {p!r}: {e.strerror}",
                                 file=lst or None) from None
            base = os.path.dirname(os.path.abspath(lst))
            for n, line in enumerate(lines, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("@"):
                    raise BBMapError(f"line {n}: nested list files are not supported",
                                     file=lst)
                if "\0" in line:
                    raise BBMapError(f"line {n}: not a file name (a NUL byte); a list file "
                                     "holds one path a line", file=lst)
                origin[len(out)] = f"{lst}: line {n}: "
                out.append(line if os.path.isabs(line) else os.path.join(base, line))
        else:
            out.append(p)
    if not out:
        raise BBMapError("no perf.data files given")
    for i, p in enumerate(out):
        if p != "-" and not os.path.exists(p):  # "-": standard input
            raise BBMapError(f"{origin.get(i, '')}{p}: no such perf.data file")
    return out


# ----------------------------------------------------------------------------- annotate
def annotate(perf_paths: str | os.PathLike | Iterable[str | os.PathLike],
             binary: str | os.PathLike, *, options: AnnotateOptions | None = None,
             progress: ProgressFn | None = None, **kwargs: Any) -> AnnotateResult:
    """Map every sample and LBR record of ``perf_paths`` (files or ``@listfile``s, merged;
    aggregate files of ``bbmap.aggregate.store`` are added as they are) onto the blocks of
    ``binary``.  Raises :class:`BBMapError` for unreadable inputs (unless ``keep_going``:
    then an unreadable profile is named with its error in ``result.profiles`` and
    ``result.warnings``, and ``result.failed`` is true); a profile that maps nothing is
    *not* an exception: ``result.status`` and ``result.warnings`` say why.

    ``inference``: ``auto`` infers block and edge counts from the IP samples when the
    profiles have no branch stacks, ``on`` always, ``off`` never (:func:`apply_inference`).
    ``cluster_stats`` also fills ``result.cluster`` (per-stack moments of the LBR counts,
    which ``verify --profile`` turns into design effects; bbmap.aggregate.cluster).
    ``addresses`` also fills ``result.addresses`` (traces and the IP histogram in
    instruction addresses, what BOLT's formats are written from; spec/bolt.md);
    ``address_only`` fills only those (no block counts, accounting or diagnosis: the
    fast path of ``--format fdata``).
    Profiles are listed in one canonical order (path, size, sha256), whatever the order
    they were given in.  A profile that does not fit the binary (``bbmap.aggregate.fit``:
    sampled IPs off instruction starts, branch sources that are not branches, jump
    targets mid-block, past the stated threshold) is refused -- ``result.status`` is
    ``"refused"`` with the evidence as an error -- unless ``force``.
    The options are an :class:`~bbmap.options.AnnotateOptions` or its fields as keyword
    arguments.  ``disasm_cache``: inference takes the binary's disassembly from the on-disk cache
    (``bbmap.binary.disasm_cache``; the CLI's default) instead of sweeping it every time.
    """
    opts = options if options is not None else AnnotateOptions(**kwargs)
    if options is not None and kwargs:
        opts = opts.replace(**kwargs)
    paths = expand_inputs(perf_paths)  # read
    session = Session.for_options(binary, opts)  # load
    session.add_all(paths, progress=progress)  # resolve, count
    return session.result(**opts.deriving())  # diagnose, fit, infer


class Session:
    """One binary's tables and the counts and provenance of the profiles added so far.

    ``annotate`` is ``Session(...).add_all(paths).result()``; ``bbmap fleet`` workers keep
    one Session per binary and make a :meth:`fresh` one per task, whose
    :meth:`aggregate` they return; an aggregate file is added with :meth:`add` like a
    perf.data file.  The result (diagnosis, warnings, inferred counts) is made only by
    :meth:`result`, from the raw counts and the per-profile evidence in canonical order,
    so one process and a merged fleet give the same bytes."""

    def __init__(self, binary: str | os.PathLike, *, name_override: str | None = None,
                 pid: int | None = None, demangle: bool = True,
                 debug_dirs: Sequence[str] = (), drop_duplicate_newest: bool | None = None,
                 chunk_samples: int = 65536, cluster_stats: bool = False,
                 keep_going: bool = False, hash_profiles: bool = False,
                 addresses: bool = False, address_only: bool = False,
                 event: str | None = None, addresses_optional: bool = False) -> None:
        from bbmap.binary import load_binary
        from bbmap.index import BlockIndex

        self.options = {"name": name_override, "pid": pid, "demangle": demangle,
                        "duplicate_lbr": drop_duplicate_newest}
        self.debug_dirs = tuple(debug_dirs)
        self.chunk_samples = chunk_samples
        self.event = event  # --event NAME: only that event's samples (profile.EventPicker)
        self.keep_going = keep_going
        self.hash_profiles = hash_profiles  # size + sha256 of each profile (aggregates)
        # the address aggregates are wanted for inference's sample models only: an
        # aggregate made without them drops them (the insn model) instead of failing
        self.addresses_optional = addresses_optional
        self.records: list = []  # bbmap.aggregate.store.ProfileRecord
        self.binary_path = os.fspath(binary)
        self._binary_sha256: str | None = None
        self._sweep: Any = None  # made when a phase first reads code (sweep)
        b = load_binary(binary, debug_dirs=debug_dirs, demangle=demangle)
        b.refuse_relocatable()
        self.b = b
        if address_only:
            # BOLT's formats only: no block map, function table or index is needed (the
            # addresses are resolved through the mappings alone), so none is built
            from bbmap.model import BlockMapBuilder

            self.ann = Annotator(BlockMapBuilder().build(), None,
                                 drop_duplicate_newest=drop_duplicate_newest,
                                 address_only=True)
            self.index = None
            return
        self.ann = Annotator(b.block_map, b.symbols, demangle=demangle,
                             drop_duplicate_newest=drop_duplicate_newest, sections=b.sections,
                             cluster_stats=cluster_stats, addresses=addresses)
        self.index = BlockIndex(b.block_map, b.symbols, b.sections)

    @classmethod
    def for_options(cls, binary: str | os.PathLike, opts: AnnotateOptions) -> Session:
        """The session ``annotate`` runs with these options.  Inference's sample models
        read the IP histogram (spec/inference.md), so it is collected whenever inference
        may run; an aggregate made without it makes inference fall back to the insn
        model, not fail."""
        optional = not opts.addresses and opts.inference != "off"
        return cls(binary, **opts.counting(), chunk_samples=opts.chunk_samples,
                   cluster_stats=opts.cluster_stats, keep_going=opts.keep_going,
                   addresses=opts.addresses or optional, address_only=opts.address_only,
                   addresses_optional=optional)

    def disassembler(self) -> Any:  # a bbmap.binary.disasm.Disassembler
        """The one disassembler of this binary the fit, infer and render phases share
        (``Binary.disassembler``: capstone loaded and configured once a run)."""
        return self.b.disassembler()

    def sweep(self) -> Any:  # a bbmap.cfg.SharedSweep
        """The run's one sweep of the binary's code, with the one disassembler: the fit
        phase's ranges are not swept again by the infer phase's CFG."""
        if self._sweep is None:
            from bbmap.cfg import SharedSweep

            self._sweep = SharedSweep(self.b, self.disassembler())
        return self._sweep

    def fresh(self) -> Session:
        """An empty session sharing this one's binary, index and tables."""
        s = Session.__new__(Session)
        s.options, s.debug_dirs = self.options, self.debug_dirs
        s.chunk_samples, s.keep_going = self.chunk_samples, self.keep_going
        s.event = self.event
        s.hash_profiles = self.hash_profiles
        s.addresses_optional = self.addresses_optional
        s.records = []
        s.binary_path, s.b, s.index = self.binary_path, self.b, self.index
        s.ann = self.ann.fresh()
        s._binary_sha256 = self._binary_sha256
        s._sweep = None
        return s

    def evidence(self) -> Evidence:
        b = self.b
        bm = self.ann.block_map if self.ann.address_only else b.block_map
        stripped = b.stripped() if hasattr(b, "stripped") else None
        dbg = b.debug_file() if stripped else None
        names = bm.func_name or []
        return Evidence(binary=self.binary_path, binary_build_id=b.build_id,
                        has_block_map=bm.num_blocks > 0, producer=producer_of(b),
                        name_override=self.options["name"], pid=self.options["pid"], go=b.go,
                        symbols_source=b.symbols_source, stripped=stripped,
                        debug_file=dbg.path if dbg is not None else None,
                        unnamed_functions=sum(1 for n in names if not n),
                        functions=bm.num_functions)

    # ------------------------------------------------------------------ inputs
    def add_all(self, paths: Sequence[str], progress: ProgressFn | None = None) -> None:
        done = 0
        wants = getattr(progress, "takes_fraction", False)
        for path in paths:
            def prog(n: int, frac: float | None = None, _path: str = path,
                     _done: int = done) -> None:
                if progress is None:
                    return
                if wants:
                    progress(_path, _done + n, frac)  # type: ignore[call-arg]
                else:
                    progress(_path, _done + n)
            prog.takes_fraction = wants  # type: ignore[attr-defined]
            done += self.add(path, progress=prog)

    def add(self, path: str, progress: Callable[[int], None] | None = None) -> int:
        """Add one perf.data or aggregate file; return the samples it held."""
        from bbmap.aggregate import store

        if path != "-" and store.is_aggregate(path):
            agg = store.read_aggregate(path)
            self.add_aggregate(agg, path)
            return int(agg.totals.get("samples", 0))
        return self.add_profile(path, progress)

    def add_aggregate(self, agg, name: str) -> None:  # noqa: ANN001 - store.Aggregate
        from bbmap.aggregate import store

        if self.ann.addresses is not None and agg.addresses is None and \
                self.addresses_optional:
            self.ann.addresses = None  # inference falls back to the insn model (it says so)
        if self.ann.addresses is not None and agg.addresses is None:
            # refuse rather than write a BOLT profile missing this file's branches
            raise BBMapError("this aggregate was made without the instruction-address "
                             "aggregates BOLT's formats are written from (an older bbmap, or "
                             "a merge with one); remake it, or give the perf.data files",
                             file=name)
        mine = self.identity_aggregate()
        if self.ann.address_only:  # BOLT's formats: the address aggregates are all it needs
            store.check_mergeable(agg, mine, name, f"the binary {self.binary_path}",
                                  shape=False)
            a = self.ann.addresses
            a.profile = a.result().merge(agg.addresses)
            self.records.extend(agg.profiles)
            return
        store.check_mergeable(agg, mine, name, f"the binary {self.binary_path}")
        store.add_to_annotator(agg, self.ann)
        self.records.extend(agg.profiles)

    def add_profile(self, path: str, progress: Callable[[int], None] | None = None) -> int:
        from bbmap.aggregate.profile import read_profile
        from bbmap.aggregate.store import ProfileRecord, file_sha256

        ev = ProfileEvidence()
        warnings: list[Diagnostic] = []
        size, sha = 0, ""
        if self.hash_profiles and path != "-":
            with contextlib.suppress(OSError):  # the reader below names the problem
                size, sha = file_sha256(path)
        try:
            info, sub = read_profile(path, self.b, self.index, self.ann.fresh, ev, warnings,
                                     name_override=self.options["name"],
                                     pid=self.options["pid"],
                                     chunk_samples=self.chunk_samples, progress=progress,
                                     event=self.event)
        except BBMapError as e:
            if not self.keep_going:
                raise
            d = e.diagnostic
            err = str(d) if d.file else f"{path}: {d}"
            self.records.append(ProfileRecord(
                info=ProfileInfo(path=path, mode="unreadable", events=[], samples=0,
                                 branches=0, build_id=None, binary_mmaps=0, error=err),
                size=size, sha256=sha, error=err,
                warnings=[Diagnostic(d.message, d.file or path, d.section, d.offset,
                                     "error")]))
            return 0
        self.ann.merge(sub)
        br = sub.branches
        self.records.append(ProfileRecord(
            info=info, size=size, sha256=sha, warnings=warnings,
            evidence=ev, quirk_batches=br.quirk_batches,
            quirk_evidence=br.quirk_evidence))
        return info.samples

    # ------------------------------------------------------------------ outputs
    @property
    def binary_sha256(self) -> str:
        if self._binary_sha256 is None:
            from bbmap.aggregate.store import file_sha256

            self._binary_sha256 = file_sha256(self.binary_path)[1]
        return self._binary_sha256

    def identity_aggregate(self):  # noqa: ANN201 - an empty store.Aggregate of this binary
        from bbmap.aggregate import store

        s = self.fresh()
        return store.from_annotator(s.ann, [], **self._meta())

    def _meta(self) -> dict:
        b = self.b
        return {"build_id": b.build_id,
                "binary_sha256": "" if b.build_id else self.binary_sha256,
                "binary_name": os.path.basename(self.binary_path), "options": self.options,
                "go_build_id": b.go.build_id if b.go is not None else None}

    def aggregate(self):  # noqa: ANN201 - a store.Aggregate
        """The raw counts and provenance so far, as a mergeable aggregate."""
        from bbmap.aggregate import store

        return store.from_annotator(self.ann, self.records, **self._meta())

    def result(self, *, inference: str = "auto", solver: str = "auto",
               force: bool = False, disasm_cache: bool = False,
               sample_model: str = "auto") -> AnnotateResult:
        """The annotate result: diagnosis, warnings and inferred counts made from the raw
        counts and the per-profile evidence in canonical order (the diagnose, fit and
        infer phases)."""
        res, evidence = self.diagnose()
        res = check_fit(res, self.b, self.ann.fit, force=force,
                        matched_by=evidence.matched_by, swept=self.sweep)
        return apply_inference(res, self.b, inference, solver=solver,
                               disasm_cache=disasm_cache, sample_model=sample_model,
                               swept=self.sweep)

    def diagnose(self) -> tuple[AnnotateResult, Evidence]:
        """The raw result of the profiles added, with why little or nothing mapped, and
        the merged mapping evidence it was judged on."""
        from bbmap.aggregate.identity import resolve

        records = sorted(self.records, key=lambda r: r.key)
        evidence = self.evidence()
        warnings: list[Diagnostic] = list(self.b.diagnostics)
        quirk_batches, quirk = 0, None
        for r in records:
            if r.evidence is not None:
                evidence.absorb(r.evidence)
            warnings.extend(r.warnings)
            quirk_batches += r.quirk_batches
            quirk = r.quirk_evidence or quirk
        resolve(evidence.profiled, self.binary_path, self.debug_dirs, loaded=self.b)
        evidence.profiles = [r.info.path for r in records]
        ann = self.ann
        if quirk_batches and quirk is not None:
            p0, deeper, n = quirk
            warnings.append(Diagnostic(
                f"LBR: entries 0 and 1 are equal in {100 * p0:.1f}% of {n} stacks but "
                f"neighbours deeper in the stacks only in {100 * deeper:.1f}%: the hardware's "
                f"duplicated newest entry; dropped entry 0 of those samples "
                f"({int(ann.acct.branch_buckets()['duplicate'])} records, --duplicate-lbr "
                "keep to keep them)"))
        res = ann.result(binary=self.binary_path, build_id=self.b.build_id,
                         profiles=[r.info for r in records], evidence=evidence,
                         warnings=warnings,
                         go_build_id=self.b.go.build_id if self.b.go is not None else None,
                         loaded=self.b)
        return res, evidence


def check_fit(res: AnnotateResult, binary, fit: FitCollector, *,  # noqa: ANN001
              force: bool = False, matched_by: Iterable[str] = (),
              swept: Callable[[], Any] | None = None) -> AnnotateResult:
    """The fit phase: judge whether the profile fits the binary, and return the result
    with the judgement; refused when it does not (``status = "refused"``, the evidence as
    the first error) unless ``force`` (then the evidence is a warning).  Not judged when
    every profile found the binary by its build-id (the identity is proven; and no
    disassembler is loaded).  ``swept``: makes the run's shared sweep of the code
    (``Session.sweep``) when the judgement needs one."""
    if res.status == Status.NOTHING_MAPPED:
        return res
    how = set(matched_by)
    if how == {"build-id"}:
        return replace(res, fit={"judged": False,
                                 "why_not": "the profile recorded the binary's build-id"})
    rep = judge_fit(binary, fit, swept=swept)
    if not rep.mismatch:
        return replace(res, fit=rep.to_json())
    msg = (f"{DOES_NOT_FIT} {os.path.basename(res.binary)}: {rep.evidence()}; "
           f"over {100 * MISMATCH_THRESHOLD:.0f}% (of all, or of one function's when "
           f"{LOCAL_MIN_MISSES} or more) means these are another program's addresses or code "
           "that moved (the wrong binary, or a rebuilt one)")
    if force:
        first = Diagnostic(msg + "; kept because of --force", file=res.binary)
        return replace(res, fit=rep.to_json(), warnings=[first, *res.warnings])
    first = Diagnostic(msg + "; refused (--force to keep the result)", file=res.binary,
                       severity="error")
    return replace(res, fit=rep.to_json(), status=Status.REFUSED,
                   warnings=[first, *res.warnings])


def apply_inference(res: AnnotateResult, binary, mode: str = "auto",  # noqa: ANN001
                    *, solver: str = "auto", disasm_cache: bool = False,
                    sample_model: str = "auto", unknown: np.ndarray | None = None,
                    swept: Callable[[], Any] | None = None) -> AnnotateResult:
    """Fill ``block_count`` and the edge columns with counts inferred from the IP samples
    (``count_source = "inferred"``) when ``mode`` is ``on``, or ``auto`` and the result
    has no LBR counts.  Derived data: call it on merged raw counts, never store its output
    as raw counts.  ``binary`` is the :class:`~bbmap.binary.Binary` the result maps to.
    ``disasm_cache``: use the on-disk disassembly cache (unless ``BBMAP_NO_CACHE``).
    ``sample_model``: ``auto`` (what the samples' event calls for,
    :mod:`bbmap.inference.events`) or one of ``SAMPLE_MODEL_CHOICES``.  ``unknown``: blocks
    whose zero samples are no evidence (:func:`bbmap.inference.counts.infer_counts`).
    ``swept``: makes the run's shared sweep (``Session.sweep``: its disassembler, and the
    ranges the fit phase read are not swept again).  Returns the result with the
    inferred counts (a new one: results are never changed)."""
    _one_of("--inference", mode, INFERENCE_MODES)
    _one_of("--sample-model", sample_model, SAMPLE_MODEL_CHOICES)
    if mode == "off" or (mode == "auto" and res.has_lbr):
        return res
    if not int(res.block_samples.sum()):
        return replace(res, inference={"status": "skipped",
                                       "reason": "no IP sample in a block"})
    from bbmap.inference.solvers import preload

    preload(solver)  # OR-Tools' library loads while the CFG and the network are made
    from bbmap.cfg import recover_cfg
    from bbmap.inference.counts import infer_counts
    from bbmap.inference.events import EventModel, profile_model
    from bbmap.inference.intervals import CONFIDENCE, model_spread

    cache = None
    if disasm_cache:
        from bbmap.binary.disasm_cache import DisasmCache

        cache = DisasmCache.from_env()
    addr = getattr(res, "addresses", None)
    ip = (addr.ip_addr, addr.ip_samples) if addr is not None and len(addr.ip_addr) else None
    em = profile_model(sample_events(res))
    if sample_model != "auto":
        em = EventModel(em.event, sample_model, em.precise, "chosen with --sample-model")
    results, key = _result_cache(cache, res, binary, mode, solver, em, ip, unknown)
    if key is not None:  # the same inputs were inferred before: their columns
        hit = results.load(key, res.block_map.num_blocks)
        if hit is not None:
            cols, meta = hit
            return replace(res, **cols, count_source="inferred",
                           inference=meta["inference"], sample_model=meta["sample_model"],
                           notices=[*res.notices, *results.warnings],
                           replicates=_replicates(res, binary, None, cache, ip,
                                                  (results, key), solver=solver,
                                                  model=em.model, unknown=unknown))
    try:
        # only the functions inference will solve (those with samples in their blocks):
        # the rest of a large binary is not disassembled
        cfg = recover_cfg(binary, res.block_map, functions=sampled_functions(res),
                          cache=cache, swept=swept() if swept is not None else None)
    except BBMapError as e:
        return replace(res, inference={"status": "skipped", "reason": str(e)},
                       warnings=[*res.warnings, Diagnostic(
                           f"inference: {e}; counts not inferred", severity="warning")])
    # the per-address IP histogram (the address aggregates, ``ip`` above) lets the model
    # credit each sample to its instruction (spec/inference.md)
    notices = [*res.notices, *(cache.warnings if cache is not None else ())]
    flow_cache = None
    if cache is not None:  # solved functions beside the disassembly (same switches)
        from bbmap.inference.flow_cache import FlowCache

        flow_cache = FlowCache(cache.dir)
    inf = infer_counts(cfg, res.block_samples, solver=solver, ip=ip, model=em.model,
                       unknown=unknown, flow_cache=flow_cache)
    if flow_cache is not None:
        notices.extend(flow_cache.warnings)
    used = inf.quality.sample_model
    cols = _result_columns(inf, _inferred_calls(cfg, inf.block_count, inf.block_low,
                                                inf.block_high))
    meta = dict(inference={"status": "ok", **inf.quality.to_json()},
                sample_model={**em.to_json(), "model": used,
                              **({"why": f"{em.why}; without the IP histogram of the "
                                         f"samples (an aggregate made without it): the "
                                         f"{used} model"} if used != em.model else {}),
                              "relative": True, "confidence": CONFIDENCE,
                              "spread": model_spread(used)})
    # as JSON stores it and reads it back: a fresh run, a hit and a run without the cache
    # give the same values
    meta = json.loads(json.dumps(meta))
    if key is not None:
        results.store(key, cols, meta)
        notices.extend(results.warnings)
    return replace(res, **cols, count_source="inferred", **meta, notices=notices,
                   replicates=_replicates(res, binary, cfg, cache, ip, (results, key),
                                          solver=solver, model=em.model, unknown=unknown,
                                          flow_cache=flow_cache))


def _result_columns(inf, calls: tuple | None = None) -> dict[str, np.ndarray]:  # noqa: ANN001
    """A result's count columns from an :class:`bbmap.inference.counts.Inferred` (its
    intra-function edges as taken and fall-through rows), and the call edges ``calls``
    (from, to, count, low, high) after them."""
    from bbmap.aggregate.lbr import K_BRANCH, K_CALL, K_FALLTHROUGH

    z = np.zeros(0, np.int64)
    cf, ct, cc, clo, chi = calls if calls is not None else (z, z, z, z, z)
    return dict(
        block_count=inf.block_count,
        edge_from=np.concatenate([inf.edge_from, cf]),
        edge_to=np.concatenate([inf.edge_to, ct]),
        edge_kind=np.concatenate([np.where(inf.edge_fallthrough, K_FALLTHROUGH, K_BRANCH),
                                  np.full(len(cf), K_CALL)]).astype(np.int64),
        edge_count=np.concatenate([inf.edge_count, cc]).astype(np.int64),
        block_low=inf.block_low, block_high=inf.block_high,
        edge_low=np.concatenate([inf.edge_low, clo]).astype(np.int64),
        edge_high=np.concatenate([inf.edge_high, chi]).astype(np.int64))


def _replicates(res: AnnotateResult, binary, cfg, cache,  # noqa: ANN001
                ip: tuple[np.ndarray, np.ndarray] | None, stored: tuple[Any, str | None],
                **infer_kw: Any) -> Callable[[], list]:
    """The result's ``replicates``: counts inferred again from each half of its samples
    (:mod:`bbmap.inference.replicates`), made on the first call only -- annotate never
    asks, a layout of inferred counts does.  ``cfg``: the full solve's (None after a
    result-cache hit: recovered then, from the disassembly cache when there is one).
    ``stored``: the result cache and the result's key (None: no cache); each half is an
    entry of its own there, made by the first layout of the result, so a later one
    neither recovers the CFG nor solves.  The call holds the few columns it needs, not
    the run (a session's buffers held to the end cost 130 MB of peak RSS on switchy)."""
    made: list = []
    results, key = stored
    block_map, block_samples = res.block_map, res.block_samples
    B = block_map.num_blocks

    def replicates() -> list:
        if made:
            return made[0]
        from bbmap.inference.replicates import HALVES, ReplicateEdges

        keys = [] if key is None else [results.key([key, "half", str(i)])
                                       for i in range(HALVES)]
        hits = [results.load(k, B) for k in keys]
        if keys and all(h is not None for h in hits):
            made.append([ReplicateEdges(c["edge_from"], c["edge_to"], c["edge_count"])
                         for c, _ in hits])
            return made[0]
        from bbmap.cfg import recover_cfg
        from bbmap.inference.replicates import infer_halves

        try:
            g = cfg if cfg is not None else recover_cfg(
                binary, block_map, functions=_sampled(block_map, block_samples),
                cache=cache)
        except BBMapError:  # as the full solve would have skipped: none to ask
            made.append([])
            return made[0]
        halves = infer_halves(g, block_samples, ip, **infer_kw)
        made.append([ReplicateEdges.of(h) for h in halves])
        for k, h in zip(keys, halves):
            results.store(k, _result_columns(h), {"inference": {"status": "ok", "half": k},
                                                  "sample_model": {"model": infer_kw.get("model")}})
        return made[0]

    return replicates


def _result_cache(cache, res: AnnotateResult, binary, mode: str,  # noqa: ANN001
                  solver: str, em, ip: tuple[np.ndarray, np.ndarray] | None,  # noqa: ANN001
                  unknown: np.ndarray | None) -> tuple[Any, str | None]:
    """The whole-result cache beside ``cache`` (a DisasmCache, or None: no caching) and
    the key of this inference's inputs (:mod:`bbmap.inference.result_cache` says what
    they are); (None, None) where there is no cache or nothing to key on."""
    data = getattr(binary, "data", None)  # the whole file (a Binary's read-only map)
    if cache is None or data is None:
        return None, None
    from bbmap.binary.disasm import capstone_version
    from bbmap.inference import solvers
    from bbmap.inference.result_cache import ResultCache, dist_version

    try:
        picked = solvers.pick(solver)
    except BBMapError:
        return None, None  # the solve itself will say why
    m = res.block_map
    parts = [f"mode={mode} solver={picked} numpy={np.__version__} "
             f"capstone={capstone_version()} "
             f"ortools={dist_version('ortools') if picked == 'ortools' else '-'}",
             json.dumps(em.to_json(), sort_keys=True), data,
             m.func_address, m.func_range_ptr, m.range_base, m.range_block_ptr,
             m.block_offset, m.block_size, m.block_md,
             np.asarray(res.block_samples, np.int64),
             *(ip if ip is not None else (None, None)), unknown]
    results = ResultCache(cache.dir)
    return results, results.key(parts)


def _one_of(flag: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise BBMapError(f"{flag} must be one of {', '.join(choices)}, not {value!r}")


def sample_events(res: AnnotateResult) -> list[str]:
    """Names of the events whose samples were counted: those seen in the binary's samples
    when the address aggregates are at hand, else every profile's events; perf's
    ``dummy`` side-band event never has samples."""
    addr = getattr(res, "addresses", None)
    names = list(addr.events) if addr is not None and addr.events else \
        sorted({e for p in res.profiles for e in p.events})
    return [e for e in names if not e.startswith("dummy")]


def _inferred_calls(cfg, block_count: np.ndarray,  # noqa: ANN001 - a bbmap.cfg.CFG
                    low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, ...]:
    """Call edges (calling block, callee entry block, count) of an IP-only profile: every
    direct call and direct tail call whose callee is in the block map, counted as often as
    its block ran (inferred).  BOLT builds its call graph the same way when a call site has
    no branch data of its own (``buildCallGraph``: the call's count is its basic block's
    execution count), so function ordering gets a call graph from samples alone.  Calls
    from blocks that never ran, indirect calls and calls out of the map are left out."""
    m = cfg.block_map
    blk = np.concatenate([cfg.call_block, cfg.tail_block]).astype(np.int64)
    fn = np.concatenate([cfg.call_func, cfg.tail_func]).astype(np.int64)
    ok = fn >= 0
    blk, fn = blk[ok], fn[ok]
    entry = m.range_block_ptr[m.func_range_ptr[fn]].astype(np.int64)
    cnt = block_count[blk].astype(np.int64) if len(blk) else np.zeros(0, np.int64)
    hot = cnt > 0
    pairs, inv = np.unique(np.stack([blk[hot], entry[hot]], axis=1), axis=0,
                           return_inverse=True)
    if not len(pairs):
        return (np.zeros(0, np.int64),) * 5
    inv = inv.ravel()
    total = np.bincount(inv, weights=cnt[hot], minlength=len(pairs))
    lo = np.bincount(inv, weights=low[blk[hot]], minlength=len(pairs))
    hi_b = high[blk[hot]]
    hi = np.bincount(inv, weights=np.maximum(hi_b, 0), minlength=len(pairs))
    unb = np.bincount(inv, weights=hi_b < 0, minlength=len(pairs)) > 0
    hi = np.where(unb, -1, hi)
    return (pairs[:, 0], pairs[:, 1], total.astype(np.int64),  # two calls in a block:
            lo.astype(np.int64), hi.astype(np.int64))  # twice


def sampled_functions(res: AnnotateResult) -> np.ndarray:
    """Block-map functions with an IP sample in one of their blocks: what
    :func:`bbmap.inference.counts.infer_counts` solves by default."""
    return _sampled(res.block_map, res.block_samples)


def _sampled(m, block_samples: np.ndarray) -> np.ndarray:  # noqa: ANN001 - a BlockMap
    if not m.num_blocks:
        return np.zeros(0, np.int64)
    fptr = m.range_block_ptr[m.func_range_ptr]
    hit = np.flatnonzero(block_samples > 0)
    f = np.searchsorted(fptr, hit, side="right") - 1  # ascending: unique by a mask
    return f[np.concatenate([[True], f[1:] != f[:-1]])] if len(f) else f


def producer_of(b) -> str | None:  # noqa: ANN001 - a bbmap.binary.Binary
    """The ``.comment`` producer string (which compiler built the binary), if any."""
    for s in getattr(b, "sections", []):
        if s.name == ".comment":
            try:
                raw = b.section_data(s.index)
            except (BBMapError, OSError, ValueError):
                return None
            parts = [p.decode("utf-8", "replace") for p in raw.split(b"\0") if p.strip()]
            clang = [p for p in parts if "clang version" in p]
            return (clang or parts or [None])[-1]
    return None


# ----------------------------------------------------------------------------- render
def render(result: AnnotateResult, fmt: str, *, top: int | None = None,
           cluster_version: int = 1, tty: bool = False) -> str | bytes:
    """The render phase: ``result`` in one of ``ANNOTATE_FORMATS`` (but ``aggregate``,
    the raw counts the CLI writes from the session).  BOLT's formats read the binary's
    code through the one the run loaded (``result.loaded``).  ``tty``: a person at a
    terminal (rich tables, colour, the terminal's width)."""
    if fmt in BOLT_FORMATS:
        from bbmap.outputs.bolt import render_fdata, render_preagg

        b = result.loaded
        return render_fdata(result, b) if fmt == "fdata" else render_preagg(result, b)
    if fmt == "json":
        from bbmap.outputs.jsonout import render_json_bytes
        return render_json_bytes(result, top=top or None)
    if fmt == "csv":
        from bbmap.outputs.csvout import render_csv_bytes
        return render_csv_bytes(result, top=top or None)
    if fmt == "propeller":
        from bbmap.outputs.propeller import render_propeller
        return render_propeller(result, version=cluster_version)
    if fmt == "symorder":
        from bbmap.outputs.propeller import render_symorder
        return render_symorder(result)
    if fmt == "match-infer":  # clang's hashed profile; a carried result's under the new
        from bbmap.outputs.propeller_hashed import render_match_infer  # build's names

        rep = result.carried  # bbmap matched the functions (suffixes change), clang blocks
        if rep is not None:
            return render_match_infer(rep.profiled_counts(), names=rep.renames)
        return render_match_infer(result)
    if fmt == "bolt-yaml":  # BOLT's YAML with its block hashes (a carried result's: the
        from bbmap.outputs.bolt_yaml import render_bolt_yaml  # new build's counts)
        return render_bolt_yaml(result)
    if fmt != "text":
        raise BBMapError(f"no renderer for the format {fmt!r}")
    import shutil

    from bbmap.outputs.text import render_text
    width = shutil.get_terminal_size((120, 40)).columns if tty else 120
    return render_text(result, top=20 if top is None else (top or 10**9), width=max(width, 80),
                       color=tty, rich=tty)
