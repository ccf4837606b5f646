"""Tails as answers: ITL and TTFT at p90 and p99, the median times the simulation's own ratio."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from test_fast_path import load_model
from test_serving_loop import costs, host, scheduler

from wattgpu.errors import QueryError
from wattgpu.modeling.answering.inference import OUTPUT_COLUMNS, output_columns, predict_queries
from wattgpu.modeling.answering.queries import check_queries
from wattgpu.modeling.answering.tails import simulated_tails, tails
from wattgpu.modeling.learning.uncertainty import Calibration, IntervalModel
from wattgpu.modeling.learning.unseen import UNSEEN_GPU
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.serving.jitter import Jitter
from wattgpu.modeling.serving.loop import ONESHOT, Client, simulate
from wattgpu.modeling.serving.run import simulate_rows
from wattgpu.modeling.serving.scheduler import PREFILL_FIRST

NAN = math.nan
LLM_8B = "meta-llama/Llama-3.1-8B-Instruct"


def two_prompts_at_once() -> dict[str, np.ndarray]:
    """The simulator's statistics of a case worked out by hand (tests/test_serving_loop.py).

    Two 1,000-token prompts sent together, 10 output tokens each, a budget of one prompt a step:
    A's prefill (0.1 s), B's (0.1 s) while A waits, then both decode in 10 ms steps. TTFT: A
    0.1 s, B 0.2 s. ITL: A's first gap spans B's prefill and a decode step (0.11 s); A's 8
    others and B's 9 are 10 ms: 18 gaps, 17 of 10 ms and one of 110 ms.
    """
    client = Client(
        kind=np.array([ONESHOT]),
        users=np.array([2.0]),
        rate=np.zeros(1),
        prompt=np.array([1000.0]),
        answer=np.array([10.0]),
        prompt_shape=np.ones((1, 21)),
        answer_shape=np.ones((1, 21)),
        warmup=np.zeros(1),
        measured=np.array([2.0]),
    )
    return simulate(costs(), host(), scheduler(PREFILL_FIRST, budget=1000), client)


def test_a_tail_is_the_median_times_the_ratio_of_a_simulated_run_worked_out_by_hand():
    run = two_prompts_at_once()
    # TTFT over two requests: the median is the lower, 0.1 s; p90 and p99 the higher, 0.2 s
    assert (run["ttft_p50_s"][0], run["ttft_p90_s"][0]) == pytest.approx((0.1, 0.2))
    ttft = tails("ttft", run, np.array([300.0]))
    # 300 ms x 0.2 / 0.1 = 600 ms at p90 and at p99
    np.testing.assert_allclose(ttft["p90"], [600.0])
    np.testing.assert_allclose(ttft["p99"], [600.0])
    # ITL: 17 of 18 gaps are 10 ms, so the median and p90 (the 16.2th gap) are 10 ms and
    # p99 (the 17.82th) the 110 ms gap: 40 ms x 1 = 40 ms and 40 ms x 11 = 440 ms
    itl = tails("itl", run, np.array([40.0]))
    np.testing.assert_allclose(itl["p90"], [40.0])
    np.testing.assert_allclose(itl["p99"], [440.0])
    assert itl["tails"].tolist() == ttft["tails"].tolist() == ["simulated"]


def test_no_median_or_no_simulated_median_gives_no_tail():
    simulated = {
        "itl_p50_s": np.array([0.01, 0.0, NAN, 0.01]),
        "itl_p90_s": np.array([0.02, 0.01, 0.02, 0.02]),
        "itl_p99_s": np.array([0.05, 0.02, 0.05, 0.05]),
    }
    out = tails("itl", simulated, np.array([10.0, 10.0, 10.0, NAN]))
    # 10 x 0.02 / 0.01 = 20, 10 x 5 = 50; a simulated median of 0 or none, or no answer: none
    np.testing.assert_allclose(out["p90"], [20.0, NAN, NAN, NAN])
    np.testing.assert_allclose(out["p99"], [50.0, NAN, NAN, NAN])
    assert out["tails"].tolist() == ["simulated", "", "", ""]


def test_only_the_latency_answers_have_tails_after_their_interval():
    assert output_columns("power") == OUTPUT_COLUMNS
    for target in ("itl", "ttft"):
        columns = output_columns(target)
        after = columns.index("upper")
        assert columns[after + 1 : after + 4] == ("p90", "p99", "tails")
        assert [c for c in columns if c not in ("p90", "p99", "tails")] == list(OUTPUT_COLUMNS)


QUERIES = pd.DataFrame(
    [
        {"gpu": "H100", "model": LLM_8B, "scenario": "server", "concurrency": 64},
        {"gpu": "L4", "model": LLM_8B, "scenario": "server", "request_rate_rps": 1.0},
        {"gpu": "A10", "model": LLM_8B, "scenario": "offline", "batch_size": 16},
        # 141 GB of weights on a 24 GB L4: no number, so no tails either
        {"gpu": "L4", "model": "meta-llama/Llama-3.1-70B-Instruct", "scenario": "offline"},
    ]
)


def test_an_answer_gives_its_tails_and_keeps_its_median_and_interval(catalog):
    model, card = load_model("itl")
    bounds = IntervalModel("itl", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    answer = predict_queries(card, model, bounds, catalog, QUERIES)
    assert tuple(answer.columns) == output_columns("itl")
    # the ratio of each query's own simulated serving loop (closed, Poisson, batch)
    rows = build_features(check_queries(QUERIES, catalog), catalog)
    simulated = simulate_rows(rows.iloc[:3])
    median = answer["prediction"].to_numpy(float)[:3]
    for level in ("p90", "p99"):
        ratio = (simulated[f"itl_{level}_s"] / simulated["itl_p50_s"]).to_numpy(float)
        np.testing.assert_allclose(answer[level][:3], median * ratio, rtol=1e-12)
    assert (answer["p99"][:3] >= answer["p90"][:3]).all()
    # the interval is the median's, as before
    np.testing.assert_allclose(answer["lower"][:3], median * np.exp(-0.5), rtol=1e-12)
    assert answer["tails"].tolist() == ["simulated", "simulated", "simulated", ""]
    assert answer.loc[3, ["prediction", "lower", "upper", "p90", "p99"]].isna().all()


def test_a_model_with_a_step_jitter_answers_the_tails_of_its_jittered_loop(catalog):
    model, card = load_model("itl")
    assert card.jitter == {}  # a model trained before the jitter answers as before
    jitter = Jitter((math.log(1.25), math.log(2.0)), rows=10)
    jittery = replace(card, jitter=jitter.to_dict())
    bounds = IntervalModel("itl", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    plain = predict_queries(card, model, bounds, catalog, QUERIES)
    answer = predict_queries(jittery, model, bounds, catalog, QUERIES)
    rows = build_features(check_queries(QUERIES, catalog), catalog)
    simulated = simulate_rows(rows.iloc[:3], jitter=jitter)
    median = answer["prediction"].to_numpy(float)[:3]
    np.testing.assert_array_equal(median, plain["prediction"].to_numpy(float)[:3])
    for level in ("p90", "p99"):
        ratio = (simulated[f"itl_{level}_s"] / simulated["itl_p50_s"]).to_numpy(float)
        np.testing.assert_allclose(answer[level][:3], median * ratio, rtol=1e-12)
    assert not np.allclose(answer["p99"][:3], plain["p99"][:3])
    # the p90 leaves the median on every query (the step 1.25 times its time at the 0.9 level)
    assert (answer["p90"][:3] > median).all()


def test_ttft_tails_come_from_the_simulated_ttft(catalog):
    rows = build_features(check_queries(QUERIES, catalog), catalog)
    median = np.array([100.0, 200.0, NAN, NAN])
    out = simulated_tails("ttft", rows, median)
    simulated = simulate_rows(rows.iloc[:2])
    ratio = (simulated["ttft_p99_s"] / simulated["ttft_p50_s"]).to_numpy(float)
    np.testing.assert_allclose(out["p99"][:2], median[:2] * ratio, rtol=1e-12)
    assert np.isnan(out["p90"][2:]).all() and out["tails"].tolist()[2:] == ["", ""]


def test_a_serving_loop_that_cannot_be_simulated_is_refused_naming_the_field(catalog):
    rows = build_features(check_queries(QUERIES.head(1), catalog), catalog)
    rows = {**rows, "client": np.array(["nobody"], dtype=object)}
    with pytest.raises(QueryError, match=r"client must be one of .*; got 'nobody'$"):
        simulated_tails("itl", rows, np.array([10.0]))


def test_a_power_answer_has_no_tails(catalog):
    model, card = load_model("power")
    bounds = IntervalModel("power", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    answer = predict_queries(card, model, bounds, catalog, QUERIES.head(2))
    assert tuple(answer.columns) == OUTPUT_COLUMNS and "p90" not in answer.columns


def test_each_load_implies_its_client_and_the_answer_says_which(catalog):
    from wattgpu.data.clients import clients

    model, card = load_model("power")
    bounds = IntervalModel("power", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    answer = predict_queries(card, model, bounds, catalog, QUERIES.head(3))
    # --concurrency: a closed loop; --rate: Poisson arrivals; --batch-size: one batch
    assert answer["client"].tolist() == ["closed", "poisson", "batch"]
    kinds = clients().table["kind"]
    assert [kinds[name] for name in answer["client"]] == ["closed", "poisson", "batch"]
    assert not answer["warnings"].str.contains("stated").any()  # nothing stated, nothing said


SIXTEEN_USERS = {"gpu": "A10", "model": LLM_8B, "scenario": "server", "concurrency": 16}


def test_one_sequence_at_a_time_queues_the_users_and_evens_the_gaps(catalog):
    rows = build_features(
        check_queries(pd.DataFrame([SIXTEEN_USERS, {**SIXTEEN_USERS, "max_num_seqs": 1}]), catalog),
        catalog,
    )
    simulated = simulate_rows(rows)
    # one running request: a request waits while the 15 others each decode their 256 tokens
    # (0.08 s of TTFT at p50 without the knob: 124 s with it), so p99 grows the same way
    default, one = simulated["ttft_p99_s"].to_numpy(float)
    assert one > 100 * default
    alone = simulated.loc[1]
    assert alone["ttft_p50_s"] == pytest.approx(15 * 256 * alone["itl_p50_s"], rel=0.05)
    model, card = load_model("itl")
    bounds = IntervalModel("itl", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    answer = predict_queries(card, model, bounds, catalog, pd.DataFrame([SIXTEEN_USERS] * 2))
    knob = predict_queries(
        card, model, bounds, catalog, pd.DataFrame([{**SIXTEEN_USERS, "max_num_seqs": 1}])
    )
    # the median is the trees', which do not take the knob; the answer says so
    assert knob["prediction"][0] == answer["prediction"][0]
    assert knob["max_num_seqs"][0] == 1 and np.isnan(answer["max_num_seqs"][0])
    assert "the stated engine knobs act on the p90 and p99 only" in knob["warnings"][0]
    # alone in the engine, every gap is one decode step of one sequence: p99 = the median, but
    # for the sequence's own context (its lengths spread around the means): within 1 %
    assert knob["p99"][0] == pytest.approx(knob["prediction"][0], rel=1e-2)
    assert answer["p99"][0] > 1.5 * answer["prediction"][0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"client": "nobody"}, r"row 0: client must be one of aiconfigurator, .*; got 'nobody'$"),
        (
            {"client": "poisson"},
            r"row 0: client 'poisson' sends requests at a rate: give request_rate_rps for a server",
        ),
    ],
)
def test_a_client_that_is_unknown_or_does_not_suit_the_load_is_refused_for_power_too(
    catalog, change, message
):
    model, card = load_model("power")
    bounds = IntervalModel("power", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    with pytest.raises(QueryError, match=message):
        predict_queries(card, model, bounds, catalog, pd.DataFrame([{**SIXTEEN_USERS, **change}]))


def test_a_per_request_overhead_delays_every_simulated_first_token_alike(catalog):
    # a model on the simulated prior: each TTFT of the loop pays its line's overhead on top, so
    # the ratio is (p99 + o) / (p50 + o), nearer 1 than the loop's own
    rows = build_features(check_queries(QUERIES.head(1), catalog), catalog)
    simulated = simulate_rows(rows)
    p50, p99 = (float(simulated[f"ttft_{p}_s"].iloc[0]) for p in ("p50", "p99"))
    delayed = rows.assign(ttft_overhead_s=0.25)
    out = simulated_tails("ttft", delayed, np.array([400.0]))
    assert out["p99"][0] == pytest.approx(400.0 * (p99 + 0.25) / (p50 + 0.25), rel=1e-12)
    assert p99 > p50 and out["p99"][0] < 400.0 * p99 / p50
    # ITL's gaps are between tokens: no overhead in them
    itl = simulated_tails("itl", delayed, np.array([20.0]))
    ratio = float(simulated["itl_p99_s"].iloc[0] / simulated["itl_p50_s"].iloc[0])
    assert itl["p99"][0] == pytest.approx(20.0 * ratio, rel=1e-12)
