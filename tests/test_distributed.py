"""Tuning across machines: builders and runners that are Executors (a dask LocalCluster
of two worker processes, a ProcessPoolExecutor), a worker killed mid-run, a crashing
candidate, lost tasks retried a bounded number of times, wrong arguments refused.

Every wait is bounded (``deadline``), and the cluster is shut down by its fixture.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from concurrent.futures import CancelledError, Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

import workbench as wb
from workbench.runtime.compiler import compile_stats
from workbench.search import Database
from workbench.search.distributed import (
    RESUBMITS,
    ExecutorBrokenError,
    build_task,
    result_from_data,
    result_to_data,
    run_task,
    store_artifact,
)
from workbench.search.evolutionary import trace_key

README = Path(__file__).resolve().parents[1] / "README.md"
FUNC = wb.workloads.matmul(32, 32, 32)
# a kernel with the matmul's symbol and parameters that kills its process
SEGFAULT = (
    "#include <stdint.h>\n#include <signal.h>\n"
    "int32_t matmul(float* A, float* B, float* C) { raise(SIGSEGV); return 0; }\n"
)


def space(sch):
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=sch.sample_perfect_tile(i, n=2))
    sch.split(j, factors=sch.sample_perfect_tile(j, n=2))


class Hung(Exception):
    """A test ran past its deadline."""


@pytest.fixture
def deadline():
    """Fail a test that runs longer than 90 s instead of hanging CI (SIGALRM)."""

    def expire(signum, frame):
        raise Hung("the test ran past its 90 s deadline")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 90)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes with one thread each on this machine."""
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                      dashboard_address=None) as local, Client(local) as client:
        client.wait_for_workers(2, timeout=60)
        yield local, client


@pytest.fixture
def executor(cluster):
    local, client = cluster
    client.wait_for_workers(2, timeout=60)  # a test before may have killed one
    return client.get_executor()


def records(path) -> list:
    return Database(path).records(FUNC)


def assert_each_trial_once_in(db_path, result, trials: int) -> None:
    """Every proposed candidate is one trial and one database record, no more."""
    assert len(result.trials) == trials
    recs = records(db_path)
    assert len(recs) == trials
    keys = [trace_key(r.trace_json) for r in recs]
    assert len(set(keys)) == trials
    assert sorted(keys) == sorted(trace_key(t.trace.as_json_obj()) for t in result.trials)


# ---------------------------------------------------------------------------------------
# a dask cluster as builder and runner


def test_cluster_builds_and_measures(cluster, executor, tmp_path, deadline) -> None:
    _, client = cluster
    before = sum(s["compiled"] + s["cache_hits"] for s in client.run(compile_stats).values())
    result = wb.tune(FUNC, space, trials=6, seed=1, builder=executor, runner=executor,
                     database=tmp_path / "db", progress=False)
    assert [t.status for t in result.trials] == ["ok"] * 6
    assert_each_trial_once_in(tmp_path / "db", result, 6)
    # the finalists were measured again on the cluster, and the best comes from them
    assert len(result.final) == 3 and all(t.remeasured for t in result.final)
    # from a quiet re-measured figure when there is one (TuneResult.best prefers quiet)
    quiet_final = [t for t in result.final if not t.noisy]
    if quiet_final:
        assert result.best.remeasured
        assert result.best.latency == min(t.latency for t in quiet_final)
    assert result.best.gflops > 0
    recs = records(tmp_path / "db")
    assert all(r.status == "ok" and r.median > 0 for r in recs)
    # the candidates were compiled by the cluster's workers, not here
    after = sum(s["compiled"] + s["cache_hits"] for s in client.run(compile_stats).values())
    assert after - before == 6 + 3  # the trials, then the 3 finalists built again


def test_cluster_runner_with_the_local_builder(executor, tmp_path, deadline) -> None:
    result = wb.tune(FUNC, space, trials=3, seed=2, runner=executor,
                     database=tmp_path / "db", progress=False)
    assert [t.status for t in result.trials] == ["ok"] * 3
    assert_each_trial_once_in(tmp_path / "db", result, 3)


def test_cluster_builder_with_the_local_runner(executor, tmp_path, deadline) -> None:
    result = wb.tune(FUNC, space, trials=3, seed=3, builder=executor,
                     database=tmp_path / "db", progress=False)
    assert [t.status for t in result.trials] == ["ok"] * 3
    assert_each_trial_once_in(tmp_path / "db", result, 3)


def test_cluster_builder_with_a_measurer_of_kernels(executor, tmp_path, deadline) -> None:
    """A kernel built on the cluster, loaded here for a measurer of your own: it
    computes the matmul."""
    import numpy as np

    from workbench.runtime.isolation import RunResult

    seen = []

    def measurer(kernel):
        a, b = np.random.rand(32, 32).astype("float32"), np.random.rand(32, 32).astype("float32")
        c = np.zeros((32, 32), "float32")
        kernel(a, b, c)
        seen.append(np.allclose(c, a @ b, rtol=1e-4, atol=1e-4))
        return RunResult("ok", wb.measure(kernel, a, b, c, repeat=1, min_repeat_ms=0))

    result = wb.tune(FUNC, space, trials=2, seed=10, builder=executor, measurer=measurer,
                     progress=False)
    assert seen == [True, True]
    assert [t.status for t in result.trials] == ["ok", "ok"]


class StallFirstRun(Executor):
    """Runs on ``inner``; the first measuring task (cluster-wide, claimed with a marker
    file) writes its worker's pid and sleeps, so the test can kill that worker."""

    def __init__(self, inner: Executor, marker: Path) -> None:
        self.inner, self.marker = inner, str(marker)

    def submit(self, fn, /, *args, **kwargs):
        if fn is not run_task:
            return self.inner.submit(fn, *args, **kwargs)
        marker = self.marker

        def stall_first(*a):  # shipped by value (cloudpickle) to the worker
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return fn(*a)
            os.close(fd)
            with open(marker + ".tmp", "w") as out:
                out.write(str(os.getpid()))
            os.replace(marker + ".tmp", marker + ".pid")
            time.sleep(60)  # killed long before
            return fn(*a)

        return self.inner.submit(stall_first, *args, **kwargs)


def kill_when_stalled(marker: Path, killed: list[int]) -> threading.Thread:
    def killer():
        pid_file = Path(str(marker) + ".pid")
        end = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < end:
            time.sleep(0.05)
        if pid_file.exists():
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("allowed_failures", [0, 3], ids=["resubmitted", "rescheduled"])
def test_killed_worker_loses_no_candidate(cluster, executor, tmp_path, deadline,
                                          allowed_failures) -> None:
    """A worker killed while it measures: with allowed-failures=0 dask gives up at once
    (KilledWorker) and tune submits the candidate again; with 3 dask reschedules it.
    Either way each candidate is one ok trial, once in the database."""
    local, _ = cluster
    marker = tmp_path / "stall"
    killed: list[int] = []
    old = local.scheduler.allowed_failures
    local.scheduler.allowed_failures = allowed_failures
    try:
        thread = kill_when_stalled(marker, killed)
        result = wb.tune(FUNC, space, trials=6, seed=4, builder=executor,
                         runner=StallFirstRun(executor, marker),
                         database=tmp_path / "db", progress=False)
        thread.join(timeout=5)
    finally:
        local.scheduler.allowed_failures = old
    assert len(killed) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)  # the worker is gone (its nanny starts another)
    assert [t.status for t in result.trials] == ["ok"] * 6
    assert_each_trial_once_in(tmp_path / "db", result, 6)


class CrashFirstBuild(Executor):
    """Builds on ``inner``; the first candidate's source is replaced by a kernel of the
    same signature that segfaults."""

    def __init__(self, inner: Executor) -> None:
        self.inner, self.sabotaged = inner, 0

    def submit(self, fn, /, *args, **kwargs):
        if fn is build_task and not self.sabotaged:
            self.sabotaged += 1
            args = ({**args[0], "source": SEGFAULT},)
        return self.inner.submit(fn, *args, **kwargs)


def test_crashing_candidate_is_a_failed_trial(executor, tmp_path, deadline) -> None:
    builder = CrashFirstBuild(executor)
    result = wb.tune(FUNC, space, trials=4, seed=5, builder=builder, runner=executor,
                     database=tmp_path / "db", progress=False)
    assert builder.sabotaged == 1
    statuses = sorted(t.status for t in result.trials)
    assert statuses == ["crash", "ok", "ok", "ok"]
    (crash,) = (t for t in result.trials if t.status == "crash")
    assert "SIGSEGV" in crash.error and "`matmul`" in crash.error
    assert_each_trial_once_in(tmp_path / "db", result, 4)
    assert sorted(r.status for r in records(tmp_path / "db")) == statuses


# ---------------------------------------------------------------------------------------
# a process pool; executors that lose work


def test_process_pool_as_runner(tmp_path, deadline) -> None:
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        result = wb.tune(FUNC, space, trials=4, seed=6, runner=pool,
                         database=tmp_path / "db", progress=False)
    assert [t.status for t in result.trials] == ["ok"] * 4
    assert_each_trial_once_in(tmp_path / "db", result, 4)


class LosesEverything(Executor):
    """Every future fails as if its worker had been lost."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.submitted = error, 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        fut: Future = Future()
        fut.set_exception(self.error)
        return fut


@pytest.mark.parametrize("error", [CancelledError("lost"), BrokenProcessPool("gone")])
def test_lost_tasks_are_resubmitted_then_failed(tmp_path, error) -> None:
    runner = LosesEverything(error)
    result = wb.tune(FUNC, space, trials=3, seed=7, runner=runner,
                     database=tmp_path / "db", progress=False)
    assert runner.submitted == 3 * (1 + RESUBMITS)
    assert [t.status for t in result.trials] == ["crash"] * 3
    assert all(f"lost its worker on {1 + RESUBMITS} attempts" in t.error
               and type(error).__name__ in t.error for t in result.trials)
    assert_each_trial_once_in(tmp_path / "db", result, 3)


def test_shut_down_executor_stops_the_run_and_records_its_candidates(tmp_path) -> None:
    pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
    pool.shutdown()
    with pytest.raises(ExecutorBrokenError, match="runner executor refused the candidate"):
        wb.tune(FUNC, space, trials=3, seed=8, runner=pool, database=tmp_path / "db",
                progress=False, batch_size=3)
    recs = records(tmp_path / "db")
    assert len(recs) == 3 and {r.status for r in recs} == {"crash"}


def test_ctrl_c_returns_what_was_measured(executor, tmp_path, deadline) -> None:
    """KeyboardInterrupt from the first trial's callback: tune returns that trial, the
    other candidates' futures are cancelled."""

    def interrupt(trial):
        raise KeyboardInterrupt

    result = wb.tune(FUNC, space, trials=4, seed=9, runner=executor, callback=interrupt,
                     database=tmp_path / "db", progress=False)
    assert result.interrupted and len(result.trials) == 1
    assert len(records(tmp_path / "db")) == 1


# ---------------------------------------------------------------------------------------
# refused arguments; the plain-data work items


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"builder": 5}, "builder must be a concurrent.futures.Executor"),
        ({"runner": "tcp://scheduler:8786"}, "runner must be a concurrent.futures.Executor"),
        ({"database": 5}, "database must be a wb.Database, a folder path"),
    ],
)
def test_wrong_argument_types_are_refused(kwargs, message, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match=message):
        wb.tune(FUNC, space, trials=1, progress=False, **kwargs)
    assert list(tmp_path.iterdir()) == []  # refused before doing anything


def test_a_client_is_refused_with_a_hint(cluster) -> None:
    _, client = cluster
    with pytest.raises(TypeError, match=re.escape("pass client.get_executor()")):
        wb.tune(FUNC, space, trials=1, runner=client, progress=False)


def test_a_callable_runner_is_a_measurer() -> None:
    from workbench.runtime.isolation import RunResult
    from workbench.runtime.timing import Measurement
    from workbench.testing import fake_builder

    measured = []

    def runner(kernel):
        measured.append(kernel.mod)
        return RunResult("ok", Measurement(samples=(1e-3,), number=1, repeat=1))

    result = wb.tune(FUNC, space, trials=2, seed=11, builder=fake_builder, runner=runner,
                     progress=False, remeasure=0)
    assert len(measured) == 2 and [t.status for t in result.trials] == ["ok", "ok"]


def test_runner_and_measurer_together_are_refused(executor) -> None:
    with pytest.raises(ValueError, match="runner= or measurer=, not both"):
        wb.tune(FUNC, space, trials=1, runner=executor, measurer=lambda k: None,
                progress=False)


def test_artifact_is_checked_against_its_hash(tmp_path) -> None:
    from workbench.search.distributed import build_request

    artifact = build_task(build_request(FUNC))
    path = store_artifact(artifact, tmp_path)
    path.write_bytes(b"garbage")  # a damaged cached file is replaced
    assert store_artifact(artifact, tmp_path).read_bytes() == artifact["so"]
    damaged = {**artifact, "so": artifact["so"][:-1]}
    with pytest.raises(ValueError, match="does not match its sha256"):
        store_artifact(damaged, tmp_path)
    reply = run_task(damaged, {"timeout": 10, "repeat": 1, "min_repeat_ms": 0})
    assert reply["status"] == "run_error" and "sha256" in reply["error"]


def test_build_error_comes_back_as_text() -> None:
    art = build_task({"source": "int32_t matmul( {", "symbol": "matmul", "params": [],
                      "name": "matmul", "flops": 0})
    assert set(art) == {"error"} and art["error"].startswith("CompileError")


def test_result_round_trips_as_plain_data() -> None:
    from workbench.runtime.isolation import RunResult
    from workbench.runtime.timing import Measurement

    m = Measurement(samples=(1e-3, 2e-3), number=4, repeat=2, flops=8, cv=0.25,
                    foreign_load=0.5, noisy=True, threads=2)
    data = result_to_data(RunResult("ok", m))
    assert data["measurement"]["samples"] == [1e-3, 2e-3]
    assert result_from_data(data) == RunResult("ok", m)  # noise figures included
    data["measurement"]["from_a_newer_version"] = 1  # unknown fields are dropped
    assert result_from_data(data) == RunResult("ok", m)


def test_measure_module_remeasures_on_the_runner(executor) -> None:
    from workbench.search.distributed import Pipeline
    from workbench.search.tune import SEARCH_TIMER, _default_builder

    pipe = Pipeline(executor, executor, {"timeout": 10, **SEARCH_TIMER}, _default_builder)
    result = pipe.measure_module(FUNC, {"repeat": 5, "min_repeat_ms": 1})
    assert result.ok and result.measurement.repeat == 5
    assert result.measurement.flops == 2 * 32**3


# ---------------------------------------------------------------------------------------
# the README's cluster block


def test_readme_cluster_block_runs_on_a_local_cluster(cluster, deadline, capsys) -> None:
    """The README's "Tuning on several machines" block, pointed at the LocalCluster
    (and cut to two trials)."""
    local, _ = cluster
    (block,) = re.findall(r"```python cluster\n(.*?)```", README.read_text(), flags=re.S)
    assert 'client = Client("tcp://scheduler:8786")' in block
    assert "builder=client.get_executor(), runner=client.get_executor()" in block
    source = block.replace("tcp://scheduler:8786", local.scheduler_address)
    source = re.sub(r"trials=\d+", "trials=2", source)
    namespace: dict = {"wb": wb, "__name__": "readme_cluster"}
    try:
        exec(compile(source, str(README), "exec"), namespace)  # our own README
    finally:
        if "client" in namespace:
            namespace["client"].close()
    assert [t.status for t in namespace["result"].trials] == ["ok", "ok"]
