from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.answering.inference import interval_notes
from wattgpu.modeling.answering.queries import check_query_columns
from wattgpu.modeling.learning.interval_check import (
    check_intervals,
    held_out_intervals,
    interval_cells,
    interval_figures,
)
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.learning.uncertainty import (
    Calibration,
    IntervalModel,
    Intervals,
    calibrate,
    conformal_quantiles,
    fit_difficulty,
    fit_interval,
    intervals,
)
from wattgpu.modeling.learning.unseen import (
    MEASURED,
    UNSEEN_GPU,
    UNSEEN_LLM,
    UNSEEN_SETUP,
    Seen,
    novelty_labels,
)
from wattgpu.modeling.physical.features import build_features

FAST = recipe_of("power", "fast")
WITHOUT = FAST.difficulty_without()
ITL = recipe_of("itl", "fast")  # latencies: no power limit caps the bounds


def test_conformal_quantiles_by_hand():
    scores = np.arange(10, 0, -1, dtype=float)  # 10 scores, 1 ... 10, unsorted
    # coverage 0.8: tails 0.1; k_low = floor(11 x 0.1) = 1, k_high = ceil(11 x 0.9) = 10
    assert conformal_quantiles(scores, 0.8) == (1.0, 10.0)
    # coverage 0.5: tails 0.25; k_low = floor(11 x 0.25) = 2, k_high = ceil(11 x 0.75) = 9
    assert conformal_quantiles(scores, 0.5) == (2.0, 9.0)


def test_interval_figures_by_hand():
    true = np.array([1.0, 2.0, 3.0, 4.0])
    pred = np.array([2.0, 2.0, 2.0, 2.0])
    lower = np.array([0.5, 1.0, 3.5, 3.0])
    upper = np.array([1.5, 3.0, 4.0, np.nan])  # the last row has no interval
    figures = interval_figures(true, pred, lower, upper)
    # inside: 1 in [0.5, 1.5], 2 in [1, 3], 3 not in [3.5, 4] -> 2 of 3
    assert figures["interval_coverage"] == pytest.approx(2 / 3)
    # widths 1/2, 2/2, 0.5/2 -> median 0.5
    assert figures["interval_width"] == pytest.approx(0.5)


def test_a_scenario_gets_its_own_factors_only_from_enough_rows_of_two_gpus():
    # 100 offline scores 1..100 from two GPUs; 120 server scores -1..-120, all from GPU "a"
    scores = np.concatenate([np.arange(1.0, 101.0), -np.arange(1.0, 121.0)])
    scenarios = np.array(["offline"] * 100 + ["server"] * 120)
    gpus = np.array(["a", "b"] * 50 + ["a"] * 120)
    calibration = calibrate(scores, scenarios, gpus, gpus, 100, 0.9)
    # offline alone, coverage 0.9: k_low = floor(101 x 0.05) = 5, k_high = ceil(101 x 0.95) = 96
    assert calibration.by_scenario == {"offline": (5.0, 96.0)}
    # server: one GPU -> the pooled factors, not validated. Pooled sorted scores: -120 .. -1,
    # 1 .. 100 (220); k_low = floor(221 x 0.05) = 11 -> -110; k_high = ceil(221 x 0.95) = 210
    # -> the 210th, 90 (120 negatives, then 1 .. 90)
    assert (calibration.q_low, calibration.q_high) == (-110.0, 90.0)
    assert calibration.not_validated == ("server",)
    # with fewer than 100 rows a scenario of two GPUs is pooled too, but validated; a scenario
    # with no rows at all (no server among the first 99) is none of its business
    few = calibrate(scores[:99], scenarios[:99], gpus[:99], gpus[:99], 100, 0.9)
    assert few.by_scenario == {} and few.not_validated == ()


def test_the_factors_of_a_row_are_its_scenarios_or_the_pooled_ones():
    calibration = Calibration(-1.0, 1.0, {"server": (-0.5, 2.0)})
    low, high = calibration.factors(np.array(["server", "offline", "server"]))
    assert low.tolist() == [-0.5, -1.0, -0.5] and high.tolist() == [2.0, 1.0, 2.0]


def _rows(catalog, batches, gpus=("NVIDIA H100 SXM5", "NVIDIA L4")):
    frame = pd.DataFrame(
        {
            "gpu": list(gpus) * len(batches),
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "scenario": "offline",
            "batch_size": np.repeat(batches, len(gpus)).astype(float),
        }
    )
    return build_features(frame, catalog)


def _kinds_model(seen: Seen) -> IntervalModel:
    return IntervalModel(
        "itl",
        (),
        1.0,
        {
            MEASURED: Calibration(-0.1, 0.1),
            UNSEEN_GPU: Calibration(-0.3, 0.4),
            UNSEEN_LLM: Calibration(-0.2, 0.2),
            UNSEEN_SETUP: Calibration(-0.5, 0.6),
        },
        seen,
    )


def test_a_row_new_in_several_ways_gets_the_widest_of_their_factors(small_catalog):
    rows = _rows(small_catalog, [1, 1], gpus=("NVIDIA H100 SXM5",))
    rows["engine_year"] = [2024.0, 2026.0]  # the same GPU, LLM and engine, two releases
    seen = Seen.of(rows.iloc[:1])
    model = _kinds_model(seen)
    low, high, novelty, kind, validated = model.factors(rows)
    # row 0 was trained on: measured (-0.1, 0.1); row 1's set-up is new: (-0.5, 0.6)
    assert novelty.tolist() == [MEASURED, UNSEEN_SETUP] and kind.tolist() == novelty.tolist()
    assert low.tolist() == [-0.1, -0.5] and high.tolist() == [0.1, 0.6]
    # a GPU nobody measured, under a set-up other GPUs ran: an unseen GPU (-0.3, 0.4)
    l4 = _rows(small_catalog, [1, 1], gpus=("NVIDIA L4",)).assign(engine_year=[2024.0, 2026.0])
    low, high, novelty, kind, _ = model.factors(l4)
    assert novelty[0] == UNSEEN_GPU and (low[0], high[0]) == (-0.3, 0.4)
    # ... and under a set-up nobody ran: new both ways, the set-up's factors are the wider
    assert novelty[1] == f"{UNSEEN_GPU} + {UNSEEN_SETUP}"
    assert kind[1] == UNSEEN_SETUP and (low[1], high[1]) == (-0.5, 0.6)
    assert validated.all()


def test_a_model_without_what_it_saw_treats_every_row_as_an_unseen_gpu(small_catalog):
    rows = _rows(small_catalog, [1, 8])
    model = IntervalModel("itl", (), 1.0, {UNSEEN_GPU: Calibration(-0.3, 0.4)})
    low, high, novelty, kind, validated = model.factors(rows)
    assert set(kind) == {UNSEEN_GPU} and (low == -0.3).all() and validated.all()


def test_interval_is_the_prediction_times_the_factors_at_the_rows_difficulty(small_catalog):
    rows = _rows(small_catalog, [1, 8, 32, 64])
    # every residual 0.1 -> the difficulty model learns log 0.1 everywhere -> d = 0.1
    model = fit_difficulty(FAST, rows, np.full(len(rows), 0.1))
    assert model == pytest.approx(0.1)  # alike residuals: one difficulty, no trees to fit
    bounds = IntervalModel("power", WITHOUT, model, {UNSEEN_GPU: Calibration(-2.0, 3.0)})
    found = intervals(bounds, rows, np.full(len(rows), 50.0))
    assert found.lower == pytest.approx(np.full(len(rows), 50.0 * np.exp(-0.2)), rel=1e-3)
    assert found.upper == pytest.approx(np.full(len(rows), 50.0 * np.exp(0.3)), rel=1e-3)
    # 100 W: the L4's interval ends at its 72 W power limit, the H100's (700 W) does not
    found = intervals(bounds, rows, np.full(len(rows), 100.0))
    l4 = (rows["gpu"] == "NVIDIA L4").to_numpy()
    assert found.upper[l4] == pytest.approx(72.0)
    assert found.upper[~l4] == pytest.approx(100.0 * np.exp(0.3))


def _residual_rows(small_catalog):
    rows = _rows(small_catalog, [1, 2, 4, 8, 16, 32, 64, 128])
    groups = np.tile(["a", "b", "c", "d"], len(rows) // 4)
    true = np.linspace(100.0, 200.0, len(rows))
    pred = true * np.linspace(0.8, 1.3, len(rows))
    return rows, groups, true, pred


def test_a_held_out_groups_own_residuals_never_shape_its_interval(small_catalog):
    rows, groups, true, pred = _residual_rows(small_catalog)

    def bounded(true: np.ndarray) -> Intervals:
        residuals = {UNSEEN_GPU: np.log(true / pred)}
        return held_out_intervals(ITL, rows, residuals, {"LOGO": (pred, groups, {})})["LOGO"]

    before = bounded(true)
    # group a's measurements made ten times worse: a's interval stays, the others' widen
    after = bounded(np.where(groups == "a", true * 10.0, true))
    a = groups == "a"
    assert after.lower[a] == pytest.approx(before.lower[a])
    assert after.upper[a] == pytest.approx(before.upper[a])
    assert (after.upper[~a] - after.lower[~a] > before.upper[~a] - before.lower[~a]).all()


def test_the_checked_interval_is_the_served_one(small_catalog):
    rows, groups, true, pred = _residual_rows(small_catalog)
    residuals = {UNSEEN_GPU: np.log(true / pred), MEASURED: 0.5 * np.log(true / pred)}
    checked = held_out_intervals(ITL, rows, residuals, {"LOGO": (pred, groups, {})})["LOGO"]
    a = groups == "a"
    # what a server would answer for group a's rows, trained on the others
    served = fit_interval(ITL, rows[~a], {k: r[~a] for k, r in residuals.items()})
    answer = intervals(served, rows[a], pred[a])
    assert checked.lower[a].tolist() == answer.lower.tolist()
    assert checked.upper[a].tolist() == answer.upper.tolist()
    assert checked.kind[a].tolist() == answer.kind.tolist()


def test_a_scenario_measured_on_one_gpu_is_served_the_pooled_interval_with_a_warning(
    small_catalog,
):
    rows = _rows(small_catalog, list(range(1, 101)))  # 200 rows, 100 per GPU
    h100 = (rows["gpu"] == "NVIDIA H100 SXM5").to_numpy()
    rows["scenario"] = np.where(h100 & (np.arange(len(rows)) % 4 == 0), "server", "offline")
    spread = 0.1 * np.sin(np.arange(len(rows)))
    bounds = fit_interval(FAST, rows, {UNSEEN_GPU: spread})
    calibration = bounds.calibrations[UNSEEN_GPU]
    assert "server" not in calibration.by_scenario
    assert calibration.not_validated == ("server",)
    # an unseen GPU's server query: the pooled factors, and it says so
    query = _rows(small_catalog, [4], gpus=("NVIDIA L4",)).assign(scenario="server")
    query["gpu"] = "NVIDIA X1"  # a GPU the rows never had
    found = intervals(bounds, query, np.array([50.0]))
    assert found.kind.tolist() == [UNSEEN_GPU] and not found.validated[0]
    pooled = np.array([calibration.q_low, calibration.q_high])
    assert np.log(np.r_[found.lower, found.upper] / 50.0) == pytest.approx(pooled * 0.1, rel=0.5)
    notes = interval_notes("power", np.array(["server"]), found)
    assert notes.tolist() == ["server power intervals not validated on an unseen GPU"]


def test_a_gpu_by_its_specs_far_outside_the_catalogue_gets_a_wider_interval(small_catalog):
    rows = _rows(small_catalog, list(range(1, 41)))
    # measured set-ups err by little, held-out GPUs by much more
    wobble = np.sin(np.arange(len(rows)))
    residuals = {MEASURED: 0.02 * wobble, UNSEEN_GPU: 0.3 * wobble}
    bounds = fit_interval(FAST, rows, residuals)
    spec_sheet = {
        "gpu": "NVIDIA X1",
        "gpu_memory_bandwidth_gb_s": 20000.0,
        "gpu_fp16_tensor_tflops": 15000.0,
        "gpu_tdp_w": 2000.0,
        "gpu_memory_gb": 1000.0,
    }
    queries = pd.DataFrame(
        [
            {"gpu": "NVIDIA H100 SXM5", "model": "meta-llama/Llama-3.1-8B-Instruct"},
            {**spec_sheet, "model": "meta-llama/Llama-3.1-8B-Instruct"},
        ]
    ).assign(scenario="offline", batch_size=8.0)
    features = build_features(check_query_columns(queries, small_catalog), small_catalog)
    found = intervals(bounds, features, np.array([100.0, 100.0]))
    width = found.upper - found.lower
    assert width[1] > 2 * width[0]
    assert found.novelty.tolist()[0] == MEASURED
    assert UNSEEN_GPU in found.novelty[1]


def test_interval_cells_by_hand():
    oof = pd.DataFrame(
        {
            "gpu": ["A", "A", "B", "B"],
            "scenario": ["offline", "offline", "offline", "server"],
            "true": [1.0, 5.0, 2.0, 2.0],
            "pred": [2.0, 4.0, 2.0, 1.0],
        }
    )
    held = Intervals(
        np.array([0.5, 1.0, 1.0, 1.0]),
        np.array([1.5, 3.0, 3.0, 3.0]),
        np.array([UNSEEN_GPU] * 4, dtype=object),
        np.array([UNSEEN_GPU] * 4, dtype=object),
        np.array([True, True, True, False]),
    )
    table = interval_cells(oof, "LOGO", held, oof["gpu"].to_numpy())
    assert table[["gpu", "scenario", "n_rows"]].values.tolist() == [
        ["A", "offline", 2],
        ["B", "offline", 1],
        ["B", "server", 1],
    ]
    # A: 1 in [0.5, 1.5] yes, 5 in [1, 3] no -> 1/2; widths 1/2 and 2/4 -> median 0.5
    # B offline: 2 in [1, 3], width 2/2 = 1; B server: 2 in [1, 3], width 2/1 = 2
    assert table["interval_coverage"].tolist() == pytest.approx([0.5, 1.0, 1.0])
    assert table["interval_width"].tolist() == pytest.approx([0.5, 1.0, 2.0])
    assert table["validated"].tolist() == [1.0, 1.0, 0.0]
    assert table["source"].isna().all() and set(table["split"]) == {"LOGO"}


def test_every_split_is_checked_with_its_own_predictions_and_groups(small_catalog):
    rows, groups, true, pred = _residual_rows(small_catalog)
    oof = {
        "LOGO": pd.DataFrame({"true": true, "pred": pred, "scenario": "offline"}),
        "CV": pd.DataFrame({"true": true, "pred": 0.5 * (true + pred), "scenario": "offline"}),
    }
    folds = {"LOGO": np.searchsorted(["a", "b", "c", "d"], groups), "CV": np.arange(16) % 2}
    check = check_intervals(ITL, rows, oof, folds)
    assert set(check.by_split) == {"LOGO", "CV"}
    assert set(check.cells["split"]) == {"LOGO", "CV"}
    assert check.cells.loc[check.cells["split"] == "CV", "fold"].tolist() == ["fold 1", "fold 2"]
    assert check.held_out["CV"].lower.shape == (16,)


def test_the_interval_sees_a_members_inputs_and_the_analogs(small_catalog):
    from wattgpu.modeling.learning.models import Pools
    from wattgpu.modeling.physical.features import ANALOG_FEATURES

    for target in ("power", "itl", "ttft"):
        # the difficulty model sees what the last member sees, and the analogs no member sees
        for name in ("full", "fast"):
            chosen = recipe_of(target, name)
            last = set(chosen.members[-1])
            assert last - set(chosen.difficulty_without()) == set(ANALOG_FEATURES)
            assert set(chosen.difficulty_without()) < last
    pools = Pools("power", _rows(small_catalog, [1, 8]))
    assert pools(WITHOUT) is pools(WITHOUT)


def test_a_scenario_is_calibrated_on_its_own_residuals(small_catalog):
    rows = _rows(small_catalog, list(range(1, 101)))  # 200 rows, 100 per GPU
    # each scenario on both GPUs (the rows alternate GPUs)
    rows["scenario"] = np.where(np.arange(len(rows)) // 2 % 2 == 0, "offline", "server")
    # offline residuals small, server residuals ten times larger
    spread = np.where(rows["scenario"] == "offline", 0.02, 0.2) * np.sin(np.arange(len(rows)))
    bounds = fit_interval(FAST, rows, {UNSEEN_GPU: spread})
    assert set(bounds.calibrations[UNSEEN_GPU].by_scenario) == {"offline", "server"}
    query = rows.assign(gpu="NVIDIA X1")  # every row an unseen GPU
    found = intervals(bounds, query, np.full(len(rows), 100.0))
    width = (found.upper - found.lower) / 100.0
    offline = (rows["scenario"] == "offline").to_numpy()
    assert np.median(width[~offline]) > 3 * np.median(width[offline])


def test_novelty_is_worded_per_row_in_the_kinds_order():
    unseen = {
        UNSEEN_GPU: np.array([True, False, False, True, True]),
        UNSEEN_LLM: np.array([False, False, True, True, True]),
        UNSEEN_SETUP: np.array([True, False, False, False, True]),
    }
    assert novelty_labels(unseen, 5).tolist() == [
        "unseen GPU + unseen set-up",
        "measured",
        "unseen LLM",
        "unseen GPU + unseen LLM",
        "unseen GPU + unseen LLM + unseen set-up",
    ]
    # a kind not judged (no mask) is no novelty
    assert novelty_labels({UNSEEN_LLM: np.array([True, False])}, 2).tolist() == [
        "unseen LLM",
        "measured",
    ]


def test_each_unchecked_row_gets_the_note_of_its_own_scenario_and_kind():
    n = 5
    kinds = [UNSEEN_GPU, UNSEEN_GPU, UNSEEN_SETUP, UNSEEN_GPU, UNSEEN_SETUP]
    bounded = Intervals(
        lower=np.ones(n),
        upper=np.ones(n),
        novelty=np.full(n, "", dtype=object),
        kind=np.array(kinds, dtype=object),
        validated=np.array([False, True, False, True, False]),
    )
    scenarios = np.array(["server", "offline", "server", "server", "offline"], dtype=object)
    assert interval_notes("itl", scenarios, bounded).tolist() == [
        "server itl intervals not validated on an unseen GPU",
        "",
        "server itl intervals not validated on an unseen set-up",
        "",
        "offline itl intervals not validated on an unseen set-up",
    ]
    every_row_checked = replace(bounded, validated=np.ones(n, dtype=bool))
    assert interval_notes("itl", scenarios, every_row_checked).tolist() == [""] * n
