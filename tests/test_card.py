"""The model card: a typed record that reads and writes the served model's metadata.json."""

import json
import math

import numpy as np

from wattgpu.modeling.answering.card import IntervalSpec, ModelCard
from wattgpu.modeling.learning.uncertainty import Calibration, IntervalModel
from wattgpu.modeling.learning.unseen import UNSEEN_GPU, UNSEEN_SETUP, Seen

DOMAIN = {"llm_params_b": [0.5, 70.0], "engines": ["vllm"], "moe_seen": False}


def test_a_packaged_card_survives_json():
    card = ModelCard(
        target="itl",
        domain=DOMAIN,
        params={"depth": 6},
        data_hash="abc",
        logo_mdape=12.5,
        logo_mdape_by_scenario={"offline": 10.0, "server": 15.0},
        interval_coverage_held_out_gpu=0.9,
        interval_width_held_out_gpu=0.4,
        wattgpu_version="1.0",
        members=(("gpu_tdp_w",), ()),
        query_fields=("gpu", "model"),
        interval_held_out={"LOGO": {"all": {"interval_coverage": 0.9, "interval_width": 0.4}}},
        interval_not_validated=("server itl intervals not validated on an unseen set-up",),
        interval=IntervalSpec.of(
            IntervalModel(
                "itl",
                ("gpu_tdp_w",),
                1.0,
                {
                    UNSEEN_GPU: Calibration(-0.5, 0.25, {"server": (-1.0, 1.0)}, residuals=40),
                    UNSEEN_SETUP: Calibration(-2.0, 2.0, not_validated=("server",), residuals=9),
                },
                Seen(("NVIDIA L4",), ("arch",), ("vllm 2024",), ("NVIDIA L4|vllm 2024",)),
            )
        ),
    )
    assert ModelCard.from_json(card.to_json()) == card
    served = card.interval.model("itl", 1.0)
    assert served.calibrations[UNSEEN_GPU].by_scenario == {"server": (-1.0, 1.0)}
    assert served.seen.setups == ("vllm 2024",)
    rows = {"gpu": np.array(["NVIDIA A10"]), "scenario": np.array(["server"])}
    rows |= {"model": np.array(["x"]), "engine": np.array(["vllm"]), "engine_year": [2024.0]}
    low, high, novelty, kind, validated = served.factors(rows)
    # an unseen GPU under a set-up the rows ran: its scenario's own factors
    assert (low.tolist(), high.tolist(), novelty.tolist()) == (
        [-1.0],
        [1.0],
        ["unseen GPU + unseen LLM"],
    )
    assert kind.tolist() == ["unseen GPU"] and validated.tolist() == [True]


def test_the_training_card_omits_the_packaging_and_keeps_the_old_keys():
    data = ModelCard(target="power", domain=DOMAIN, interval_width_held_out_gpu=0.3).to_dict()
    assert "members" not in data and "interval" not in data and "query_fields" not in data
    assert data["interval_width_held_out_gpu"] == 0.3 and data["interval_coverage_nominal"] == 0.9


def test_an_older_metadata_file_reads_and_unknown_keys_are_skipped():
    old = {
        "target": "power",
        "domain": DOMAIN,
        "members": [["gpu_tdp_w"]],
        "interval_quantiles": {"server": [-0.2, 0.25]},
    }
    card = ModelCard.from_json(json.dumps(old))
    assert card.members == (("gpu_tdp_w",),) and card.interval is None
    assert card.target == "power" and math.isnan(card.logo_mdape)


def test_an_interval_written_before_the_scenario_factors_gives_every_scenario_the_pooled_ones():
    old = {
        "target": "power",
        "domain": DOMAIN,
        "interval": {"without": ["gpu_tdp_w"], "q_low": -0.5, "q_high": 0.25, "coverage": 0.9},
    }
    spec = ModelCard.from_json(json.dumps(old)).interval
    rows = {"gpu": np.array(["NVIDIA L4"] * 2), "scenario": np.array(["offline", "server"])}
    low, high, novelty, _, validated = spec.model("power", 1.0).factors(rows)
    assert low.tolist() == [-0.5, -0.5] and high.tolist() == [0.25, 0.25]
    # an interval from before the kinds of novelty: every row is an unseen GPU, as then
    assert novelty.tolist() == ["unseen GPU"] * 2 and validated.all()
