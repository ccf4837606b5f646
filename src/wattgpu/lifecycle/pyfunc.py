"""The served model: an ``mlflow.pyfunc`` model that answers raw query rows.

Its artifacts hold everything it needs — the CatBoost members, the interval's difficulty model, a
snapshot of both catalogues and the metadata (target, interval factors, training domain) — and
the ``wattgpu`` package itself travels as code, so it loads and predicts in a process with no
access to this repository.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from catboost import CatBoostRegressor
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types import ColSpec, Schema

import wattgpu
from wattgpu.data.catalog import Catalog
from wattgpu.errors import WattgpuError
from wattgpu.modeling.inference import OUTPUT_COLUMNS, predict_queries
from wattgpu.modeling.models import Regressor
from wattgpu.modeling.queries import (
    GPU_TEXT_SPEC_FIELDS,
    LLM_TEXT_SPEC_FIELDS,
    NUMERIC_FIELDS,
    REQUIRED_FIELDS,
    TEXT_FIELDS,
)
from wattgpu.modeling.uncertainty import IntervalModel

EXAMPLE_QUERY = [
    {
        "gpu": "NVIDIA H100 PCIe",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "scenario": "server",
        "request_rate_rps": 0.5,
    },
    {
        "gpu": "NVIDIA L4",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "scenario": "offline",
        "batch_size": 32.0,
    },
]


class WattgpuModel(mlflow.pyfunc.PythonModel):
    """Predicts one target (power in W, or ITL in ms) with an interval and warnings per row."""

    def load_context(self, context: Any) -> None:
        """Read the CatBoost members, the catalogue snapshot and the metadata from the artifacts."""
        artifacts = context.artifacts
        self.metadata = json.loads(Path(artifacts["metadata"]).read_text())
        self.catalog = Catalog.load(Path(artifacts["gpus"]), Path(artifacts["llms"]))
        members = []
        for number, without in enumerate(self.metadata["members"]):
            member = CatBoostRegressor()
            member.load_model(artifacts[f"catboost_{number}"])
            members.append((tuple(without), member))
        self.model = Regressor(self.metadata["target"], members)
        spec = self.metadata["interval"]
        difficulty = spec.get("difficulty")  # a number when every residual was alike
        if difficulty is None:
            difficulty = CatBoostRegressor()
            difficulty.load_model(artifacts["interval"])
        self.bounds = IntervalModel(
            self.metadata["target"],
            tuple(spec["without"]),
            difficulty,
            spec["q_low"],
            spec["q_high"],
            spec["coverage"],
        )

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        """Answer query rows; a bad row is an INVALID_PARAMETER_VALUE error (HTTP 400) naming it."""
        try:
            frame = (
                model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
            )
            return predict_queries(
                self.metadata["target"], self.model, self.bounds, self.catalog, self.metadata, frame
            )
        except WattgpuError as exc:
            # MlflowException with this code: the server answers 400 with our message and no
            # stack trace (a plain exception would carry the server's traceback to the client).
            raise MlflowException(str(exc), error_code=INVALID_PARAMETER_VALUE) from None


def signature() -> ModelSignature:
    """Input: the query columns, typed; output: the answer table.

    Every input is marked optional, even gpu/model/scenario: our own check then answers an empty
    or incomplete payload with its one-line message instead of MLflow's schema dump.
    """
    inputs = [ColSpec("string", name, required=False) for name in REQUIRED_FIELDS]
    inputs += [ColSpec("double", name, required=False) for name in NUMERIC_FIELDS]
    inputs += [
        ColSpec("string", name, required=False)
        for name in (*TEXT_FIELDS, *GPU_TEXT_SPEC_FIELDS, *LLM_TEXT_SPEC_FIELDS)
    ]
    outputs = [
        ColSpec("double" if name in ("prediction", "lower", "upper") else "string", name)
        for name in OUTPUT_COLUMNS
    ]
    return ModelSignature(inputs=Schema(inputs), outputs=Schema(outputs))


def log_pyfunc(
    model: Regressor, bounds: IntervalModel, catalog: Catalog, metadata: dict[str, Any]
) -> str:
    """Log the served model to the active run under ``model``; return its URI."""
    package = Path(wattgpu.__file__).parent
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        artifacts = {}
        for number, (_, member) in enumerate(model.members):
            path = root / f"model_{number}.cbm"
            member.save_model(str(path))
            artifacts[f"catboost_{number}"] = str(path)
        if not isinstance(bounds.difficulty, float):
            bounds.difficulty.save_model(str(root / "interval.cbm"))
            artifacts["interval"] = str(root / "interval.cbm")
        metadata = {
            **metadata,
            "members": [list(without) for without, _ in model.members],
            "interval": {
                "without": list(bounds.without),
                "q_low": bounds.q_low,
                "q_high": bounds.q_high,
                "coverage": bounds.coverage,
                "difficulty": bounds.difficulty if isinstance(bounds.difficulty, float) else None,
            },
        }
        catalog.gpus.to_csv(root / "gpus.csv", index=False)
        catalog.llms.to_csv(root / "llms.csv", index=False)
        (root / "metadata.json").write_text(json.dumps(metadata, indent=2, default=float))
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=WattgpuModel(),
            artifacts={
                **artifacts,
                "gpus": str(root / "gpus.csv"),
                "llms": str(root / "llms.csv"),
                "metadata": str(root / "metadata.json"),
            },
            code_paths=[str(package)],
            signature=signature(),
            input_example=pd.DataFrame(EXAMPLE_QUERY),
            pip_requirements=_requirements(),
        )
    return info.model_uri


def _requirements() -> list[str]:
    """The served model's pip requirements: the versions installed here."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in ("mlflow", "catboost", "pandas", "numpy")]
