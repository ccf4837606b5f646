"""Ctrl-C in each phase of the main job: a non-zero exit, nothing RUNNING, no half a version.

The job runs in a process of its own, from a driver that pauses it (SIGSTOP of itself) the
first time one of its target threads enters the phase named; the test sends SIGINT and SIGCONT,
and the paused thread goes on into the phase once the job has heard the Ctrl-C
(``side_by_side.stopped``). So the signal lands in that phase every time, whatever the
machine's speed, not when a trial happens to complete. (Before the job's own thread waited in
short slices, a Ctrl-C here was heard only once every target had finished: registered and
promoted, then "Aborted!".)
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.modeling.physical.synthetic import synthesize

pytestmark = pytest.mark.slow

# Three GPUs: every trial fits one LOGO fold per GPU, and a job reaches each phase with three
# (a one-trial `wattgpu main`: 18.3 s on five GPUs, 14.1 s on three; 2026-12-06, shared 2-core)
GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5"]
DRIVER = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # however the suite was started
from wattgpu.cli import main
from wattgpu.lifecycle import pipeline, registry, tracking
from wattgpu.modeling.learning import side_by_side

POINTS = {
    "tuning": (tracking, "log_trial"),
    "evaluation": (pipeline, "evaluate_tuned"),
    "packaging": (pipeline, "package"),
    "registration": (registry, "register_candidate"),
    "promotion": (registry, "promote_held"),
}
phase = sys.argv[1]
module, name = POINTS[phase]
real, paused = getattr(module, name), []

def pause_then_go_on(*args, **kwargs):
    if not paused:
        paused.append(1)
        print(f"at {phase}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        deadline = time.monotonic() + 60
        while not side_by_side.stopped() and time.monotonic() < deadline:
            time.sleep(0.02)
    return real(*args, **kwargs)

setattr(module, name, pause_then_go_on)
sys.argv = ["wattgpu", *sys.argv[2:]]
main()
"""


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory, catalog) -> Path:
    path = tmp_path_factory.mktemp("data") / "small.csv"
    synthesize(catalog, seed=5).query("gpu in @GPUS").to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "phase", ["tuning", "evaluation", "packaging", "registration", "promotion"]
)
def test_ctrl_c_in_each_phase_ends_the_job_and_leaves_nothing_running(tmp_path, data, phase):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "WATTGPU_DATA_DIR": str(SHIPPED_DATA_DIR)}
    job = subprocess.Popen(
        [sys.executable, "-c", DRIVER, phase, "main", "--recipe", "fast", "--trials", "1"]
        + ["--data", str(data), "--storage", storage],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        while not lines or lines[-1] != f"at {phase}":
            line = job.stdout.readline()
            assert line, f"the job ended before {phase}: {lines}"
            lines.append(line.strip())
        deadline = time.monotonic() + 30
        while state(job.pid) != "T":
            assert time.monotonic() < deadline, "the job did not pause"
            time.sleep(0.02)
        os.kill(job.pid, signal.SIGINT)
        os.kill(job.pid, signal.SIGCONT)
        out, err = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode != 0, out + err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(search_all_experiments=True)
    assert "RUNNING" not in set(runs["status"]), runs[["tags.mlflow.runName", "status"]]
    with closing(sqlite3.connect(tmp_path / "optuna.db")) as database:
        trials = [row[0] for row in database.execute("SELECT state FROM trials")]
    assert "RUNNING" not in trials, trials
    client = MlflowClient(uri)
    if phase in ("tuning", "evaluation", "packaging"):
        # no target had reached its registration: none may go on to it after the Ctrl-C
        versions = [m.name for m in client.search_registered_models() if "." not in m.name]
        assert versions == [], f"registered after a Ctrl-C in {phase}: {versions}; {out}"
    # a version is whole or absent: its run's tag and the alias challenger (or production)
    for model in client.search_registered_models():
        if "." in model.name:  # the promotion lock's and log's entries
            continue
        for found in client.search_model_versions(f"name='{model.name}'"):
            version = client.get_model_version(model.name, found.version)  # with its aliases
            assert "wattgpu.run_id" in version.tags, (model.name, version.version)
            assert {"challenger", "production"} & set(version.aliases), version
