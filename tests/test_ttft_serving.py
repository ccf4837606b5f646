"""The TTFT model: tuned, registered, promoted and served by `mlflow models serve`, no mocks.

Generated rows (``simulate``) carry a TTFT for every server row, so the model trains in seconds;
what is checked is the lifecycle and the served answer, not accuracy (``tests/test_main_job.py``
checks the main job's TTFT figures on the shipped rows).
"""

from __future__ import annotations

import json
import sys

import httpx
import mlflow
import pandas as pd
import pytest
from conftest import SERVED_GPUS, serving
from mlflow.tracking import MlflowClient

from wattgpu.config import SHIPPED_DATA_DIR, Settings
from wattgpu.lifecycle import pipeline, registry, tracking

pytestmark = pytest.mark.slow

QUERY = {
    "gpu": "NVIDIA H100 SXM5",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "scenario": "server",
    "concurrency": 16,
}


@pytest.fixture(scope="module")
def ttft_store(tmp_path_factory, catalog):
    from wattgpu.modeling.simulate import simulate

    root = tmp_path_factory.mktemp("ttft_store")
    rows = simulate(catalog, seed=2)
    data = root / "small.csv"
    rows[rows["gpu"].isin(SERVED_GPUS)].to_csv(data, index=False)
    settings = Settings(
        SHIPPED_DATA_DIR,
        tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
        optuna_storage=f"sqlite:///{root / 'optuna.db'}",
    )
    run = pipeline.tune(settings, "ttft", data_paths=[data], trials=1, show_progress=False).run_id
    tracking.configure(settings.tracking_uri)
    version = registry.register("ttft", run)
    registry.promote("ttft", version, "staging")
    registry.promote("ttft", version, "production")
    return {"root": root, "settings": settings, "run": run, "version": version}


def test_the_ttft_model_is_registered_and_in_production(ttft_store):
    client = MlflowClient(ttft_store["settings"].tracking_uri)
    production = client.get_model_version_by_alias("wattgpu-ttft", "production")
    assert int(production.version) == ttft_store["version"]
    assert production.run_id == ttft_store["run"]


def test_mlflow_models_serve_answers_ttft_in_ms_like_the_pyfunc(ttft_store):
    def command(port: int) -> list[str]:
        return [
            *(sys.executable, "-m", "mlflow", "models", "serve"),
            *("-m", "models:/wattgpu-ttft@production", "--env-manager", "local"),
            *("-p", str(port), "-h", "127.0.0.1"),
        ]

    records = [QUERY, {**QUERY, "concurrency": 64}]
    with serving(ttft_store, command, "ttft_server.log") as url:
        response = httpx.post(
            f"{url}/invocations",
            content=json.dumps({"dataframe_records": records}),
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        bad = httpx.post(
            f"{url}/invocations",
            content=json.dumps({"dataframe_records": [{**QUERY, "concurrency": -1}]}),
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
    assert response.status_code == 200, response.text
    served = response.json()["predictions"]
    assert [row["unit"] for row in served] == ["ms", "ms"]
    for row in served:
        assert 0 < row["lower"] <= row["prediction"] <= row["upper"]
    # 64 users wait longer for a slot than 16 on the same GPU
    assert served[1]["prediction"] > served[0]["prediction"]
    mlflow.set_tracking_uri(ttft_store["settings"].tracking_uri)
    model = mlflow.pyfunc.load_model("models:/wattgpu-ttft@production")
    local = model.predict(pd.DataFrame(records))
    assert [row["prediction"] for row in served] == pytest.approx(local["prediction"].tolist())
    assert bad.status_code == 400 and "concurrency" in bad.text
