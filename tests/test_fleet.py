"""``bbmap fleet`` (bbmap/fleet/run.py) on a real Dask LocalCluster: the merged aggregate
is byte-identical to one process's, corrupt profiles are named, and killing a worker
mid-run changes nothing."""

from __future__ import annotations

import json
import os
import signal
import struct
import sys

import pytest

from tests.helpers import CORPUS, PIE_BINARY, PIE_PROFILE, cli

pytest.importorskip("pyarrow")
distributed = pytest.importorskip("distributed")

sys.path.insert(0, str(CORPUS / "tools"))
import split_profile  # noqa: E402

from bbmap.aggregate import store  # noqa: E402
from bbmap.fleet.run import batches, expand_profiles, run_fleet  # noqa: E402
from bbmap.run import Session  # noqa: E402

LBR = os.path.join(CORPUS, "lbr", "c22-addrmap-pie-lbr", "perf.data")


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    """60 pieces of the plain profile, 20 of the LBR one, 2 truncated, 2 not perf data."""
    d = tmp_path_factory.mktemp("fleet")
    paths = split_profile.split(PIE_PROFILE, str(d), 60, prefix="plain")
    paths += split_profile.split(LBR, str(d), 20, prefix="lbr")
    for i, src in enumerate(paths[:2]):
        with open(src, "rb") as fh:
            raw = fh.read()
        off, size = struct.unpack_from("<QQ", raw, 40)  # the data section (perf header)
        (d / f"trunc-{i}.data").write_bytes(raw[: off + size * 3 // 4])
        (d / f"garbage-{i}.data").write_bytes(b"\x00junk" * 50)
    return sorted(str(p) for p in d.iterdir())


@pytest.fixture(scope="module")
def one_process(pieces):
    s = Session(PIE_BINARY, keep_going=True, cluster_stats=True, hash_profiles=True,
                addresses=True)
    s.add_all(pieces)
    return store.aggregate_bytes(s.aggregate())


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", memory_limit="1GiB")
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_split_pieces_count_what_the_source_counts(pieces):
    whole = Session(PIE_BINARY)
    whole.add(PIE_PROFILE)
    whole.add(LBR)
    parts = Session(PIE_BINARY)
    parts.add_all([p for p in pieces if "/plain-" in p or "/lbr-" in p])
    a, b = whole.result(inference="off"), parts.result(inference="off")
    assert a.accounting.to_json() == b.accounting.to_json()
    assert (a.block_count == b.block_count).all() and (a.block_samples == b.block_samples).all()


@pytest.mark.slow
def test_fleet_equals_one_process_and_names_corrupt_profiles(client, pieces, one_process):
    run = run_fleet(pieces, PIE_BINARY, client=client, batch_files=3, fan_in=3)
    assert store.aggregate_bytes(run.aggregate) == one_process
    bad = {p.info.path: p.error or next(w.message for w in p.warnings
                                         if w.severity == "error")
           for p in run.aggregate.profiles
           if p.error or any(w.severity == "error" for w in p.warnings)}
    assert sorted(bad) == sorted(p for p in pieces if "trunc" in p or "garbage" in p)
    assert all("not perf data" in bad[p] for p in bad if "garbage" in p)
    assert all("damaged or truncated" in bad[p] for p in bad if "trunc" in p)
    assert run.aggregate.incomplete and run.merges >= 2


@pytest.mark.slow
def test_killing_a_worker_mid_run_changes_nothing(client, pieces, one_process):
    pids_before = client.run(os.getpid)
    killed: list[int] = []

    def progress(done: int, total: int) -> None:
        if done >= 12 and not killed:  # tasks are still queued and results held
            pid = sorted(pids_before.values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    run = run_fleet(pieces, PIE_BINARY, client=client, batch_files=1, fan_in=4,
                    progress=progress)
    assert killed and killed[0] not in client.run(os.getpid).values()
    assert store.aggregate_bytes(run.aggregate) == one_process


def test_batches_and_globs(pieces, tmp_path):
    bs = batches(pieces, batch_files=7)
    assert [p for b in bs for p in b] == pieces and max(map(len, bs)) == 7
    big = batches(pieces, batch_bytes=1)  # each file alone once over the byte budget
    assert all(len(b) == 1 for b in big)
    d = os.path.dirname(pieces[0])
    assert expand_profiles([os.path.join(d, "lbr-*.data")]) == [p for p in pieces
                                                                if "/lbr-" in p]
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(pieces[:5]) + "\n")
    assert expand_profiles([f"@{lst}"]) == pieces[:5]
    with pytest.raises(Exception, match="no file matches"):
        expand_profiles([os.path.join(d, "nothing-*.data")])


@pytest.mark.slow
def test_cli_fleet_one_local_worker(pieces, tmp_path):
    out, js = str(tmp_path / "f.agg"), str(tmp_path / "f.json")
    few = [p for p in pieces if "plain-0000" in p or "lbr-0000" in p or "garbage-0" in p]
    code, text = cli("fleet", *few, PIE_BINARY, "--local-workers", "1", "-o", out,
                     "--json", js, "--no-progress")
    assert code == 1, text
    assert "garbage-0.data" in text and "incomplete: 1 of" in text
    code, _ = cli("annotate", "--keep-going", *few, PIE_BINARY, "--format", "json", "-o",
                  str(tmp_path / "a.json"))
    assert code == 1
    with open(js, "rb") as a, open(tmp_path / "a.json", "rb") as b:
        assert a.read() == b.read()
    doc = json.loads(open(js).read())  # noqa: SIM115
    assert sum(1 for p in doc["profiles"] if "error" in p) == 1


def test_cli_fleet_usage_errors(tmp_path):
    code, text = cli("fleet", PIE_PROFILE, PIE_BINARY, "--local-workers", "1",
                     "--scheduler", "tcp://127.0.0.1:1", "-o", str(tmp_path / "x.agg"))
    assert code == 2 and "exclude" in text
    code, text = cli("fleet", str(tmp_path / "none-*.data"), PIE_BINARY,
                     "-o", str(tmp_path / "x.agg"))
    assert code == 3 and "no file matches" in text


@pytest.mark.slow
def test_cli_fleet_on_a_running_scheduler(client, pieces, one_process, tmp_path):
    """--scheduler ADDRESS: the same command on an existing cluster (here the fixture's)."""
    lst = tmp_path / "all.txt"
    lst.write_text("\n".join(pieces) + "\n")
    out = str(tmp_path / "s.agg")
    code, text = cli("fleet", f"@{lst}", PIE_BINARY, "--scheduler", client.scheduler.address,
                     "-o", out, "--no-progress", "--batch-files", "5")
    assert code == 1 and "on 2 workers" in text
    with open(out, "rb") as fh:
        assert fh.read() == one_process


# ------------------------------------------------------------------ Dask's voice kept off stderr
def _spawned_workers() -> set[int]:
    """Worker processes this process started (multiprocessing spawn children)."""
    me, out = os.getpid(), set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and b"spawn_main" in cmd and b"resource_tracker" not in cmd:
            out.add(int(d))
    return out


@pytest.fixture(scope="module")
def other_aggregate(tmp_path_factory):
    """An aggregate of another program (list/layout.pie): given to fleet as a profile of
    layout.pie, its task raises on the worker (a usage error the run must refuse)."""
    out = str(tmp_path_factory.mktemp("other") / "other.agg")
    code, text = cli("annotate", os.path.join(CORPUS, "profiles", "c22-list-pie-plain",
                                              "perf.data"),
                     os.path.join(CORPUS, "bin", "clang-22", "list", "layout.pie"),
                     "--format", "aggregate", "-o", out)
    assert code == 0, text
    return out


@pytest.mark.slow
def test_cli_fleet_a_failing_task_puts_no_dask_traceback_on_stderr(
        other_aggregate, pieces, tmp_path, capfd):
    """Before: the worker logged `Compute Failed ... Traceback: ...` to the shared stderr
    beside bbmap's error (the mutation run counts any `Traceback` as a fault)."""
    out = str(tmp_path / "x.agg")
    code, text = cli("fleet", other_aggregate, pieces[0], PIE_BINARY, "--local-workers", "1",
                     "--no-progress", "-o", out)
    err = capfd.readouterr().err + text
    assert code == 2 and "aggregates of different binaries" in text
    assert "Traceback" not in err and "distributed." not in err, err
    # --dask-logs (or BBMAP_DASK_LOGS=1) shows Dask's logs for debugging
    code, text = cli("fleet", other_aggregate, pieces[0], PIE_BINARY, "--local-workers", "1",
                     "--no-progress", "--dask-logs", "-o", out)
    err = capfd.readouterr().err + text
    assert code == 2 and "Compute Failed" in err


@pytest.mark.slow
def test_cli_fleet_a_killed_worker_is_said_by_bbmap_not_dask(
        pieces, one_process, tmp_path, capfd, monkeypatch):
    """A worker SIGKILLed mid-run: the result is unchanged, stderr has bbmap's one line
    about it and none of the scheduler's/nanny's log lines."""
    import bbmap.cli.fleet as fleet_cli

    before = _spawned_workers()
    killed: list[int] = []

    class KillingBar:
        def update(self, done: int, total: int) -> None:
            if done >= 12 and not killed:
                for pid in _spawned_workers() - before:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

        def close(self) -> None:
            pass

    monkeypatch.setattr(fleet_cli, "_Bar", KillingBar)
    out = str(tmp_path / "k.agg")
    code, text = cli("fleet", *pieces, PIE_BINARY, "--local-workers", "1", "--batch-files",
                     "1", "--fan-in", "4", "--progress", "-o", out)
    err = capfd.readouterr().err + text
    assert killed and code == 1, text  # 1: the corrupt pieces
    assert "Traceback" not in err and "distributed." not in err, err
    assert "1 worker died or was lost during the run" in text, text
    with open(out, "rb") as fh:
        assert fh.read() == one_process


def test_silence_dask_drops_dask_logs_and_hooks_and_undoes(capsys):
    import logging
    import threading

    from bbmap.fleet.run import _from_dask, silence_dask

    undo = silence_dask()
    try:
        assert logging.getLogger("distributed.scheduler").disabled
        assert not logging.getLogger("distributed.not-yet-made").isEnabledFor(
            logging.CRITICAL)
        assert not logging.getLogger("tornado.application").isEnabledFor(logging.CRITICAL)
        assert not logging.getLogger("bbmap").disabled
    finally:
        undo()
    assert not logging.getLogger("distributed.scheduler").disabled
    assert threading.excepthook is not None and sys.unraisablehook is not None

    def raise_in(path: str):
        code = compile("def f():\n    raise RuntimeError('x')\n", path, "exec")
        ns: dict = {}
        exec(code, ns)  # noqa: S102 - a frame whose file is Dask's
        try:
            ns["f"]()
        except RuntimeError as e:
            return e.__traceback__

    assert _from_dask(raise_in("/x/site-packages/distributed/comm/tcp.py"))
    assert not _from_dask(raise_in("/x/bbmap/fleet/run.py"))


def test_a_stopped_cluster_does_not_wait_for_its_zombies_to_be_reaped(monkeypatch):
    """A worker whose nanny was killed too becomes PID 1's zombie, reaped when PID 1 gets to
    it (1.6 s measured in this VM): the stop must not wait for that, only for the kill."""
    import psutil

    from bbmap.fleet import run as fleet_run

    class Proc:
        def __init__(self, states):
            self.states = list(states)

        def status(self):
            s = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            if s == "gone":
                raise psutil.NoSuchProcess(1)
            return s

    sleeps = []
    monkeypatch.setattr(fleet_run.time, "sleep", sleeps.append)
    zombie = Proc([psutil.STATUS_ZOMBIE])
    dying = Proc([psutil.STATUS_RUNNING, psutil.STATUS_RUNNING, "gone"])
    fleet_run._wait_dead([zombie, dying], timeout=60)
    assert len(sleeps) == 2  # the zombie counted as dead at once; the other after two looks
    assert zombie.states == [psutil.STATUS_ZOMBIE]
