"""``bbmap fleet``: one Dask task per small batch of profiles, a tree reduction of their
aggregates, the merged aggregate back to the client.

Why Dask distributed: the same code runs on a laptop (a ``LocalCluster`` of worker
processes) and on a cluster (a scheduler address); it retries the tasks of a worker that
dies (the scheduler reschedules what was running there and recomputes what was only held
there, up to ``distributed.scheduler.allowed-failures`` deaths per task, default 3), and
holds only what the reduction still needs.  Because merging aggregates is exact, associative
and commutative (bbmap/aggregate/store.py), the reduction may pair results in whatever order
they finish and the answer is still byte-identical to one ``annotate`` of all profiles.

Parameters (defaults chosen from the measured per-task figures in spec/fleet.md):

* ``BATCH_BYTES`` (64 MiB) / ``BATCH_FILES`` (32): a task reads profiles until either is
  reached, so per-task overhead (~ms on the scheduler) stays small next to the work while
  one slow task stays short;
* ``FAN_IN`` (16): aggregates merged per reduction task; memory per merge task is at most
  ``FAN_IN`` aggregates (each bounded by the binary's block and edge count, not by the
  profile);
* ``MEMORY_LIMIT`` ("2GiB"): per local worker; a worker over it is restarted by its nanny
  and its tasks retried.
"""

from __future__ import annotations

import contextlib
import glob
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bbmap.aggregate import store
from bbmap.aggregate.api import Session, expand_inputs
from bbmap.aggregate.result import ProfileInfo
from bbmap.errors import BBMapError, Diagnostic, UsageError

BATCH_BYTES = 64 << 20
BATCH_FILES = 32
FAN_IN = 16
MEMORY_LIMIT = "2GiB"

ProgressFn = Callable[[int, int], None]  # (profiles done, profiles in all)


# ----------------------------------------------------------------------------- inputs
def expand_profiles(args: Sequence[str]) -> list[str]:
    """Paths, globs (``*``, ``?``, ``[``: expanded sorted, on the client's file system)
    and ``@listfile``s, in the order given (a glob that matches nothing is an error)."""
    out: list[str] = []
    for a in args:
        if not a.startswith("@") and not os.path.exists(a) and glob.has_magic(a):
            hits = sorted(glob.glob(a))
            if not hits:
                raise BBMapError(f"{a}: no file matches this pattern")
            out.extend(hits)
        else:
            out.append(a)
    return expand_inputs(out)


def batches(paths: Sequence[str], *, batch_bytes: int = BATCH_BYTES,
            batch_files: int = BATCH_FILES) -> list[list[str]]:
    """Consecutive groups of ``paths`` of at most ``batch_files`` files and, unless one
    file is bigger, ``batch_bytes`` bytes."""
    out: list[list[str]] = []
    cur: list[str] = []
    size = 0
    for p in paths:
        try:
            n = os.stat(p).st_size
        except OSError:
            n = 0  # the task names the problem
        if cur and (len(cur) >= batch_files or size + n > batch_bytes):
            out.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += n
    if cur:
        out.append(cur)
    return out


# ----------------------------------------------------------------------------- worker side
_SESSIONS: dict[tuple, Session] = {}
_LOCK = threading.Lock()


def _session(binary: str, options: dict) -> Session:
    """The worker's Session of this binary (loaded once per worker process)."""
    key = (binary, tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _LOCK:
        s = _SESSIONS.get(key)
        if s is None:
            s = Session(binary, **options, keep_going=True, cluster_stats=True,
                        hash_profiles=True, addresses=True)
            _SESSIONS[key] = s
        return s


def profile_task(binary: str, options: dict, paths: list[str]) -> store.Aggregate:
    """Aggregate a batch of profiles.  An unreadable profile is a provenance row with its
    error (``Session`` keeps going); anything else that goes wrong reading one profile
    (a bbmap bug on hostile bytes) is recorded the same way, so one file never loses the
    batch."""
    s = _session(binary, options).fresh()
    for p in paths:
        try:
            s.add(p)
        except UsageError:
            raise  # an aggregate of another binary given as a profile: refuse the run
        except BBMapError as e:  # a damaged aggregate given as a profile
            _record_failure(s, p, str(e))
        except Exception as e:  # noqa: BLE001 - recorded, named, the run goes on
            _record_failure(s, p, f"{p}: internal error reading it: {type(e).__name__}: {e}")
    return s.aggregate()


def _record_failure(s: Session, path: str, err: str) -> None:
    size, sha = 0, ""
    with contextlib.suppress(OSError):
        size, sha = store.file_sha256(path)
    s.records.append(store.ProfileRecord(
        info=ProfileInfo(path=path, mode="unreadable", events=[], samples=0, branches=0,
                         build_id=None, binary_mmaps=0, error=err),
        size=size, sha256=sha, error=err,
        warnings=[Diagnostic(err, path, None, None, "error")]))


def merge_task(*aggs: store.Aggregate) -> store.Aggregate:
    return store.merge(list(aggs))


def failed_task(binary: str, options: dict, paths: list[str], err: str) -> store.Aggregate:
    """An aggregate naming profiles whose task could not be run (its workers kept dying)."""
    s = _session(binary, options).fresh()
    for p in paths:
        _record_failure(s, p, f"{p}: {err}")
    return s.aggregate()


# ----------------------------------------------------------------------------- the run
@dataclass
class FleetRun:
    aggregate: store.Aggregate
    profiles: int
    tasks: int
    merges: int
    seconds: float
    workers: int
    lost_tasks: list[str] = field(default_factory=list)  # batches rerun one by one


def run_fleet(profiles: Sequence[str], binary: str, *, options: dict | None = None,
              scheduler: str | None = None, local_workers: int | None = None,
              threads_per_worker: int = 1, memory_limit: str = MEMORY_LIMIT,
              batch_bytes: int = BATCH_BYTES, batch_files: int = BATCH_FILES,
              fan_in: int = FAN_IN, progress: ProgressFn | None = None,
              client: Any = None) -> FleetRun:
    """Aggregate ``profiles`` (expanded paths) against ``binary`` on Dask.  ``client``: an
    existing ``distributed.Client`` (tests); else one to ``scheduler``, else a
    ``LocalCluster`` of ``local_workers`` processes (default: the CPUs)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BBMapError("bbmap fleet needs Dask distributed: pip install 'bbmap[fleet]'"
                         ) from None
    options = dict(options or {})
    binary = os.path.abspath(binary)
    paths = [p if p == "-" else os.path.abspath(p) for p in profiles]
    if "-" in paths:
        raise BBMapError("bbmap fleet reads files; standard input cannot be shared with "
                         "workers")
    cluster = None
    own_client = client is None
    if client is None:
        if scheduler:
            client = Client(scheduler)
        else:
            n = local_workers or os.cpu_count() or 1
            cluster = LocalCluster(n_workers=n, threads_per_worker=threads_per_worker,
                                   processes=True, memory_limit=memory_limit,
                                   dashboard_address=":0")
            client = Client(cluster)
    t0 = time.perf_counter()
    try:
        return _run(client, paths, binary, options, batch_bytes, batch_files, fan_in,
                    progress, t0)
    finally:
        if own_client:
            client.close()
            if cluster is not None:
                cluster.close()


def _run(client: Any, paths: list[str], binary: str, options: dict, batch_bytes: int,
         batch_files: int, fan_in: int, progress: ProgressFn | None, t0: float) -> FleetRun:
    from distributed import as_completed

    groups = batches(paths, batch_bytes=batch_bytes, batch_files=batch_files)
    size_of: dict[str, int] = {}
    futs = []
    for i, g in enumerate(groups):
        f = client.submit(profile_task, binary, options, g, key=f"bbmap-profiles-{i}",
                          pure=False)
        size_of[f.key] = len(g)
        futs.append(f)
    paths_of = {f.key: g for f, g in zip(futs, groups)}
    done_profiles = 0
    merges = 0
    lost: list[str] = []
    ac = as_completed(futs)
    buf: list = []
    outstanding = len(futs)
    if progress is not None:
        progress(0, len(paths))
    for fut in ac:
        outstanding -= 1
        if fut.status == "error":
            exc = fut.exception()
            if isinstance(exc, BBMapError):
                raise exc
            g = paths_of.get(fut.key)
            if g is None:  # a merge task failed: a bbmap bug, not an input problem
                raise BBMapError(f"merging aggregates failed: {type(exc).__name__}: {exc}")
            if len(g) > 1:  # find the one profile that kills workers: one task each
                lost.append(fut.key)
                for j, p in enumerate(g):
                    f = client.submit(profile_task, binary, options, [p],
                                      key=f"{fut.key}-{j}", pure=False)
                    paths_of[f.key] = [p]
                    size_of[f.key] = 1
                    ac.add(f)
                    outstanding += 1
                continue
            f = client.submit(failed_task, binary, options, g,
                              f"its worker died on every try ({type(exc).__name__}: {exc})",
                              key=f"{fut.key}-failed", pure=False)
            size_of[f.key] = 1
            ac.add(f)
            outstanding += 1
            continue
        if fut.key in size_of:
            done_profiles += size_of.pop(fut.key)
            if progress is not None:
                progress(done_profiles, len(paths))
        buf.append(fut)
        if len(buf) >= fan_in or (outstanding == 0 and len(buf) > 1):
            m = client.submit(merge_task, *buf, key=f"bbmap-merge-{merges}", pure=False)
            merges += 1
            ac.add(m)
            outstanding += 1
            buf = []
    if not buf:
        raise BBMapError("no profile given")
    agg = buf[0].result()
    workers = len(client.scheduler_info().get("workers", {}))
    return FleetRun(aggregate=agg, profiles=len(paths), tasks=len(groups), merges=merges,
                    seconds=time.perf_counter() - t0, workers=workers, lost_tasks=lost)
