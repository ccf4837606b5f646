"""TTFT tails from measured ratios: by kind of client and number of users, worked out by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from test_fast_path import load_model

from wattgpu.modeling.answering.card import ModelCard
from wattgpu.modeling.answering.inference import predict_queries
from wattgpu.modeling.answering.queries import check_queries
from wattgpu.modeling.answering.tail_ratios import TailRatios, as_measured, fit_tail_ratios
from wattgpu.modeling.answering.tails import MEASURED_RATIO, SIMULATED, simulated_tails
from wattgpu.modeling.learning.uncertainty import Calibration, IntervalModel
from wattgpu.modeling.learning.unseen import UNSEEN_GPU
from wattgpu.modeling.physical.features import build_features

NAN = math.nan
LLM_8B = "meta-llama/Llama-3.1-8B-Instruct"


def measured(users: float, p90: float, p99: float, client: str = "llm-pilot") -> dict:
    """One measured row: a median TTFT of 1 s, its p90 and p99 in seconds."""
    return {
        "client": client,
        "scenario": "server",
        "users": users,
        "ttft_s": 1.0,
        "ttft_p90_s": p90,
        "ttft_p99_s": p99,
    }


ROWS = pd.DataFrame(
    [
        # one user: p90 / median 2, 2, 4 (median 2), p99 4, 4, 8 (median 4)
        measured(1, 2.0, 4.0),
        measured(1, 2.0, 4.0),
        measured(1, 4.0, 8.0),
        # four users: 1.5 and 3 on each of three rows
        *[measured(4, 1.5, 3.0)] * 3,
        # eight users on two rows only: too few for a ratio of their own
        *[measured(8, 9.0, 9.0)] * 2,
        # a row without a measured p99 is not a ratio
        measured(4, 9.0, NAN),
    ]
)


def test_the_ratios_are_the_median_at_each_number_of_users_by_hand():
    ratios = fit_tail_ratios(ROWS, "ttft")
    assert ratios.rows == 8  # 3 + 3 + 2: a row without a p99 is not counted
    assert list(ratios.by_kind) == ["closed"]  # LLM-Pilot's client is a closed loop
    table = ratios.by_kind["closed"]
    assert table["users"] == [1.0, 4.0]
    np.testing.assert_allclose(np.exp(table["p90"]), [2.0, 1.5])
    np.testing.assert_allclose(np.exp(table["p99"]), [4.0, 3.0])


def test_between_two_numbers_of_users_the_log_ratio_is_linear_in_log_users():
    ratios = fit_tail_ratios(ROWS, "ttft")
    kinds = np.array(["closed"] * 4 + ["poisson"], dtype=object)
    found = ratios.log_ratios(kinds, np.array([1.0, 2.0, 8.0, NAN, 2.0]))
    # two users, halfway between 1 and 4 in log: sqrt(2 x 1.5) and sqrt(4 x 3)
    np.testing.assert_allclose(np.exp(found["p90"][:3]), [2.0, math.sqrt(3.0), 1.5])
    np.testing.assert_allclose(np.exp(found["p99"][:3]), [4.0, math.sqrt(12.0), 3.0])
    # no users, or a kind of client nobody measured: no ratio
    assert np.isnan(found["p90"][3:]).all() and np.isnan(found["p99"][3:]).all()


def test_a_p99_ratio_is_never_below_the_p90_ratio():
    ratios = TailRatios("ttft", {"closed": {"users": [1.0], "p90": [0.5], "p99": [0.25]}}, 3)
    found = ratios.log_ratios(np.array(["closed"], dtype=object), np.array([1.0]))
    assert (found["p90"][0], found["p99"][0]) == (0.5, 0.5)


def test_no_measured_tails_fit_no_ratios_and_an_empty_record_reads_as_none():
    assert fit_tail_ratios(ROWS.assign(ttft_p90_s=NAN), "ttft") is None
    assert TailRatios.from_dict({}) is None
    ratios = fit_tail_ratios(ROWS, "ttft")
    assert TailRatios.from_dict(ratios.to_dict()) == ratios
    card = ModelCard(target="ttft", domain={}, tail_ratios=ratios.to_dict())
    assert ModelCard.from_json(card.to_json()).tail_ratios == ratios.to_dict()
    assert "tail_ratios" not in ModelCard(target="itl", domain={}).to_dict()


def test_a_ratio_stands_for_the_set_up_measured_and_nothing_stated_beside_it():
    rows = pd.DataFrame(
        [
            {"client": None, "scenario": "server", "users": 4},  # closed, lognormal lengths
            {"client": "llm-pilot", "scenario": "server", "users": 4},  # its own trace
            {"client": None, "scenario": "server", "users": 4, "length_spread": 0.5},
            {"client": None, "scenario": "server", "users": 4, "max_num_seqs": 2},
            {"client": "aiperf", "scenario": "server", "users": 4},  # equal lengths
        ]
    )
    assert as_measured(rows).tolist() == [True, True, False, False, False]


def features(catalog, *queries: dict) -> pd.DataFrame:
    return build_features(check_queries(pd.DataFrame(list(queries)), catalog), catalog)


EIGHT_USERS = {"gpu": "A10", "model": LLM_8B, "scenario": "server", "concurrency": 8}


def test_ttft_tails_take_the_measured_ratio_and_itl_tails_the_simulation(catalog):
    ratios = TailRatios(
        "ttft", {"closed": {"users": [1.0, 64.0], "p90": [0.0, math.log(2)], "p99": [1.0, 2.0]}}, 6
    )
    rows = features(catalog, EIGHT_USERS, {**EIGHT_USERS, "max_num_seqs": 2})
    median = np.array([100.0, 100.0])
    out = simulated_tails("ttft", rows, median, ratios=ratios)
    # eight users, halfway between 1 and 64 in log: p90 100 x exp(log 2 / 2), p99 100 x e^1.5
    assert out["p90"][0] == pytest.approx(100.0 * math.sqrt(2.0))
    assert out["p99"][0] == pytest.approx(100.0 * math.exp(1.5))
    assert out["tails"].tolist() == [MEASURED_RATIO, SIMULATED]  # a stated knob: the simulation
    plain = simulated_tails("ttft", rows, median)
    assert out["p99"][1] == plain["p99"][1]
    itl = simulated_tails("itl", rows, median, ratios=ratios)
    assert itl["tails"].tolist() == [SIMULATED, SIMULATED]


def test_an_answer_says_where_its_tails_come_from(catalog):
    # the frozen ITL model, given ratios of its own target (a trained card keeps TTFT's alone)
    model, card = load_model("itl")
    itl_rows = ROWS.rename(columns=lambda c: c.replace("ttft", "itl"))
    ratios = fit_tail_ratios(itl_rows, "itl")
    bounds = IntervalModel("itl", (), 1.0, {UNSEEN_GPU: Calibration(-0.5, 0.25)})
    queries = pd.DataFrame([EIGHT_USERS, {**EIGHT_USERS, "length_spread": 0.0}])
    with_ratios = replace(card, tail_ratios=ratios.to_dict())
    answer = predict_queries(with_ratios, model, bounds, catalog, queries)
    assert answer["tails"].tolist() == [MEASURED_RATIO, SIMULATED]
    # eight users: beyond the four measured, the four's ratios
    median = answer["prediction"].to_numpy(float)
    assert answer["p90"][0] == pytest.approx(median[0] * 1.5)
    assert answer["p99"][0] == pytest.approx(median[0] * 3.0)
    plain = predict_queries(card, model, bounds, catalog, queries)
    assert plain["tails"].tolist() == [SIMULATED, SIMULATED]
    assert answer["p99"][1] == plain["p99"][1]
