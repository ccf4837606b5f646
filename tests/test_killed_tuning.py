"""A tuning job killed with SIGKILL: nothing of it keeps running; the next job sweeps its records.

A real `wattgpu tune` process is killed while a trial runs. Every process it started carries a
marker in its environment, so the process table can be searched for survivors afterwards
(psutil is not installed: /proc is read directly).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import closing
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.lifecycle import tracking, workers
from wattgpu.modeling.physical.synthetic import synthesize

pytestmark = pytest.mark.slow
# Three GPUs: every trial fits one LOGO fold per GPU, and these jobs need no more
# (a one-trial `wattgpu main`: 18.3 s on five GPUs, 14.1 s on three; 2026-12-06, shared 2-core)
GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5"]
MARKER = "WATTGPU_TEST_MARKER"


def processes_with(marker: str) -> list[int]:
    """Pids of the live processes whose environment holds ``MARKER=marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if f"{MARKER}={marker}".encode() in environ and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def trial_states(storage: str) -> list[str]:
    """The states of every trial in ``storage``, study by study (read in SQL: a poll is quick)."""
    path = Path(storage.removeprefix("sqlite:///"))
    if not path.exists():
        return []
    with closing(sqlite3.connect(path)) as database:
        try:
            rows = database.execute("SELECT state FROM trials ORDER BY study_id, number").fetchall()
        except sqlite3.OperationalError:  # the schema is not there yet
            return []
    return [state for (state,) in rows]


def parent_runs(uri: str):
    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(
        experiment_names=["wattgpu-power"], filter_string="tags.`wattgpu.kind` = 'tuning'"
    )


def job_files(tmp_path: Path, catalog) -> tuple[Path, str, str, str, dict[str, str]]:
    """A job's small data, its Optuna storage and tracking URI, its marker and environment."""
    data = tmp_path / "small.csv"
    synthesize(catalog, seed=5).query("gpu in @GPUS").to_csv(data, index=False)
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    marker = uuid.uuid4().hex
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, MARKER: marker}
    env["WATTGPU_DATA_DIR"] = str(SHIPPED_DATA_DIR)
    return data, storage, uri, marker, env


def test_killed_tuning_job_leaves_nothing_running_and_is_swept(tmp_path, catalog):
    data, storage, uri, marker, env = job_files(tmp_path, catalog)
    command = [sys.executable, "-m", "wattgpu", "tune", "--target", "power", "--data", str(data)]
    command += ["--storage", storage]
    # many trials, so the job cannot end before it is killed (with two, the second trial ran
    # between two polls on a fast machine and the job ended first: CI, 2026-12-06)
    job = subprocess.Popen(
        [*command, "--trials", "50"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL
    )
    # kill it once a trial has finished and the next one is running
    deadline = time.monotonic() + 300
    while not killable(states := trial_states(storage)):
        assert job.poll() is None, "the job ended before it could be killed"
        assert time.monotonic() < deadline, states
        time.sleep(0.05)
    assert processes_with(marker), "the marker does not reach the job"
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    # nothing it started outlives it by more than a few seconds
    deadline = time.monotonic() + 5
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == [], "processes of the killed job are still alive"
    # what it left: a RUNNING parent run (with the heartbeat it beat while alive) and a
    # RUNNING trial
    left = parent_runs(uri)
    assert list(left["status"]) == ["RUNNING"] and left["tags.wattgpu.heartbeat"].notna().all()
    killed = trial_states(storage)
    assert killed[-1] == "RUNNING"
    done = finished(killed)

    # the resumed job asks for one trial more than the killed one finished
    resumed = subprocess.run(
        [*command, "--trials", str(done + 1)], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "marked KILLED" in resumed.stderr and "marked FAIL" in resumed.stderr
    runs = parent_runs(uri)
    assert sorted(runs["status"]) == ["FINISHED", "KILLED"]
    states = trial_states(storage)
    # the killed job's finished trials and the resumed job's one; the killed trial FAILED
    assert finished(states) == done + 1 and states.count("FAIL") == killed.count("RUNNING") == 1
    assert "RUNNING" not in states

    # the study is complete: one line, exit 0, no new run and no new model
    again = subprocess.run(
        [*command, "--trials", "1"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip().splitlines() == [
        f"study {runs_study(runs)!r} already holds {done + 1} finished trial(s), --trials is 1: "
        "nothing to tune and no run logged (raise --trials to tune further)"
    ]
    assert len(parent_runs(uri)) == 2
    assert len(mlflow.search_logged_models(experiment_ids=[runs.iloc[0]["experiment_id"]])) == 1


def finished(states: list[str]) -> int:
    """Trials that count towards --trials: complete or pruned (a failed one does not)."""
    return sum(state in ("COMPLETE", "PRUNED") for state in states)


def killable(states: list[str]) -> bool:
    """At least one trial finished and the next one running: the moment to kill the job."""
    return len(states) >= 2 and finished(states[:-1]) >= 1 and states[-1] == "RUNNING"


def runs_study(runs) -> str:
    return runs.iloc[0]["tags.wattgpu.study"]


def test_a_run_of_a_worker_on_another_machine_is_swept_once_its_heartbeat_is_stale(tmp_path):
    tracking.configure(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = MlflowClient()
    now = time.time()
    beats = {"stale": now - workers.HEARTBEAT_GRACE_S - 60, "fresh": now, "none": None}
    ids = {}
    for name, beat in beats.items():
        tags = {"wattgpu.kind": "tuning", "wattgpu.study": "s", "wattgpu.worker": "far:42:7"}
        if beat is not None:
            tags[tracking.HEARTBEAT_TAG] = f"{beat:.0f}"
        ids[name] = client.create_run(tracking.experiment_id("power"), tags=tags).info.run_id
    assert tracking.kill_dead_runs("power", "s", workers.is_dead) == [ids["stale"]]
    statuses = {name: client.get_run(ids[name]).info.status for name in ids}
    assert statuses == {"stale": "KILLED", "fresh": "RUNNING", "none": "RUNNING"}


# `wattgpu` as a terminal starts it, whoever started the suite: a process inherits an ignored
# SIGINT, and a shell script's background job (`pytest &`, a harness without job control) has it
# ignored; Python then leaves it ignored, and the job would not hear the Ctrl-C sent below (it
# ran to its end and exited 0 once, in a suite started so).
HEAR_CTRL_C = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)"
AS_FROM_A_TERMINAL = [sys.executable, "-c", f"{HEAR_CTRL_C}; from wattgpu.cli import main; main()"]


def test_the_job_hears_ctrl_c_even_when_the_suite_was_started_ignoring_it():
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    parent = "import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    parent += "subprocess.run(sys.argv[1:])"

    def ignored_in(child: str) -> str:
        command = [sys.executable, "-c", parent, sys.executable, "-c", child]
        return subprocess.run(command, capture_output=True, text=True).stdout.strip()

    assert ignored_in(probe) == "True"  # a plain child of such a suite ignores Ctrl-C
    assert ignored_in(f"{HEAR_CTRL_C}; {probe}") == "False"  # the job below hears it


def test_ctrl_c_ends_the_main_job_with_no_run_or_trial_left_running(tmp_path, catalog):
    """SIGINT (Ctrl-C) mid-tuning: the side-by-side targets all end, their runs FAILED."""
    data, storage, uri, marker, env = job_files(tmp_path, catalog)
    command = [*AS_FROM_A_TERMINAL, "main", "--recipe", "fast", "--data", str(data)]
    job = subprocess.Popen(
        [*command, "--storage", storage, "--trials", "50"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while "COMPLETE" not in trial_states(storage):
        assert job.poll() is None, "the job ended before it could be interrupted"
        assert time.monotonic() < deadline, trial_states(storage)
        time.sleep(0.1)
    os.kill(job.pid, signal.SIGINT)
    _, stderr = job.communicate(timeout=120)
    assert job.returncode != 0, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    deadline = time.monotonic() + 5
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == [], "processes of the interrupted job are still alive"
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(search_all_experiments=True)
    tuning = runs[runs["tags.wattgpu.kind"] == "tuning"]
    assert len(tuning) >= 2  # the targets ran side by side
    assert set(tuning["status"]) == {"FAILED"}, tuning[["tags.mlflow.runName", "status"]]
    assert "RUNNING" not in set(runs["status"])  # nor a trial's nested run
    states = trial_states(storage)
    assert "RUNNING" not in states and "FAIL" in states, states
