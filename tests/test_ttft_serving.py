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
from conftest import serving, tuned_store
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow

QUERY = {
    "gpu": "NVIDIA H100 SXM5",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "scenario": "server",
    "concurrency": 16,
}


@pytest.fixture(scope="module")
def ttft_store(tmp_path_factory, catalog):
    return tuned_store(tmp_path_factory.mktemp("ttft_store"), catalog, ("ttft",))


def test_the_ttft_model_is_registered_and_in_production(ttft_store):
    client = MlflowClient(ttft_store["settings"].tracking_uri)
    production = client.get_model_version_by_alias("wattgpu-ttft", "production")
    assert int(production.version) == 1 and production.run_id == ttft_store["runs"]["ttft"]


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
