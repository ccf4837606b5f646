"""`wattgpu serve` writes answers faster than MLflow's scoring server, and writes the same text."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from mlflow.pyfunc import scoring_server

from wattgpu.lifecycle.serving import _fast_predictions_to_json


def both(raw, metadata=None) -> tuple[str, str]:
    original = scoring_server.predictions_to_json
    ours, theirs = io.StringIO(), io.StringIO()
    original(raw, theirs, metadata)
    _fast_predictions_to_json(original)(raw, ours, metadata)
    return ours.getvalue(), theirs.getvalue()


def test_an_answer_frame_is_written_byte_for_byte_as_mlflow_writes_it():
    frame = pd.DataFrame(
        {
            "gpu": pd.array(["NVIDIA L4", None, "é ✓"], dtype="str"),
            "prediction": [1 / 3, 2.5, 1e-300],
            "lower": np.array([None, 1.0, 7], dtype=object),
            "num_gpus": np.array([1, 2, 4]),
            "warnings": ["", 'quote " and \\ backslash', "x"],
        }
    )
    ours, theirs = both(frame)
    assert ours == theirs
    # by hand: the first record
    assert ours.startswith(
        '{"predictions": [{"gpu": "NVIDIA L4", "prediction": 0.3333333333333333, "lower": null, '
        '"num_gpus": 1, "warnings": ""}'
    )


@pytest.mark.parametrize("raw", [np.array([1.5, 2.0]), [{"a": 1}], pd.DataFrame({"a": []})])
def test_anything_else_is_mlflows_own_answer(raw):
    ours, theirs = both(raw)
    assert ours == theirs
