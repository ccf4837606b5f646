"""The simulated prior (modeling/serving/prior.py): its terms fitted on rows built by hand, and
the rows it puts on that prior."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu.errors import ConfigError
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.serving.prior import SimulatedTerms, fit_terms, with_simulated_prior


def rows_and_simulation(n_v1: int = 20, n_tgi: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    # n_v1 rows of vLLM 0.19 (line vllm-v1) measured at twice their simulated median gap, and
    # n_tgi rows of TGI 1.4 (line tgi) at four times: too few for a scale of their own
    n = n_v1 + n_tgi
    v1 = np.arange(n) < n_v1
    sim_gap = np.linspace(0.01, 0.03, n)
    rows = pd.DataFrame(
        {
            "engine": np.where(v1, "vllm", "tgi"),
            "engine_version": np.where(v1, "0.19.0", "1.4.5"),
            "scenario": "server",
            "users": 8.0,
            "client": np.where(v1, "aiconfigurator", "closed"),
            "itl_kind": "median gap",
            "itl_s": np.where(v1, 2.0, 4.0) * sim_gap,
            # TTFT: aiconfigurator reports the mean (simulated 0.4 s), closed the median (0.3 s)
            "ttft_s": np.where(v1, 0.8, 0.3),
            "gpu_tdp_w": 700.0,
            # power = TDP x (0.1 + 0.9 x min(1, 1.0 x busy)) with busy 0.2 ... 0.9
            "mean_power_w": 700.0 * (0.1 + 0.9 * np.linspace(0.2, 0.9, n)),
            # the closed form's columns, which a row keeps where its simulation has no answer
            "itl_median_s": np.where(v1, 2.0, 4.0) * sim_gap,
            "prior_itl_s": 0.05,
            "prior_ttft_s": 0.5,
            "prior_power_w": 350.0,
            "prior_power_cpu_w": 300.0,
        }
    )
    sim = pd.DataFrame(
        {
            "itl_p50_s": sim_gap,
            "tpot_mean_s": np.nan,
            "latency_per_token_s": np.nan,
            "ttft_mean_s": 0.4,
            "ttft_p50_s": 0.3,
            "busy_share": np.linspace(0.2, 0.9, n),
        }
    )
    return rows, sim


def test_an_engine_line_with_enough_rows_gets_its_own_scale_and_a_small_one_the_pooled():
    rows, sim = rows_and_simulation()
    terms = fit_terms(rows, sim)
    # 20 ratios of 2 and 2 of 4: the pooled median is 2, vllm-v1's own is 2; tgi has 2 rows
    assert terms.itl_scale == {"": 2.0, "vllm-v1": 2.0}
    answer = with_simulated_prior(rows, sim, terms)
    # tgi's rows take the pooled scale: 2 x their simulated gap, half what they measured
    np.testing.assert_allclose(answer["prior_itl_s"][-2:], 2.0 * sim["itl_p50_s"][-2:])


def test_ttft_is_the_simulated_statistic_of_the_rows_client_plus_its_lines_overhead():
    rows, sim = rows_and_simulation()
    # vllm-v1 has terms of its own (overhead 0.25 s), tgi takes the pooled ones (0.1 s)
    ttft = {"": (1.0, 0.1), "vllm-v1": (0.5, 0.25)}
    terms = SimulatedTerms({"": 1.0}, 0.1, 1.0, ttft=ttft)
    answer = with_simulated_prior(rows, sim, terms)
    # aiconfigurator reports the mean (simulated 0.4 s), closed the median (0.3 s)
    np.testing.assert_allclose(answer["prior_ttft_s"][:2], 0.4 + 0.25)
    np.testing.assert_allclose(answer["prior_ttft_s"][-2:], 0.3 + 0.1)
    # no terms at all: the simulation as it is
    bare = with_simulated_prior(rows, sim, SimulatedTerms({"": 1.0}, 0.1, 1.0))
    np.testing.assert_allclose(bare["prior_ttft_s"][-2:], 0.3)


def test_power_terms_recover_the_idle_share_and_busy_weight_that_made_the_rows():
    rows, sim = rows_and_simulation()
    terms = fit_terms(rows, sim)
    assert (terms.idle_share, terms.busy_weight) == (pytest.approx(0.1), pytest.approx(1.0))
    answer = with_simulated_prior(rows, sim, terms)
    # the busiest row: 700 x (0.1 + 0.9 x 0.9) = 637 W, and the power target is relative to it
    assert answer["prior_power_w"].iloc[-1] == pytest.approx(637.0)
    assert answer["prior_power_cpu_w"].iloc[-1] == pytest.approx(637.0)
    assert answer["log_prior_power_tdp"].iloc[-1] == pytest.approx(np.log(637.0 / 700.0))


def test_an_open_loop_server_keeps_the_closed_forms_power_and_is_left_out_of_its_fit():
    rows, sim = rows_and_simulation()
    # the first two rows: Poisson servers at a rate, measured at TDP though their GPUs were
    # busy 20 % of the time, which no (idle share, busy weight) of the grid fits with the rest
    poisson = rows.index < 2
    rows.loc[poisson, "users"] = np.nan
    rows.loc[poisson, "request_rate_rps"] = 1.0
    rows.loc[poisson, "mean_power_w"] = 700.0
    rows["log_prior_power_tdp"] = np.log(350.0 / 700.0)
    rows["log_prior_power_cpu_tdp"] = np.log(300.0 / 700.0)
    terms = fit_terms(rows, sim)
    assert (terms.idle_share, terms.busy_weight) == (pytest.approx(0.1), pytest.approx(1.0))
    answer = with_simulated_prior(rows, sim, terms)
    kept = answer[poisson]
    assert list(kept["prior_power_w"]) == [350.0, 350.0]
    assert list(kept["prior_power_cpu_w"]) == [300.0, 300.0]
    np.testing.assert_allclose(kept["log_prior_power_cpu_tdp"], np.log(300.0 / 700.0))
    # a closed loop of users takes the busy share: 700 x (0.1 + 0.9 x 0.9) = 637 W at the end
    assert answer["prior_power_cpu_w"].iloc[-1] == pytest.approx(637.0)
    assert answer["log_prior_power_tdp"].iloc[-1] == pytest.approx(np.log(637.0 / 700.0))


def test_a_mean_tpot_becomes_the_median_gap_by_its_own_simulation_and_a_blank_one_stays():
    rows, sim = rows_and_simulation()
    rows["itl_kind"] = ["mean tpot"] * (len(rows) - 1) + ["median gap"]
    # every row's simulated mean TPOT is 1.25 x its simulated median gap: a measured mean of
    # 25 ms is a median of 20 ms
    sim["tpot_mean_s"] = 1.25 * sim["itl_p50_s"]
    rows["itl_s"] = 0.025
    sim.loc[0, ["itl_p50_s", "tpot_mean_s", "ttft_mean_s", "busy_share"]] = np.nan
    terms = SimulatedTerms({"": 2.0}, idle_share=0.1, busy_weight=1.0)
    answer = with_simulated_prior(rows, sim, terms)
    np.testing.assert_allclose(answer["itl_median_s"][1:-1], 0.020)
    assert answer["itl_median_s"].iloc[-1] == pytest.approx(0.025)  # measured as the median
    np.testing.assert_allclose(answer["prior_itl_s"][1:], 2.0 * sim["itl_p50_s"][1:])
    # row 0's loop gave nothing: the closed form's columns stay
    first = answer.iloc[0]
    assert (first["itl_median_s"], first["prior_itl_s"]) == (rows["itl_median_s"][0], 0.05)
    assert (first["prior_ttft_s"], first["prior_power_cpu_w"]) == (0.5, 350.0)
    assert answer["prior_ttft_s"].iloc[1] == pytest.approx(0.4)  # no terms: g 1, o 0


def test_a_recipe_on_an_unknown_prior_is_refused_in_one_line():
    assert recipe_of("itl", "fast", "simulated").prior == "simulated"
    assert recipe_of("itl", "fast").prior == "closed-form"
    refused = "^prior must be one of closed-form, simulated or TARGET=PRIOR pairs joined by "
    refused += "commas, TARGET one of power, itl, ttft; got '{}'$"
    with pytest.raises(ConfigError, match=refused.format("x")):
        recipe_of("itl", "fast", "x")
    for asked in ("ttft=x", "gpu=simulated", "ttft=simulated,"):
        with pytest.raises(ConfigError, match=refused.format(asked)):
            recipe_of("power", "fast", asked)


def test_each_target_takes_its_own_prior_unless_one_is_asked_for():
    from wattgpu.config import TARGET_PRIORS, target_prior

    assert set(TARGET_PRIORS) == {"power", "itl", "ttft"}
    for target, own in TARGET_PRIORS.items():
        assert recipe_of(target, "fast").prior == own == target_prior(target)
        for asked in ("closed-form", "simulated"):
            assert recipe_of(target, "fast", asked).prior == asked
    assert target_prior("power") == "closed-form"  # power's busy share misses the server's draw
    # per target: a target not named keeps its own
    assert recipe_of("ttft", "fast", "ttft=simulated").prior == "simulated"
    assert recipe_of("itl", "fast", "ttft=simulated, itl=closed-form").prior == "closed-form"
    assert recipe_of("power", "fast", "ttft=simulated").prior == TARGET_PRIORS["power"]


def test_the_terms_survive_a_model_cards_json():
    from wattgpu.modeling.answering.card import ModelCard

    terms = SimulatedTerms(
        {"": 2.0, "tgi": 1.5},
        0.12,
        0.9,
        host={"tgi": (1.5, 2e-5)},
        ttft={"": (1.0, 0.08), "tgi": (2.0, 0.15)},
    )
    card = ModelCard.from_json(ModelCard("itl", {}, simulated_prior=terms.to_dict()).to_json())
    assert SimulatedTerms.from_dict(card.simulated_prior) == terms
    assert "simulated_prior" not in ModelCard("itl", {}).to_dict()  # the closed form's card


def test_an_engine_lines_host_time_from_two_rows_built_by_hand():
    from wattgpu.modeling.serving.host import fit_host_time, host_columns

    # vllm-v1's table guesses 1 ms per step. Two rows simulated without host time: 10 ms at a
    # decode batch of 1, measured 12.1 ms; 20 ms at 101, measured 32.1 ms. Host time
    # 2.1 = 1 x s + 1 x p and 12.1 = 1 x s + 101 x p (ms): p = 0.1 ms per sequence, s = 2.0.
    # A line with one row (tgi) is not fitted: it keeps the table's.
    lines = np.array(["vllm-v1", "vllm-v1", "tgi"], dtype=object)
    measured = np.array([0.0121, 0.0321, 0.05])
    host_free = np.array([0.010, 0.020, 0.03])
    table_fixed = np.array([0.001, 0.001, 0.001])
    batch = np.array([1.0, 101.0, 8.0])
    fitted = fit_host_time(lines, measured, host_free, table_fixed, batch)
    assert list(fitted) == ["vllm-v1"]
    scale, per_seq = fitted["vllm-v1"]
    assert (scale, per_seq) == (pytest.approx(2.0), pytest.approx(1e-4))
    columns = host_columns(lines, fitted, table_fixed)
    np.testing.assert_allclose(columns["host_fixed_s"][:2], 0.002)
    assert np.isnan(columns["host_fixed_s"][2]) and np.isnan(columns["host_per_seq_s"][2])


def test_a_model_on_the_simulated_prior_takes_the_knobs_in_its_median_so_no_note_says_otherwise():
    from wattgpu.modeling.answering.inference import setup_notes

    rows = {
        "client": np.array(["closed", None], dtype=object),
        "length_spread": np.array([np.nan, np.nan]),
        "max_num_seqs": np.array([4.0, np.nan]),
        "max_batched_tokens": np.array([np.nan, np.nan]),
        "chunked_prefill": np.array([np.nan, np.nan]),
    }
    closed_form = setup_notes("itl", rows)
    assert closed_form[0].startswith("the stated client and engine knobs act on the p90 and p99")
    assert closed_form[1] == ""
    assert list(setup_notes("itl", rows, simulated_prior=True)) == ["", ""]


def test_ttfts_between_the_knots_are_read_off_a_line_in_logs():
    from wattgpu.modeling.serving.ttft_terms import EFFICIENCIES, KNOTS, between_knots

    # knots 1/8, 2^-1.5, 1, 2^1.5, 8; a row of 1 s at g <= 1 and 2 s from g = 2^1.5 on: at
    # g = 2 (log2 g = 1, two thirds of the way from 0 to 1.5) log TTFT is 2/3 log 2: 2^(2/3) s.
    # A row proportional to g stays so. A row with a blank knot is blank throughout.
    at_knots = np.array([[1.0, 1.0, 1.0, 2.0, 2.0], 0.1 * KNOTS, [1.0, np.nan, 1.0, 1.0, 1.0]])
    out = between_knots(at_knots, KNOTS)
    assert out.shape == (3, len(EFFICIENCIES))
    two = int(np.argmin(np.abs(EFFICIENCIES - 2.0)))
    assert out[0, two] == pytest.approx(2.0 ** (2.0 / 3.0))
    np.testing.assert_allclose(out[1], 0.1 * EFFICIENCIES)
    assert np.isnan(out[2]).all()
    np.testing.assert_array_equal(between_knots(out[:2], EFFICIENCIES), out[:2])  # no knots


def test_a_lines_ttft_terms_come_from_an_even_spread_of_its_rows():
    from wattgpu.modeling.serving.prior import _spread

    np.testing.assert_array_equal(_spread(np.arange(10, 20), 4), [10, 13, 16, 19])
    np.testing.assert_array_equal(_spread(np.array([3, 5]), 4), [3, 5])


def closed_loop_rows(catalog, users=(1, 4, 16, 64), **query) -> pd.DataFrame:
    from wattgpu.modeling.answering.queries import check_queries
    from wattgpu.modeling.physical.features import build_features

    queries = pd.DataFrame(
        {
            "gpu": "H100",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "scenario": "server",
            "concurrency": list(users),
        }
        | query
    )
    return build_features(check_queries(queries, catalog), catalog)


def test_rows_made_with_known_terms_give_them_back_through_the_simulation(catalog):
    from wattgpu.modeling.serving.prior import fit_line_ttft_terms
    from wattgpu.modeling.serving.run import PROMPT_SCALE, simulate_rows
    from wattgpu.modeling.serving.ttft_terms import KNOTS, simulated_ttft

    rows = closed_loop_rows(catalog)
    # "measured": a prefill 2^1.5 times the prior's kernels (a knot) and 80 ms per request
    efficiency, overhead = float(KNOTS[3]), 0.08
    slow = rows.assign(**{PROMPT_SCALE: efficiency})
    rows["ttft_s"] = simulated_ttft(slow, simulate_rows(slow)) + overhead
    fitted = fit_line_ttft_terms(rows)
    assert set(fitted) == {"", "vllm-v1"}
    g, o = fitted["vllm-v1"]
    assert (g, o) == (pytest.approx(efficiency), pytest.approx(overhead))
    # the pooled terms: the prior's own prefill (g = 1) and the one line's overhead
    assert fitted[""] == (1.0, pytest.approx(overhead))
    assert fit_line_ttft_terms(rows.drop(columns="ttft_s")) == {}  # no TTFT measured: no terms


def test_a_query_on_the_simulated_prior_runs_at_its_lines_efficiency_plus_its_overhead(catalog):
    from wattgpu.modeling.serving.prior import on_simulated_prior
    from wattgpu.modeling.serving.run import PROMPT_SCALE, simulate_rows
    from wattgpu.modeling.serving.ttft_terms import simulated_ttft

    rows = closed_loop_rows(catalog, users=(2, 32))
    terms = SimulatedTerms({"": 1.0}, 0.1, 1.0, ttft={"": (2.0, 0.1)})  # a line not named: pooled
    answer = on_simulated_prior(rows, terms)
    slow = rows.assign(**{PROMPT_SCALE: 2.0})
    expected = simulated_ttft(slow, simulate_rows(slow)) + 0.1
    np.testing.assert_allclose(answer["prior_ttft_s"], expected, rtol=1e-12)
    plain = on_simulated_prior(rows, SimulatedTerms({"": 1.0}, 0.1, 1.0))
    assert (answer["prior_ttft_s"] > plain["prior_ttft_s"] + 0.1).all()  # a slower prefill too


def test_a_line_nobody_measured_runs_the_priors_prefill_with_the_median_lines_overhead(catalog):
    from wattgpu.modeling.serving.prior import fit_line_ttft_terms
    from wattgpu.modeling.serving.run import PROMPT_SCALE, simulate_rows
    from wattgpu.modeling.serving.ttft_terms import KNOTS, simulated_ttft
    from wattgpu.modeling.serving.workload import engine_line_names

    # three lines measured at g = 2^-1.5, 1 and 2^1.5 (knots) and overheads 20, 100 and 60 ms:
    # a line nobody measured takes g = 1 and the median overhead, 60 ms. On an L4 an 8B's
    # 4,000-token prompt takes most of a second: the rows tell the efficiency apart.
    made = {"vllm": (KNOTS[1], 0.02), "sglang": (KNOTS[2], 0.10), "trtllm": (KNOTS[3], 0.06)}
    parts, expected = [], {}
    for engine, (g, o) in made.items():
        rows = closed_loop_rows(catalog, (1, 2, 4, 8), gpu="L4", input_tokens=4000)
        rows = rows.assign(engine=engine)
        slow = rows.assign(**{PROMPT_SCALE: g})
        parts.append(rows.assign(ttft_s=simulated_ttft(slow, simulate_rows(slow)) + o))
        expected[str(engine_line_names(rows)[0])] = (pytest.approx(g), pytest.approx(o))
    fitted = fit_line_ttft_terms(pd.concat(parts, ignore_index=True))
    assert len(expected) == 3
    assert fitted == {"": (1.0, pytest.approx(0.06)), **expected}


def test_a_query_on_the_simulated_prior_carries_the_set_up_its_loop_ran(catalog):
    from wattgpu.modeling.serving.prior import on_simulated_prior

    rows = closed_loop_rows(catalog, users=(2, 32))
    terms = SimulatedTerms(
        {"": 1.0}, 0.1, 1.0, host={"vllm-v1": (2.0, 1e-5)}, ttft={"vllm-v1": (0.5, 0.07)}
    )
    # the second row cannot run: it keeps the closed form and carries no set-up
    answer = on_simulated_prior(rows, terms, runs=np.array([True, False]))
    assert answer["prefill_scale"].iloc[0] == 0.5 and answer["ttft_overhead_s"].iloc[0] == 0.07
    assert answer["host_per_seq_s"].iloc[0] == 1e-5
    assert answer[["prefill_scale", "ttft_overhead_s", "host_fixed_s"]].iloc[1].isna().all()
    assert answer["prior_ttft_s"].iloc[1] == rows["prior_ttft_s"].iloc[1]
