"""Fits side by side in worker processes: answers in order, errors raised here, crashes named.

Real worker processes (a fork server's); the tasks are this module's functions, which the
workers import by name.
"""

from __future__ import annotations

import gc
import os
import signal
import tempfile

import numpy as np
import pytest
from catboost import CatBoostRegressor

from wattgpu.modeling.learning import side_by_side


def square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def refuse(x: int) -> int:
    raise ValueError(f"no {x}")


def die(_: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


def fit_predict(seed: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4))
    y = x[:, 0] * 2 - x[:, 1] + rng.normal(scale=0.1, size=300)
    model = CatBoostRegressor(
        iterations=40, random_seed=seed, thread_count=1, verbose=False, allow_writing_files=False
    )
    return model.fit(x, y).predict(x[:5])


needs_two_cores = pytest.mark.skipif(side_by_side.cores() < 2, reason="one core runs jobs inline")


@needs_two_cores
def test_answers_come_back_in_the_order_of_the_jobs_from_other_processes():
    answers = side_by_side.run(square_and_pid, [(n,) for n in range(7)])
    assert [a for a, _ in answers] == [0, 1, 4, 9, 16, 25, 36]
    assert os.getpid() not in {pid for _, pid in answers}


def test_one_job_runs_here():
    assert side_by_side.run(square_and_pid, [(3,)]) == [(9, os.getpid())]
    assert side_by_side.run(square_and_pid, []) == []


@needs_two_cores
def test_a_jobs_error_is_raised_with_its_type_and_message():
    with pytest.raises(ValueError, match="no 2"):
        side_by_side.run(refuse, [(2,), (3,)])
    # the pool still works
    assert [a for a, _ in side_by_side.run(square_and_pid, [(1,), (2,)])] == [1, 4]


@needs_two_cores
def test_a_worker_that_dies_is_named_and_the_next_call_gets_a_fresh_pool():
    with pytest.raises(side_by_side.FitCrashed, match="worker process died"):
        side_by_side.run(die, [(0,), (1,)])
    assert [a for a, _ in side_by_side.run(square_and_pid, [(2,), (3,)])] == [4, 9]


@needs_two_cores
def test_catboost_fits_in_workers_answer_as_they_do_here():
    here = [fit_predict(seed) for seed in (1, 2, 3)]
    there = side_by_side.run(fit_predict, [(1,), (2,), (3,)])
    for mine, theirs in zip(here, there, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert not np.array_equal(here[0], here[1])  # the seed matters, so the check can fail


@needs_two_cores
def test_submitted_jobs_run_while_the_caller_works_and_answer_in_order(tmp_path):
    side_by_side.close()
    side_by_side.warm_up()  # returns at once, with the pool started for the next batch
    assert side_by_side._pool is not None
    answers = side_by_side.submit(square_and_pid, [(n,) for n in range(5)])
    got = answers()
    assert [a for a, _ in got] == [0, 1, 4, 9, 16]
    assert os.getpid() not in {pid for _, pid in got}


@needs_two_cores
def test_a_submitted_jobs_error_is_raised_when_the_answers_are_asked_for():
    answers = side_by_side.submit(refuse, [(4,), (5,)])
    with pytest.raises(ValueError, match="no 4"):
        answers()


@needs_two_cores
def test_a_task_set_aside_runs_on_a_worker_and_its_error_waits_for_the_answer():
    answer = side_by_side.aside(square_and_pid, 6)
    value, pid = answer()
    assert value == 36 and pid != os.getpid()
    failing = side_by_side.aside(refuse, 7)  # nothing raised until the answer is asked for
    with pytest.raises(ValueError, match="no 7"):
        failing()


def test_a_stopped_job_takes_no_more_batches_until_the_next_warm_up():
    side_by_side.stop()
    try:
        with pytest.raises(side_by_side.Stopped, match="stopped"):
            side_by_side.submit(square_and_pid, [(1,), (2,)])
        with pytest.raises(side_by_side.Stopped):
            side_by_side.run(square_and_pid, [(1,)])  # not even one job here
        assert side_by_side._pool is None  # the workers were let go
    finally:
        side_by_side.warm_up()
    assert [a for a, _ in side_by_side.run(square_and_pid, [(2,), (3,)])] == [4, 9]


def double_of_shared(shared: side_by_side.Shared) -> tuple[int, int]:
    """The shared list's sum doubled, and how often this process made it (kept: once)."""
    made = []
    total = shared.derived("doubled", lambda value: made.append(1) or 2 * sum(value))
    return total, len(made)


@needs_two_cores
def test_a_shared_value_is_written_once_and_kept_by_each_worker(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(side_by_side, "_folder", None)
    # a folder left by a job that is gone (a pid no process has), and one of a live process
    gone = tmp_path / f"{side_by_side.SHARED_PREFIX}{2**22 + 7}-abc"
    live = tmp_path / f"{side_by_side.SHARED_PREFIX}{os.getppid()}-abc"
    gone.mkdir()
    live.mkdir()
    shared = side_by_side.Shared([1, 2, 3])
    answers = side_by_side.run(double_of_shared, [(shared,)] * 6)
    assert [total for total, _ in answers] == [12] * 6
    assert 1 <= sum(made for _, made in answers) <= side_by_side.cores()  # once per worker
    folder = side_by_side._shared_folder()
    assert folder.name.startswith(f"{side_by_side.SHARED_PREFIX}{os.getpid()}-")
    assert [p.name for p in folder.iterdir()] == [shared.key]  # written once, for six jobs
    assert not gone.exists() and live.exists()
    # made here too when the value is asked for here, from the value itself
    assert double_of_shared(shared) == (12, 1)
    del shared, answers
    gc.collect()
    assert list(folder.iterdir()) == []  # the file goes with the last job naming it
