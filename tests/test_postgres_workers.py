"""Two tuning workers on one Optuna study in a real PostgreSQL server (DESIGN: scaling out).

The server is a throwaway cluster started here (as the `postgres` user, in a temp dir, on a free
port); the workers are two real `wattgpu tune` processes sharing the study and the MLflow store.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import mlflow
import optuna
import pytest
import sqlalchemy
from mlflow.tracking import MlflowClient

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.modeling.simulate import simulate

pytestmark = pytest.mark.slow

GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5", "NVIDIA A10G"]


def pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


@pytest.fixture(scope="module")
def postgres():
    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    if not initdb or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI: PostgreSQL (initdb, pg_ctl) must be installed by .ci/run, tests run as root"
            )
        pytest.skip("PostgreSQL server binaries not installed")
    # pytest's own temp root is private to root; the server runs as `postgres`
    root = Path(tempfile.mkdtemp(prefix="wattgpu-pg-"))
    root.chmod(0o777)
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    sock.chmod(0o777)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    as_postgres = ["su", "postgres", "-s", "/bin/sh", "-c"]
    subprocess.run(
        [*as_postgres, f"{initdb} -D {data} -A trust -U postgres >/dev/null"], check=True
    )
    subprocess.run(
        [
            *as_postgres,
            f"{pg_ctl} -D {data} -o '-p {port} -k {sock} -h 127.0.0.1' -l {root}/log "
            "-w start >/dev/null",
        ],
        check=True,
    )
    yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    subprocess.run([*as_postgres, f"{pg_ctl} -D {data} -m fast -w stop >/dev/null"], check=False)
    shutil.rmtree(root, ignore_errors=True)


def test_two_workers_share_one_postgres_study(postgres, tmp_path, catalog):
    rows = simulate(catalog, seed=4)
    data = tmp_path / "small.csv"
    rows[rows["gpu"].isin(GPUS)].to_csv(data, index=False)
    # Create the study and the MLflow store (and so their schemas) once before the workers
    # start, as the README says: two first-time creators race on the tables.
    optuna.create_study(study_name="shared", storage=postgres, direction="minimize")
    # MLflow's store lives in the same server (its own database), as a team's tracking server
    # would have it: two processes writing one SQLite file lock each other out under load.
    engine = sqlalchemy.create_engine(postgres, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text("CREATE DATABASE mlflow"))
    engine.dispose()
    tracking_uri = postgres.rsplit("/", 1)[0] + "/mlflow"
    MlflowClient(tracking_uri).search_experiments()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "WATTGPU_DATA_DIR": str(SHIPPED_DATA_DIR),
    }
    command = [sys.executable, "-m", "wattgpu", "tune", "--target", "power", "--trials", "4"]
    command += ["--storage", postgres, "--study", "shared", "--data", str(data)]
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    workers = [subprocess.Popen(command, env=env, cwd=tmp_path, **pipe) for _ in range(2)]
    outputs = [w.communicate(timeout=600)[0] for w in workers]
    assert all(w.returncode == 0 for w in workers), outputs
    study = optuna.load_study(study_name="shared", storage=postgres)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    # each worker stops once the study holds 4 complete trials; running at once, both may
    # finish a trial in flight, so the study holds between 4 and 5
    assert 4 <= len(complete) <= 5
    assert len({t.number for t in complete}) == len(complete)
    # both workers logged a parent run, with their trials nested in it, to the shared store
    mlflow.set_tracking_uri(tracking_uri)
    runs = mlflow.search_runs(search_all_experiments=True)
    parents = runs[runs["tags.wattgpu.kind"] == "tuning"]
    assert len(parents) == 2 and set(parents["status"]) == {"FINISHED"}
    assert runs["tags.mlflow.parentRunId"].isin(parents["run_id"]).sum() >= 4
