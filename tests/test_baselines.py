import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.learning.baselines import (
    NEAREST_METHOD,
    load_scaled_tdp,
    nearest_elsewhere,
    nearest_measured,
    prefill_ttft,
    roofline_itl,
)
from wattgpu.modeling.learning.evaluation import (
    MODEL_ON_NEAREST_ROWS,
    nearest_predictions,
    score_beside_nearest,
)
from wattgpu.modeling.learning.splits import split_indices


def test_load_scaled_tdp_by_hand():
    rows = pd.DataFrame(
        {
            "scenario": ["offline", "server", "server", "server"],
            "request_rate_rps": [np.nan, 0.1, 0.2, 4.0],
            "gpu_tdp_w": [700.0, 700.0, 700.0, 72.0],
        }
    )
    # 0.9 x 700, 0.2 x 700 below 0.2 req/s, 0.6 x 700 at 0.2 req/s, 0.6 x 72
    assert load_scaled_tdp(rows) == pytest.approx([630.0, 140.0, 420.0, 43.2])


def test_roofline_is_weight_read_time_not_divided_by_batch():
    rows = pd.DataFrame(
        {
            "llm_params_b": [8.03, 8.03],
            "gpu_memory_bandwidth_gb_s": [3350.0, 3350.0],
            "num_gpus": [1, 2],
            "batch_size": [1, 256],
        }
    )
    # 2 x 8.03e9 B / 3.35e12 B/s = 4.794 ms; with two GPUs half of it
    assert roofline_itl(rows) == pytest.approx([4.79403e-3, 2.39701e-3], rel=1e-5)


def _rows(gpus, bandwidths, models, params, values, tasks):
    return pd.DataFrame(
        {
            "gpu": gpus,
            "gpu_memory_bandwidth_gb_s": bandwidths,
            "model": models,
            "llm_params_b": params,
            "scenario": ["offline"] * len(gpus),
            "batch_size": [1.0] * len(gpus),
            "task": tasks,
            "itl_s": values,
            "itl_median_s": values,
        }
    )


def test_nearest_measured_gpu_reads_the_closest_bandwidth_of_the_same_workload():
    train = _rows(
        ["A", "A", "B", "C", "C"],
        [1000.0, 1000.0, 2000.0, 3000.0, 3000.0],
        ["m"] * 5,
        [8.0] * 5,
        [0.010, 0.012, 0.006, 0.004, 0.090],
        ["chat", "chat", "chat", "chat", "code"],
    )
    test = _rows(
        ["D", "D", "D"],
        [1600.0, 2500.0, 1600.0],
        ["m", "m", "m"],
        [8.0] * 3,
        [np.nan] * 3,
        ["chat", "chat", "math"],
    )
    # row 0: |log(1600/1000)| = 0.470, |log(1600/2000)| = 0.223 -> B, 0.006 s
    # row 1: |log(2500/2000)| = 0.223, |log(2500/3000)| = 0.182 -> C's "chat" row, 0.004 s
    # row 2: no training row runs "math" -> NaN
    got = nearest_measured(train, test, "itl_s", "gpu")
    assert got[:2] == pytest.approx([0.006, 0.004])
    assert np.isnan(got[2])
    # scaled by bandwidth neighbour / asked: 0.006 x 2000/1600 = 0.0075; 0.004 x 3000/2500 = 0.0048
    scaled = nearest_measured(train, test, "itl_s", "gpu", exponent=1.0)
    assert scaled[:2] == pytest.approx([0.0075, 0.0048])


def test_nearest_measured_averages_repeats_and_ties_and_skips_the_asked_gpu():
    train = _rows(
        ["A", "A", "C", "D"],
        [1000.0, 1000.0, 4000.0, 2000.0],
        ["m"] * 4,
        [8.0] * 4,
        [0.010, 0.014, 0.002, 0.5],
        ["chat"] * 4,
    )
    # asked: D at 2000 GB/s; D's own row is never read. A (0.693) and C (0.693) tie:
    # A's mean (0.010 + 0.014) / 2 = 0.012, averaged with C's 0.002 -> 0.007
    test = _rows(["D"], [2000.0], ["m"], [8.0], [np.nan], ["chat"])
    assert nearest_measured(train, test, "itl_s", "gpu") == pytest.approx([0.007])


def test_nearest_measured_llm_reads_the_closest_parameter_count_on_the_same_gpu():
    train = _rows(
        ["A", "A", "B"],
        [1000.0] * 2 + [2000.0],
        ["small", "big", "mid-on-B"],
        [1.0, 70.0, 8.0],
        [0.005, 0.050, 0.009],
        ["chat"] * 3,
    )
    # 8B on A: |log(8/1)| = 2.08, |log(8/70)| = 2.17 -> "small", 0.005 s; B's 8B is another GPU
    test = _rows(["A"], [1000.0], ["mid"], [8.0], [np.nan], ["chat"])
    assert nearest_measured(train, test, "itl_s", "llm") == pytest.approx([0.005])
    # scaled by params asked / neighbour (exponent -1): 0.005 x 8 / 1 = 0.04
    assert nearest_measured(train, test, "itl_s", "llm", exponent=-1.0) == pytest.approx([0.04])


def test_nearest_predictions_out_of_fold_and_the_model_on_the_same_rows():
    frame = _rows(
        ["A", "B", "C", "C"],
        [1000.0, 2000.0, 4000.0, 4000.0],
        ["m", "m", "m", "n"],
        [8.0] * 4,
        [0.008, 0.004, 0.002, 0.003],
        ["chat"] * 4,
    )
    nearest = nearest_predictions("itl", frame, "LOGO", list(split_indices(frame, "LOGO")))
    # LOGO, ITL scaled by bandwidth neighbour / asked:
    # A <- B: 0.004 x 2000/1000 = 0.008; B <- A and C tie (log 2 each), averaged:
    # A: 0.008 x 1000/2000 = 0.004, C: 0.002 x 4000/2000 = 0.004 -> 0.004;
    # C <- B: 0.004 x 2000/4000 = 0.002; C's "n" row: no other GPU ran "n" -> NaN
    assert nearest["pred"][:3].tolist() == pytest.approx([0.008, 0.004, 0.002])
    assert np.isnan(nearest["pred"][3])
    model = nearest.assign(pred=[0.008, 0.005, 0.002, 0.003])
    records = score_beside_nearest(model, nearest, "itl", "LOGO")
    assert [r["method"] for r in records] == [NEAREST_METHOD, MODEL_ON_NEAREST_ROWS]
    # both on the 3 answered rows; the model's errors 0, 25 %, 0 -> median 0
    assert [r["n_rows"] for r in records] == [3.0, 3.0]
    assert records[0]["mdape"] == pytest.approx(0.0)
    assert records[1]["mdape"] == pytest.approx(0.0)


def test_a_closed_loop_is_matched_on_its_users_not_on_its_achieved_rate():
    train = _rows(["A", "B"], [1000.0, 2000.0], ["m", "m"], [8.0] * 2, [0.01, 0.02], ["c"] * 2)
    train = train.assign(users=[16.0, 8.0], request_rate_rps=[3.1, 2.0], input_tokens=[112.3, 90])
    test = _rows(["C"], [1100.0], ["m"], [8.0], [np.nan], ["c"])
    test = test.assign(users=[8.0], request_rate_rps=[5.7], input_tokens=[126.4])
    # only B ran 8 users (its rate and prompt mean differ, as outcomes do): 0.02 s
    assert nearest_measured(train, test, "itl_s", "gpu") == pytest.approx([0.02])


def _elsewhere(gpus, bandwidths, models, params, batches, tokens, values, scenario="offline"):
    return pd.DataFrame(
        {
            "gpu": gpus,
            "gpu_memory_bandwidth_gb_s": bandwidths,
            "model": models,
            "llm_params_b": params,
            "scenario": scenario,
            "concurrency": batches,
            "input_tokens": [t[0] for t in tokens],
            "output_tokens": [t[1] for t in tokens],
            "itl_s": values,
        }
    )


def test_nearest_elsewhere_takes_the_llm_then_the_gpu_then_the_load_then_the_tokens():
    train = _elsewhere(
        ["A", "B", "B", "B", "B", "C", "B"],
        [1000.0, 2000.0, 2000.0, 2000.0, 2000.0, 3000.0, 2000.0],
        ["m", "m", "m", "m", "m", "m", "other"],
        [8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 7.0],
        [1.0, 1.0, 8.0, 8.0, 8.0, 8.0, 8.0],
        [(100, 100), (100, 100), (100, 100), (1000, 100), (100, 120), (100, 100), (100, 100)],
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7],
    )
    asked = _elsewhere(
        ["D", "D", "D"],
        [2200.0, 2200.0, 900.0],
        ["m", "new", "m"],
        [8.0, 7.5, 8.0],
        [6.0, 6.0, 6.0],
        [(100, 110), (100, 100), (1000, 100)],
        [np.nan] * 3,
    )
    # row 0: LLM m is measured; GPU nearest 2200 is B (2000); B's loads 1 and 8, |log 6/8| wins;
    # B at 8: tokens (100,100) 0.095, (1000,100) 2.3, (100,120) 0.087 -> 0.5
    # row 1: "new" is unmeasured: |log 7.5/8| = 0.065 < |log 7.5/7| = 0.069 -> m, then as
    # row 0 but tokens (100,100) exactly: 0.3
    # row 2: m, GPU nearest 900 is A (1000), its only load and tokens: 0.1
    got = nearest_elsewhere(train, asked, "itl_s")
    assert got == pytest.approx([0.5, 0.3, 0.1])
    # another scenario has no neighbour
    server = asked.iloc[:1].assign(scenario="server")
    assert np.isnan(nearest_elsewhere(train, server, "itl_s")).all()
    # a blank load is nearest a blank load: B's rows all blank, (100,100) twice -> 0.25
    blank = train.assign(concurrency=[8.0] + [np.nan] * 6)
    query = asked.iloc[:1].assign(concurrency=np.nan, output_tokens=100.0)
    assert nearest_elsewhere(blank, query, "itl_s") == pytest.approx([0.25])


def test_prefill_ttft_by_hand():
    rows = pd.DataFrame(
        {
            "llm_params_b": [8.0, 47.0],
            "llm_active_params_b": [np.nan, 13.0],
            "gpu_fp16_tensor_tflops": [1000.0, 1000.0],
            "num_gpus": [1, 2],
            "input_tokens": [500.0, 1000.0],
        }
    )
    # 2 x 8e9 x 500 / 1e15 = 8 ms; MoE: 2 x 13e9 (active) x 1000 / (1e15 x 2 GPUs) = 13 ms
    assert prefill_ttft(rows) == pytest.approx([0.008, 0.013])


def test_itl_error_is_reported_apart_on_rows_that_measured_the_served_statistic():
    from wattgpu.modeling.learning.evaluation import score_by_statistic

    oof = pd.DataFrame(
        {
            "gpu": ["A", "B", "C"],
            "model": ["m"] * 3,
            "scenario": ["server", "server", "offline"],
            "true": [0.010, 0.020, 0.040],
            "pred": [0.011, 0.030, 0.030],
            "itl_statistic": ["median", "median", "with_prefill"],
        }
    )
    records = {(r["method"], r["scenario"]): r for r in score_by_statistic(oof, "LOGO")}
    # median rows (both server): errors 10 % and 50 % -> median 30 %
    assert records["catboost (median-ITL rows)", "server"]["mdape"] == pytest.approx(30.0)
    # the with-prefill row: |0.03 - 0.04| / 0.04 = 25 %
    assert records["catboost (other-ITL rows)", "offline"]["mdape"] == pytest.approx(25.0)
    assert len(records) == 2


def test_the_model_card_names_the_served_statistic():
    from wattgpu.modeling.answering.card import ModelCard

    card = ModelCard(target="itl", domain={})
    assert card.statistic == "median gap between two consecutive tokens of one request, ms"
    assert ModelCard.from_json(card.to_json()).statistic == card.statistic
