"""A query's spread of lengths: lognormal around its means, its client's unless it states one."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_fast_path import load_model

from wattgpu.data.clients import QUANTILES, clients, lognormal_ratios
from wattgpu.modeling.answering.inference import predict_queries, setup_notes
from wattgpu.modeling.answering.queries import check_queries
from wattgpu.modeling.learning.uncertainty import Calibration, IntervalModel
from wattgpu.modeling.learning.unseen import UNSEEN_GPU
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.serving.run import simulate_rows
from wattgpu.modeling.serving.workload import assumed_spread, lengths_of

NAN = math.nan
EIGHT_USERS = {
    "gpu": "A10",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "scenario": "server",
    "concurrency": 8,
}


def test_a_lognormal_table_by_hand():
    # sigma 0.5: a length over its mean is exp(0.5 z - 0.125), z the normal quantile
    ratios = dict(zip(np.round(QUANTILES, 2), lognormal_ratios(0.5), strict=True))
    assert ratios[0.5] == pytest.approx(math.exp(-0.125))  # 0.8825: the median under the mean
    assert ratios[0.95] == pytest.approx(math.exp(0.5 * 1.644854 - 0.125), rel=1e-6)  # 2.0085
    # the ends stop one request in 400 short of 0 and infinity: z(0.0025) = -2.807034
    assert ratios[0.0] == pytest.approx(math.exp(0.5 * -2.807034 - 0.125), rel=1e-6)  # 0.2169
    assert ratios[1.0] == pytest.approx(math.exp(0.5 * 2.807034 - 0.125), rel=1e-6)  # 3.5734
    # no spread: every request at the mean
    np.testing.assert_array_equal(lognormal_ratios(0.0), np.ones(len(QUANTILES)))


def rows_of(*queries: dict) -> pd.DataFrame:
    return pd.DataFrame(list(queries))


def test_a_stated_spread_replaces_the_clients_lengths_and_zero_means_equal():
    rows = rows_of(
        {"client": "closed", "scenario": "server", "users": 4, "length_spread": NAN},
        {"client": "closed", "scenario": "server", "users": 4, "length_spread": 0.0},
        {"client": "llm-pilot", "scenario": "server", "users": 4, "length_spread": 1.2},
        {"client": "llm-pilot", "scenario": "server", "users": 4, "length_spread": NAN},
    )
    table = clients().table
    harness = {
        "lengths": table.loc[rows["client"], "lengths"].to_numpy(object),
        "spread": table.loc[rows["client"], "spread"].to_numpy(float),
    }
    lengths, spread = lengths_of(rows, harness)
    # the shipped closed loop: lognormal, sigma 0.5 (data/clients.csv); LLM-Pilot its trace
    assert lengths.tolist() == ["lognormal", "fixed", "lognormal", "llm_pilot"]
    np.testing.assert_array_equal(spread[:3], [0.5, 0.0, 1.2])
    # what each answer names: a trace's shape is not a sigma, its client names it
    np.testing.assert_array_equal(assumed_spread(rows), [0.5, 0.0, 1.2, NAN])


def test_fixed_lengths_name_a_spread_of_zero():
    rows = rows_of({"client": "aiperf", "scenario": "server", "users": 2})
    np.testing.assert_array_equal(assumed_spread(rows), [0.0])


def test_equal_lengths_keep_the_users_in_step_and_a_spread_parts_them(catalog):
    # eight users with equal prompts and answers start and end together: every gap is one
    # decode step of all eight, so p99 is the median; lognormal lengths part them, and the
    # gaps that hold another user's prefill make the tail
    queries = pd.DataFrame([{**EIGHT_USERS, "length_spread": s} for s in (0.0, 0.5)])
    rows = build_features(check_queries(queries, catalog), catalog)
    simulated = simulate_rows(rows)
    ratio = (simulated["itl_p99_s"] / simulated["itl_p50_s"]).to_numpy(float)
    assert ratio[0] == pytest.approx(1.0)
    assert ratio[1] > 1.5


def test_each_answer_names_the_spread_it_assumed_and_what_it_acts_on(catalog):
    model, card = load_model("itl")
    bounds = IntervalModel("itl", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    queries = pd.DataFrame([EIGHT_USERS, {**EIGHT_USERS, "length_spread": 0.0}])
    answer = predict_queries(card, model, bounds, catalog, queries)
    np.testing.assert_array_equal(answer["length_spread"], [0.5, 0.0])  # the client's, stated
    # the median is the trees', which do not take the spread; its tails do, and it says so
    assert answer["prediction"][0] == answer["prediction"][1]
    assert answer["p99"][1] == pytest.approx(answer["prediction"][1])
    assert answer["p99"][0] > answer["p99"][1]
    assert "the stated length spread acts on the p90 and p99 only" in answer["warnings"][1]
    assert "trained without it" in answer["warnings"][1]
    assert "stated" not in answer["warnings"][0]


def test_the_note_names_everything_a_row_states_beside_its_load():
    rows = {
        "client": np.array(["closed", None, None, "closed"], dtype=object),
        "length_spread": np.array([0.5, 0.5, NAN, NAN]),
        "max_num_seqs": np.array([4.0, NAN, NAN, NAN]),
        "max_batched_tokens": np.full(4, NAN),
        "chunked_prefill": np.full(4, NAN),
    }
    notes = setup_notes("power", rows)
    assert notes.tolist() == [
        "the stated client, length spread and engine knobs act on no power answer: its model "
        "is trained without them",
        "the stated length spread acts on no power answer: its model is trained without it",
        "",
        "the stated client acts on no power answer: its model is trained without it",
    ]
