"""Two main jobs started together on one fresh store both finish, with one production version.

Real `wattgpu main` processes (one trial each, generated rows of three GPUs) on one fresh SQLite
MLflow store and one fresh Optuna storage: they create the stores' tables at the same moment,
and both register every target; exactly one version of each becomes production.
"""

from __future__ import annotations

import os
import subprocess
import sys

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from wattgpu.lifecycle import promotion_log, registry, tracking
from wattgpu.modeling.physical.synthetic import synthesize

pytestmark = pytest.mark.slow

GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5"]


def test_two_main_jobs_at_once_both_finish_with_one_production_version(tmp_path, catalog):
    rows = synthesize(catalog, seed=2)
    data = tmp_path / "small.csv"
    rows[rows["gpu"].isin(GPUS)].to_csv(data, index=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    job = [sys.executable, "-m", "wattgpu", "main", "--recipe", "fast", "--trials", "1"]
    job += ["--storage", storage]
    # two studies, so that both jobs tune and register every target
    jobs = [
        subprocess.Popen(
            [*job, "--data", str(data), "--study", study],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for study in ("a", "b")
    ]
    done = [job.communicate(timeout=1800) for job in jobs]
    for job, (_, err) in zip(jobs, done, strict=True):
        assert job.returncode == 0, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
    tracking.configure(uri)  # for the artifacts read below
    client = MlflowClient(uri)
    targets = [m.name for m in client.search_registered_models() if "." not in m.name]
    assert {"wattgpu-power", "wattgpu-itl"} <= set(targets)
    for name in targets:
        versions = client.search_model_versions(f"name='{name}'")
        assert len(versions) == 2  # one per job
        production = client.get_model_version_by_alias(name, "production").version
        staged = [v.version for v in versions if v.current_stage == "Production"]
        assert staged == [production]
        assert promotion_log.head(client, name).state["production"] == int(production)
        # the model card and the gate carry one held-out figure, under one name
        for version in versions:
            card = mlflow.artifacts.load_dict(f"runs:/{version.run_id}/model_metadata.json")
            gate = float(version.tags[registry.GATE_TAG])
            assert card["logo_mdape"] == pytest.approx(gate, rel=1e-5)
    # the locks were released
    locks = [m.name for m in client.search_registered_models() if "promotion-lock" in m.name]
    assert locks == [], locks
