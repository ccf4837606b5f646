"""The served model: an ``mlflow.pyfunc`` model that answers raw query rows.

Its artifacts hold everything it needs — the CatBoost members, the interval's difficulty model,
the evidence its answers lean on (the training rows' keys and residuals, ``analogs``), a
snapshot of both catalogues and the model card (target, interval factors, training domain) — and
the ``wattgpu`` package itself travels as code, so it loads and predicts in a process with no
access to this repository. It is logged as MLflow's *models from code* (``MODEL_CODE``), not as a
CloudPickle of ``WattgpuModel``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE
from mlflow.types import ColSpec, Schema

import wattgpu
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.clients import CLIENTS_FILE, LENGTHS_FILE
from wattgpu.data.engine_lines import ENGINE_LINES_FILE
from wattgpu.data.engines import ENGINES_FILE
from wattgpu.data.tensor_rates import TENSOR_RATES_FILE
from wattgpu.errors import WattgpuError
from wattgpu.lifecycle.served import ServedModel
from wattgpu.lifecycle.serving import log_to_stderr
from wattgpu.modeling.answering.card import IntervalSpec, ModelCard
from wattgpu.modeling.answering.inference import FLOAT_OUTPUTS, output_columns
from wattgpu.modeling.answering.queries import ALL_FIELDS
from wattgpu.modeling.learning.models import Regressor
from wattgpu.modeling.learning.uncertainty import IntervalModel

# What the served model imports, pinned in its environment (the rest comes with mlflow):
# tests/test_served_environment.py checks this against the modules a loaded model imports.
SERVED_PACKAGES = ("mlflow", "catboost", "pandas", "numpy", "scipy", "scikit-learn", "joblib")
# Where an unexpected error of ``predict`` is logged with its trace (the client gets its type only).
LOG = logging.getLogger(__name__)
# The shipped tables the served model's code reads (``_package_code``): the engine releases
# (features), and the engine lines and clients of the simulated serving loop (the tails).
# the tensor rates derive the peaks of a GPU answered from the GPU database (data.gpu_lookup)
SERVED_TABLES = (ENGINES_FILE, ENGINE_LINES_FILE, CLIENTS_FILE, LENGTHS_FILE, TENSOR_RATES_FILE)
# The file MLflow logs as the model's code (``mlflow.models.set_model(WattgpuModel())``).
MODEL_CODE = Path(__file__).with_name("served_model.py")

EXAMPLE_QUERY = [
    {
        "gpu": "NVIDIA H100 PCIe",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "scenario": "server",
        "request_rate_rps": 0.5,
    },
    {
        "gpu": "NVIDIA A10",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "scenario": "server",
        "concurrency": 16,
    },
    {
        "gpu": "NVIDIA L4",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "scenario": "offline",
        "batch_size": 32,
    },
]


class WattgpuModel(mlflow.pyfunc.PythonModel):
    """Predicts one target (power in W, or ITL in ms) with an interval and warnings per row."""

    def load_context(self, context: Any) -> None:
        """Read the CatBoost members, the catalogue snapshot and the model card (artifacts)."""
        self.served = ServedModel(context.artifacts)
        log_to_stderr(LOG)

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        """Answer query rows; a bad row is an INVALID_PARAMETER_VALUE error (HTTP 400) naming it.

        Blank and non-finite numbers of the answer (no prediction for a configuration that
        cannot run, no batch where the engine chooses) come back as ``None``: JSON ``null``,
        never the ``NaN`` that strict JSON parsers refuse.
        """
        try:
            return self.served.answer(model_input)
        except WattgpuError as exc:
            # MlflowException with this code: the server answers 400 with our message and no
            # stack trace (a plain exception would carry the server's traceback to the client).
            raise MlflowException(str(exc), error_code=INVALID_PARAMETER_VALUE) from None
        except Exception as exc:  # a bug of ours: a 500 that names it, but no trace or input
            # the trace goes to the server's log, where the bug can be found; never to the client
            LOG.exception(
                "internal error while predicting %s for a request", self.served.card.target
            )
            raise MlflowException(
                f"internal error while predicting ({type(exc).__name__})", error_code=INTERNAL_ERROR
            ) from None


def signature(target: str) -> ModelSignature:
    """The answer's columns of ``target``'s model; no input schema, on purpose.

    With an input schema MLflow coerces the request before the model sees it: a JSON ``true``
    or ``"0.5"`` becomes a number, 8.9 an 8 in an integer column. Without one the model gets the
    values as sent and ``wattgpu.modeling.answering.queries`` checks each field's type and range
    itself (``query_fields`` in the model card and the input example show what a query holds).
    """
    outputs = [
        ColSpec("double", name, required=False)
        if name in FLOAT_OUTPUTS
        else ColSpec("string", name)
        for name in output_columns(target)
    ]
    return ModelSignature(inputs=None, outputs=Schema(outputs))


def log_pyfunc(model: Regressor, bounds: IntervalModel, catalog: Catalog, card: ModelCard) -> str:
    """Log the served model to the active run under ``model``; return its URI.

    The card gets the packaging filled in: the members, the interval and the query fields.
    """
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        package = _package_code(root / "code")
        artifacts = {}
        for number, (_, member) in enumerate(model.members):
            path = root / f"model_{number}.cbm"
            member.save_model(str(path))
            artifacts[f"catboost_{number}"] = str(path)
        if model.evidence is not None:  # the training rows' keys and residuals, not the files
            model.evidence.to_frame().to_csv(root / "evidence.csv", index=False)
            artifacts["evidence"] = str(root / "evidence.csv")
        if not isinstance(bounds.difficulty, float):
            bounds.difficulty.save_model(str(root / "interval.cbm"))
            artifacts["interval"] = str(root / "interval.cbm")
        card = replace(
            card,
            members=tuple(tuple(without) for without, _ in model.members),
            query_fields=tuple(ALL_FIELDS),
            interval=IntervalSpec.of(bounds),
            familiarity=model.familiarity.to_dict() if model.familiarity else {},
        )
        catalog.gpus.to_csv(root / "gpus.csv", index=False)
        catalog.llms.to_csv(root / "llms.csv", index=False)
        (root / "metadata.json").write_text(card.to_json())
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(MODEL_CODE),
            artifacts={
                **artifacts,
                "gpus": str(root / "gpus.csv"),
                "llms": str(root / "llms.csv"),
                "metadata": str(root / "metadata.json"),
            },
            code_paths=[str(package)],
            signature=signature(card.target),
            input_example=pd.DataFrame(EXAMPLE_QUERY),
            pip_requirements=served_requirements(),
        )
    return info.model_uri


def served_requirements() -> list[str]:
    """The served model's pip requirements: ``SERVED_PACKAGES`` at the versions installed here."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in SERVED_PACKAGES]


def _package_code(folder: Path) -> Path:
    """A copy of the ``wattgpu`` package for ``code_paths``: its code and the tables it reads.

    The features read the engine table (``data.engines.releases``), and the simulated serving
    loop of the tails the engine lines and clients (``data.engine_lines``, ``data.clients``),
    from the package's shipped data, which the copy would otherwise lack: a model served where
    the repository is not (plain `mlflow models serve` imports the copy) would find none. The
    copy carries them (``SERVED_TABLES``) where an installed wheel has them,
    ``wattgpu/shipped_data/``; the catalogues travel as artifacts.
    """
    package = Path(wattgpu.__file__).parent
    ignore = shutil.ignore_patterns("shipped_*", "__pycache__")
    copy = Path(shutil.copytree(package, folder / "wattgpu", ignore=ignore))
    (copy / "shipped_data").mkdir()
    for name in SERVED_TABLES:
        shutil.copyfile(SHIPPED_DATA_DIR / name, copy / "shipped_data" / name)
    return copy
