"""A registered version served from its own environment, as a deployment builds it.

``mlflow models serve --env-manager uv`` creates a new virtual environment from the model's
``python_env.yaml`` and ``requirements.txt`` alone (Python 3.11.7, the pinned packages from the
package index) and serves the model from it: a requirement missing from the model's environment
fails here, not in production. ``--env-manager virtualenv`` builds the same environment with
pip, in about three times as long (docs/operations.md, "Serving").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import mlflow
import pandas as pd
import pytest
from conftest import free_port, start_server, stop_server

from wattgpu.lifecycle.pyfunc import EXAMPLE_QUERY

pytestmark = pytest.mark.slow

QUERY = EXAMPLE_QUERY[0]  # the served model's own input example: a server row on an H100 PCIe


def test_a_registered_version_serves_from_a_virtualenv_built_from_its_requirements(store, tmp_path):
    uri = "models:/wattgpu-power@production"
    port = free_port()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": store["settings"].tracking_uri,
        "MLFLOW_ENV_ROOT": str(tmp_path / "envs"),  # a new environment, not one left by a run
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", uri]
    command += ["--env-manager", "uv", "-p", str(port), "-h", "127.0.0.1"]
    url = f"http://127.0.0.1:{port}"
    process = start_server(command, env, tmp_path / "serve.log", url, wait_s=1200)
    try:
        answer = httpx.post(f"{url}/invocations", json={"dataframe_records": [QUERY]}, timeout=60)
    finally:
        stop_server(process)
    assert answer.status_code == 200, answer.text[:500]
    served = answer.json()["predictions"][0]
    mlflow.set_tracking_uri(store["settings"].tracking_uri)
    local = mlflow.pyfunc.load_model(uri).predict(pd.DataFrame([QUERY])).iloc[0]
    assert served["prediction"] == pytest.approx(local["prediction"], rel=1e-9)
