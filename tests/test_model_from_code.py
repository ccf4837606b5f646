"""The served model is logged as MLflow's *models from code*, not as a CloudPickle of a class.

A version logged so loads where unpickling is refused (``MLFLOW_ALLOW_PICKLE_DESERIALIZATION``
false), and logging it prints no CloudPickle warning (MLflow logs that warning through its own
logger, which pytest's warnings-as-errors does not see: a handler on it does).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml

from wattgpu.lifecycle.pyfunc import log_pyfunc
from wattgpu.modeling.answering.card import ModelCard
from wattgpu.modeling.answering.domain import training_domain
from wattgpu.modeling.learning import models
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.learning.uncertainty import Calibration, IntervalModel
from wattgpu.modeling.learning.unseen import UNSEEN_GPU
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.synthetic import synthesize
from wattgpu.modeling.physical.targets import rows_with_target

pytestmark = pytest.mark.slow

# Load the model in a fresh interpreter that refuses to unpickle, and ask it once.
LOAD_AND_ASK = """
import sys
import mlflow.pyfunc, pandas as pd
model = mlflow.pyfunc.load_model(sys.argv[1])
answer = model.predict(pd.DataFrame([{"gpu": "NVIDIA L4", "scenario": "offline",
                                      "model": "meta-llama/Llama-3.1-8B-Instruct"}]))
print(answer["unit"].iloc[0], answer["prediction"].iloc[0] > 0)
"""


class Records(logging.Handler):
    """Keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_served_model_is_logged_from_code_and_loads_without_unpickling(
    catalog, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the default experiment's artifacts go to ./mlruns
    rows = rows_with_target("power", build_features(synthesize(catalog, seed=1).head(400), catalog))
    recipe = recipe_of("power", "fast")
    model = models.fit(recipe, rows, {"iterations": 10})
    bounds = IntervalModel(
        "power", recipe.difficulty_without(), 0.1, {UNSEEN_GPU: Calibration(-0.2, 0.2)}
    )
    card = ModelCard("power", training_domain(rows))
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    records = Records()
    logger = logging.getLogger("mlflow")
    logger.addHandler(records)
    try:
        with mlflow.start_run():
            uri = log_pyfunc(model, bounds, catalog, card)
    finally:
        logger.removeHandler(records)
    messages = [record.getMessage() for record in records.records]
    assert not [m for m in messages if "CloudPickle" in m], messages

    local = Path(mlflow.artifacts.download_artifacts(uri, dst_path=str(tmp_path / "model")))
    flavor = yaml.safe_load((local / "MLmodel").read_text())["flavors"]["python_function"]
    assert flavor["loader_module"] == "mlflow.pyfunc.loaders.code_model"
    assert not list(local.rglob("*.pkl"))
    env = {**os.environ, "MLFLOW_ALLOW_PICKLE_DESERIALIZATION": "false"}
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_ASK, str(local)],
        env=env,
        cwd=tmp_path,  # not the repository: wattgpu comes from the model's own code
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["W", "True"]
