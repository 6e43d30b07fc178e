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

Dask's own voice: the scheduler, nannies, workers, tornado and asyncio log worker deaths,
failed tasks (with a ``Traceback:``), comm errors and shutdown races to stderr, which is
bbmap's channel to its user.  Unless ``dask_logs`` is set (``bbmap fleet --dask-logs``,
``BBMAP_DASK_LOGS=1``), a run silences them (``silence_dask``: in this process for the
run, in every local worker process through the ``dask_setup`` preload below) and says
what matters in its own words instead: ``FleetRun.lost_workers`` (from the scheduler's
``remove-worker`` events) and ``lost_tasks``.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bbmap.aggregate import store
from bbmap.aggregate.result import ProfileInfo
from bbmap.atomic import Terminated
from bbmap.errors import BBMapError, Diagnostic, UsageError
from bbmap.run import Session, expand_inputs

BATCH_BYTES = 64 << 20
BATCH_FILES = 32
FAN_IN = 16
MEMORY_LIMIT = "2GiB"

ProgressFn = Callable[[int, int], None]  # (profiles done, profiles in all)

# ----------------------------------------------------------------------------- Dask's voice
DASK_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")
_DASK_NAME = re.compile(r"^(?:distributed|tornado|asyncio|bokeh)(?:\.|$)")
_DASK_FILE = re.compile(r"[/\\](?:distributed|tornado|asyncio)[/\\]")
_SILENT = logging.CRITICAL + 10  # above every level a library logs at


def _from_dask(tb: Any, obj: Any = None) -> bool:
    """Whether an exception's traceback (or an unraisable's object) is Dask's, tornado's
    or asyncio's."""
    while tb is not None:
        if _DASK_FILE.search(tb.tb_frame.f_code.co_filename):
            return True
        tb = tb.tb_next
    if obj is not None:
        code = getattr(obj, "cr_code", None) or getattr(obj, "__code__", None)
        if code is not None and _DASK_FILE.search(code.co_filename):
            return True
        mod = getattr(obj, "__module__", None) or type(obj).__module__
        return bool(_DASK_NAME.match(mod or ""))
    return False


def silence_dask() -> Callable[[], None]:
    """Keep Dask's, tornado's and asyncio's chatter off this process's stderr: their
    loggers (and every child logger that exists, some with levels of their own) disabled,
    their warnings ignored, and uncaught exceptions of their threads and unraisable
    exceptions of their objects (``Exception in thread``, ``Exception ignored in``)
    dropped; anything else still goes to the previous hooks.  Returns the undo."""
    names = [n for n in list(logging.Logger.manager.loggerDict) if _DASK_NAME.match(n)]
    saved = []
    for name in dict.fromkeys([*DASK_LOGGERS, *names]):
        lg = logging.getLogger(name)
        saved.append((lg, lg.level, lg.disabled))
        lg.setLevel(_SILENT)  # children created later inherit it
        lg.disabled = True
    filters = list(warnings.filters)
    warnings.filterwarnings("ignore", module=r"(?:distributed|tornado|asyncio|bokeh)(?:\.|$)")
    thread_hook, unraisable_hook = threading.excepthook, sys.unraisablehook

    def quiet_thread(args: Any) -> None:
        if not _from_dask(args.exc_traceback):
            thread_hook(args)

    def quiet_unraisable(u: Any) -> None:
        if not _from_dask(u.exc_traceback, u.object):
            unraisable_hook(u)

    threading.excepthook, sys.unraisablehook = quiet_thread, quiet_unraisable

    def undo() -> None:
        threading.excepthook, sys.unraisablehook = thread_hook, unraisable_hook
        warnings.filters[:] = filters
        warnings._filters_mutated()  # type: ignore[attr-defined]
        for lg, level, disabled in saved:
            lg.setLevel(level)
            lg.disabled = disabled

    return undo


def dask_setup(worker: Any) -> None:
    """Dask preload of the local cluster's worker processes (``preload=[__name__]``, run
    in each worker process, restarted ones too, when it starts): silence Dask there and
    point the process's stderr at /dev/null.  A worker has nothing to say to bbmap's user
    directly: a task's failure comes back to the client as its exception, a dead worker as
    the scheduler's ``remove-worker`` event, both said by bbmap."""
    silence_dask()
    with contextlib.suppress(OSError):
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)


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
    lost_workers: int = 0  # workers that died holding or running this run's tasks
    rerun_tasks: int = 0  # this run's tasks those deaths made the scheduler run again


def run_fleet(profiles: Sequence[str], binary: str, *, options: dict | None = None,
              scheduler: str | None = None, local_workers: int | None = None,
              threads_per_worker: int = 1, memory_limit: str = MEMORY_LIMIT,
              batch_bytes: int = BATCH_BYTES, batch_files: int = BATCH_FILES,
              fan_in: int = FAN_IN, progress: ProgressFn | None = None,
              client: Any = None, dask_logs: bool = False) -> FleetRun:
    """Aggregate ``profiles`` (expanded paths) against ``binary`` on Dask.  ``client``: an
    existing ``distributed.Client`` (tests); else one to ``scheduler``, else a
    ``LocalCluster`` of ``local_workers`` processes (default: the CPUs).  ``dask_logs``:
    let Dask log to stderr as it does by default (else it is silenced, see the top)."""
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
    undo = (lambda: None) if dask_logs else silence_dask()
    own_client = client is None
    local = own_client and not scheduler
    signalled = False
    try:
        cluster = None
        if local and not dask_logs:
            _quiet_resource_tracker()
        if client is None:
            if scheduler:
                client = Client(scheduler)
            else:
                _stop_on_signal()
                n = local_workers or os.cpu_count() or 1
                quiet = {} if dask_logs else {"silence_logs": logging.CRITICAL,
                                              "preload": [__name__]}
                cluster = LocalCluster(n_workers=n, threads_per_worker=threads_per_worker,
                                       processes=True, memory_limit=memory_limit,
                                       dashboard_address=":0", **quiet)
                client = Client(cluster)
        t0 = time.perf_counter()
        try:
            run = _run(client, paths, binary, options, batch_bytes, batch_files, fan_in,
                       progress, t0)
        except BaseException as e:
            if _is_signal(e):
                raise  # no polite close: the cluster is stopped at once (below)
            if own_client:
                _close(client, cluster)
            raise
        if own_client:
            _close(client, cluster)
        return run
    except BaseException as e:
        if _is_signal(e):
            if local:
                stop_local_cluster_now()
            undo = lambda: None  # noqa: E731 - Dask stays silent until the process ends
            signalled = True  # and no process starts again: the stop's threads linger
        raise
    finally:
        if local:
            _stop_on_signal(False)
            if not signalled:
                _refuse_new_processes(False)
        undo()


def _stop_on_signal(on: bool = True) -> None:
    """While a local cluster lives: SIGINT and SIGTERM stop it at once, in the handler,
    before the exception is raised -- Dask runs much of its start and close where an
    exception is swallowed (a callback, a ``__del__``), and the polite close it then
    finished took 7-17 s; with its processes gone it ends at once."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        h = signal.getsignal(sig)
        if on and callable(h) and not hasattr(h, "stops_cluster"):
            def handler(signum: int, frame: Any, previous: Callable = h) -> None:
                stop_local_cluster_now()
                previous(signum, frame)

            handler.stops_cluster = h  # type: ignore[attr-defined]
            signal.signal(sig, handler)
        elif not on and hasattr(h, "stops_cluster"):
            signal.signal(sig, h.stops_cluster)


def _halted(p: Any) -> bool:
    import psutil

    try:
        return p.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return True


def _wait_dead(procs: list[Any], timeout: float) -> None:
    """Wait until every killed process is gone or a zombie.  ``psutil.wait_procs`` waits
    for a zombie to be reaped, and a worker whose nanny was killed too is reaped by PID 1
    when it gets to it (measured here: 1.6 s), which held the exit past its signal."""
    import psutil

    deadline = time.monotonic() + timeout
    left = procs
    while left and time.monotonic() < deadline:
        alive = []
        for p in left:
            try:
                if p.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                    alive.append(p)
            except psutil.Error:
                pass
        left = alive
        if left:
            time.sleep(0.005)


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with its stderr on /dev/null: a nanny
    killed by a signal leaves a semaphore registered, and the tracker, which still
    removes it, would say "There appear to be N leaked semaphore objects" at exit."""
    import multiprocessing.resource_tracker

    with contextlib.suppress(Exception):
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
            multiprocessing.resource_tracker.ensure_running()
        finally:
            os.dup2(saved, 2)
            os.close(saved)


_STDERR_DETACHED = False  # (_detach_stderr: done once per process)


def _detach_stderr() -> None:
    """File descriptor 2 becomes /dev/null and ``sys.stderr`` a copy of what it was, so
    that a process the cluster still spawns after a signal inherits /dev/null.  Why: Dask
    starts worker processes from background threads of this process, which go on after
    the signal's handler has killed every child it found; such a late worker reads
    nothing from its dying parent and printed multiprocessing's "EOFError: Ran out of
    input" traceback under bbmap's one line.  bbmap itself goes on writing to the real
    stderr through ``sys.stderr`` (its last line: "bbmap: interrupted")."""
    global _STDERR_DETACHED
    if _STDERR_DETACHED:
        return
    with contextlib.suppress(Exception):
        sys.stderr.flush()
        real = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        sys.stderr = open(real, "w", buffering=1, encoding=sys.stderr.encoding,  # noqa: SIM115
                          errors="backslashreplace")
        _STDERR_DETACHED = True


def _refuse_new_processes(on: bool) -> None:
    """While a stopped cluster's threads wind down, no process may start: Dask starts
    workers from background threads, which go on after the handler killed every child it
    found, and a worker started then outlives bbmap.  ``on=False`` (the run is over, in a
    program that goes on) lets processes start again."""
    import multiprocessing.process

    base = multiprocessing.process.BaseProcess
    if on and not hasattr(base, "_bbmap_start"):
        def refuse(self: Any) -> None:
            raise RuntimeError("bbmap fleet is stopping: no new process")

        base._bbmap_start = base.start  # type: ignore[attr-defined]
        base.start = refuse  # type: ignore[method-assign]
    elif not on and hasattr(base, "_bbmap_start"):
        base.start = base._bbmap_start  # type: ignore[method-assign]
        del base._bbmap_start


def _is_signal(e: BaseException) -> bool:
    """Ctrl-C, or SIGTERM (``Terminated``: bbmap's signal policy raises it)."""
    return isinstance(e, (KeyboardInterrupt, Terminated))


def _close(client: Any, cluster: Any) -> None:
    client.close()
    if cluster is not None:
        cluster.close()


def stop_local_cluster_now() -> None:
    """A signal (Ctrl-C, SIGTERM) while a local cluster starts, runs or closes: end it at
    once and in silence.  Closing it the polite way takes up to 10 s and, when the signal
    came while it started, prints Dask's tracebacks ("AssertionError: Status.init",
    "Nanny failed to start", from the atexit hook that closes clusters): instead every
    process it started (nannies, workers) is killed, Dask is silenced, the atexit hook is
    told these clusters need no closing, and multiprocessing's finalizers release the
    semaphores the nannies used (else its resource tracker warns of leaked ones)."""
    import multiprocessing.resource_tracker
    import multiprocessing.util

    _detach_stderr()
    _refuse_new_processes(True)
    silence_dask()
    with contextlib.suppress(Exception):
        import psutil  # (a dependency of distributed)

        tracker = getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None)
        # stopped first, until no new one appears: a nanny killed while it spawns a
        # worker would leave that worker behind, orphaned; and a start already past the
        # refusal in another thread may still fork: looked for until two looks find none
        stopped: dict[int, Any] = {}
        quiet_looks = 0
        for _ in range(40):
            new = [p for p in psutil.Process().children(recursive=True)
                   if p.pid != tracker and p.pid not in stopped]
            if not new:
                quiet_looks += 1
                if quiet_looks == 2:
                    break
                time.sleep(0.02)
                continue
            quiet_looks = 0
            for p in new:
                with contextlib.suppress(psutil.Error):
                    p.suspend()
                stopped[p.pid] = p
            for _ in range(50):  # SIGSTOP lands asynchronously: a fork may still finish
                if all(_halted(p) for p in new):
                    break
                time.sleep(0.002)
        for p in stopped.values():
            with contextlib.suppress(psutil.Error):
                p.kill()
        _wait_dead(list(stopped.values()), timeout=2.0)
    with contextlib.suppress(Exception):
        from distributed.deploy.spec import SpecCluster

        for c in list(SpecCluster._instances):
            c.shutdown_on_close = False  # (nothing left to close)
    with contextlib.suppress(Exception):
        multiprocessing.util._run_finalizers(0)


def _run(client: Any, paths: list[str], binary: str, options: dict, batch_bytes: int,
         batch_files: int, fan_in: int, progress: ProgressFn | None, t0: float) -> FleetRun:
    from distributed import as_completed

    groups = batches(paths, batch_bytes=batch_bytes, batch_files=batch_files)
    run_id = uuid.uuid4().hex[:12]  # keys of two runs on one scheduler never meet
    prefix = f"bbmap-{run_id}-"
    size_of: dict[str, int] = {}
    futs = []
    for i, g in enumerate(groups):
        f = client.submit(profile_task, binary, options, g, key=f"{prefix}profiles-{i}",
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
            m = client.submit(merge_task, *buf, key=f"{prefix}merge-{merges}", pure=False)
            merges += 1
            ac.add(m)
            outstanding += 1
            buf = []
    if not buf:
        raise BBMapError("no profile given")
    agg = buf[0].result()
    workers = len(client.scheduler_info().get("workers", {}))
    dead, rerun = worker_losses(client, prefix)
    return FleetRun(aggregate=agg, profiles=len(paths), tasks=len(groups), merges=merges,
                    seconds=time.perf_counter() - t0, workers=workers, lost_tasks=lost,
                    lost_workers=dead, rerun_tasks=rerun)


def worker_losses(client: Any, prefix: str) -> tuple[int, int]:
    """Workers that left the cluster unexpectedly (killed, out of memory, lost) while
    running or holding tasks whose keys start with ``prefix``, and how many of those tasks
    the scheduler had to run again: its ``remove-worker`` events (topic ``all``)."""
    try:
        events = client.get_events("all")
    except Exception:  # noqa: BLE001 - an old or foreign scheduler: nothing to say
        return 0, 0
    dead: set[str] = set()
    rerun: set[str] = set()
    for _, msg in events:
        if not isinstance(msg, dict) or msg.get("action") != "remove-worker" \
                or msg.get("expected"):
            continue
        ours = {str(k) for part in ("processing-tasks", "lost-computed-tasks")
                for k in (msg.get(part) or ()) if str(k).startswith(prefix)}
        if ours:
            dead.add(str(msg.get("worker")))
            rerun |= ours
    return len(dead), len(rerun)
