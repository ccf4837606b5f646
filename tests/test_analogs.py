"""Measured analogs: the finder by hand, no held-out row among its own analogs, the served copy.

Expected values are worked out below from the module's stated rule (weight ``exp(-distance /
SCALE)``, distance in natural-log units), not read off the code.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.measurements import expand_paths, read_measurements, resolve_names
from wattgpu.modeling.learning import analogs, models
from wattgpu.modeling.learning.analogs import Evidence, blended, trust
from wattgpu.modeling.learning.evaluation import out_of_fold
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.learning.splits import source_family, split_indices
from wattgpu.modeling.physical.features import ANALOG_FEATURES, build_features
from wattgpu.modeling.physical.prior import refit_prior
from wattgpu.modeling.physical.targets import rows_with_target

QUERY = {
    "scenario": "server",
    "dtype": "bfloat16",
    "engine": "vllm",
    "num_gpus": 1.0,
    "llm_family": "llama",
    "model": "m",
    "gpu": "Q",
    "engine_year": 2025.0,
    "gpu_memory_bandwidth_gb_s": 1000.0,
    "tensor_tflops": 100.0,
    "llm_active_params_b": 8.0,
    "llm_params_b": 8.0,
    "concurrency": 16.0,
    "input_tokens": 512.0,
    "output_tokens": 256.0,
}


def _row(measured: float, **changes: object) -> dict:
    return {**QUERY, **changes, "itl_median_s": measured, "prior_itl_s": 0.01}


def _evidence() -> Evidence:
    rows = pd.DataFrame(
        [
            _row(0.02, gpu="A"),  # the same workload on a twin GPU: residual log 2
            _row(0.01, gpu="B", gpu_memory_bandwidth_gb_s=2000.0),  # twice the bandwidth
            _row(0.05, gpu="C", concurrency=64.0),  # four times the load: not an analog
            _row(0.05, gpu="D", engine="sglang"),  # another engine: not an analog
            _row(0.05, gpu="Q"),  # the query's own LLM on its own GPU: never its analog
            _row(0.012, gpu="Q", model="m3"),  # a sibling LLM of the same size on its GPU
            _row(0.015, gpu="A", model="m2", llm_active_params_b=16.0),  # a sibling LLM
            _row(0.05, gpu="A", llm_family="qwen"),  # another family: not an analog
        ]
    )
    return Evidence.of("itl", rows)


def test_the_finder_picks_and_weighs_analogs_by_hand():
    found = _evidence().find(pd.DataFrame([QUERY]))
    # twin: distance 0, weight 1; twice the bandwidth: ln 2, weight exp(-2 ln 2) = 1/4;
    # the sibling LLM on A: ln(16 / 8) + 0.5, weight exp(-(2 ln 2 + 1)) = 1 / (4 e);
    # the sibling LLM of the same size on the query's GPU: 0.5, weight 1 / e
    weights = np.array([1.0, 0.25, 0.25 / math.e, 1 / math.e])
    residuals = np.array([math.log(2.0), 0.0, math.log(1.5), math.log(1.2)])
    distances = np.array([0.0, math.log(2.0), math.log(2.0) + 0.5, 0.5])
    mean = (weights * residuals).sum() / weights.sum()
    assert found.count[0] == 4
    assert found.residual[0] == pytest.approx(mean)
    assert found.residual[0] == pytest.approx(0.466421, abs=1e-6)
    spread = math.sqrt((weights * (residuals - mean) ** 2).sum() / weights.sum())
    assert found.spread[0] == pytest.approx(spread)
    values = [0.02, 0.01, 0.015, 0.012]
    assert found.value[0] == pytest.approx((weights * values).sum() / weights.sum())
    assert found.distance[0] == pytest.approx((weights * distances).sum() / weights.sum())
    gpu_distances = np.array([0.0, math.log(2.0), 0.0, 0.0])
    assert found.gpu_distance[0] == pytest.approx((weights * gpu_distances).sum() / weights.sum())
    assert found.gpu[0] == "A" and found.same_llm[0]
    assert found.support()[0] == "4 rows, closest on A, same LLM"


def test_an_analog_weighs_less_towards_the_edge_of_its_window():
    one = Evidence.of("itl", pd.DataFrame([_row(0.02, gpu="A", concurrency=24.0)]))
    # the analog at 1.5x the query's load: taper 1 - ln 1.5 / ln 2 = 0.41504, its weight
    # exp(-ln 1.5 / 0.5) = 1 / 2.25 times that, its count the taper
    found = one.find(pd.DataFrame([QUERY]))
    assert found.rows[0] == 1
    assert found.count[0] == pytest.approx(1 - math.log(1.5) / math.log(2.0))
    assert found.count[0] == pytest.approx(0.415037, abs=1e-6)
    assert found.residual[0] == pytest.approx(math.log(2.0))
    # the query's load moving to the edge of the window: the analog's count and trust fall to
    # 0 continuously, so the answer never jumps when the analog leaves the window
    loads = [16.0, 13.0, 12.5, 12.1, 12.0001, 12.0, 11.9]
    counts = one.find(pd.DataFrame([{**QUERY, "concurrency": c} for c in loads])).count
    assert np.all(np.diff(counts) <= 0)
    assert counts[-3] < 0.01 and counts[-1] == 0.0


def test_a_query_with_no_analog_keeps_the_trees_answer():
    lonely = pd.DataFrame([{**QUERY, "engine": "tgi"}])
    found = _evidence().find(lonely)
    assert found.count[0] == 0 and np.isnan(found.residual[0])
    assert found.support()[0] == ""
    assert trust(found.columns())[0] == 0.0
    assert blended(np.array([0.3]), found.columns())[0] == 0.3


def test_agreeing_analogs_outweigh_the_trees_and_scattered_ones_do_not():
    # trust = count / (count + k) / (1 + spread / s): on far GPUs k = 0.5, s = 0.1; measured on
    # the query's own GPU (GPU distance 0) k = 0.1, s = 0.4
    columns = {
        "analog_count": np.array([5.0, 5.0, 1.0, 2.0]),
        "analog_spread": np.array([0.0, 0.1, 0.0, 0.2]),
        "analog_gpu_distance": np.array([5.0, 5.0, 5.0, 0.0]),
        "analog_residual": np.array([0.2, 0.2, 0.2, 0.2]),
    }
    expected = [5 / 5.5, 5 / 5.5 / 2, 1 / 1.5, 2 / 2.1 / 1.5]  # 0.909, 0.455, 0.667, 0.635
    assert trust(columns) == pytest.approx(expected, rel=1e-9)
    answer = blended(np.full(4, 0.1), columns)
    assert answer == pytest.approx([0.2 * g + 0.1 * (1 - g) for g in expected], rel=1e-9)


def test_the_served_evidence_finds_what_the_fitted_one_finds(tmp_path):
    evidence = _evidence()
    path = tmp_path / "evidence.csv"
    evidence.to_frame().to_csv(path, index=False)
    served = Evidence.from_frame(pd.read_csv(path))
    asked = pd.DataFrame([QUERY, {**QUERY, "gpu": "A"}, {**QUERY, "concurrency": np.nan}])
    for name, values in evidence.find(asked).columns().items():
        np.testing.assert_allclose(served.find(asked).columns()[name], values, err_msg=name)


# --- on the shipped measurements ----------------------------------------------------------------


@pytest.fixture(scope="module")
def itl_rows(catalog) -> pd.DataFrame:
    raw = read_measurements(expand_paths([SHIPPED_DATA_DIR / "measurements"]))
    resolved, _ = resolve_names(raw, catalog)
    return rows_with_target("itl", build_features(resolved, catalog))


@pytest.mark.slow
@pytest.mark.parametrize(("split", "held_name"), [("LOGO", "gpu"), ("LOSO", "source")])
def test_a_held_out_groups_own_rows_never_shape_its_analogs(itl_rows, split, held_name):
    # a group some of whose rows have analogs in the other groups
    held_value = "NVIDIA H200 SXM" if held_name == "gpu" else "argonne"
    groups = itl_rows["gpu"].to_numpy() if held_name == "gpu" else source_family(itl_rows)
    held = groups == held_value
    perturbed = itl_rows.copy()
    for column in ("itl_s", "itl_median_s"):
        perturbed.loc[held, column] = perturbed.loc[held, column] * 1.7
    recipe = recipe_of("itl", "fast")
    before = out_of_fold(recipe, itl_rows, split, prepare=refit_prior)
    after = out_of_fold(recipe, perturbed, split, prepare=refit_prior)
    for column in ("scaled", *ANALOG_FEATURES):
        np.testing.assert_array_equal(before[column][held], after[column][held], err_msg=column)
    # the held-out rows had analogs, and other folds' rows that lean on them saw the change
    assert (before["analog_count"][held] > 0).any()
    moved = ~np.isclose(before["analog_residual"], after["analog_residual"], equal_nan=True)
    assert moved[~held].any()


def test_the_served_model_finds_the_analogs_the_evaluation_found(itl_rows):
    recipe = recipe_of("itl", "fast")
    # the B200's fold: some of its rows have analogs on the other GPUs, some have none
    train, test = next(
        (train, test)
        for train, test in split_indices(itl_rows, "LOGO")
        if itl_rows["gpu"].iloc[test[0]] == "NVIDIA B200"
    )
    model = models.fit(recipe, itl_rows.iloc[train], {"iterations": 10}, threads=1)
    oof = out_of_fold(recipe, itl_rows, "LOGO", params={"iterations": 10})
    served = analogs.find_in(model.evidence, itl_rows.iloc[test]).columns()
    for name in ANALOG_FEATURES:
        np.testing.assert_allclose(
            served[name], oof[name].to_numpy()[test], rtol=1e-12, err_msg=name
        )
    # and the model's answer on a row without analogs is the trees' alone
    answer = models.predict_si("itl", model, itl_rows.iloc[test])
    bare = models.predict_si(
        "itl", models.Regressor(**{**vars(model), "evidence": None}), itl_rows.iloc[test]
    )
    none = ~(served["analog_count"] > 0)
    assert none.any() and (~none).any()
    np.testing.assert_allclose(answer[none], bare[none], rtol=1e-12)
    assert not np.allclose(answer[~none], bare[~none])
