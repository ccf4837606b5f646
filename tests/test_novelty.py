"""How far a query lies from the training rows: engines, their releases, and scenarios."""

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.learning.novelty import Familiarity


def test_an_unseen_release_of_a_seen_engine_is_as_far_as_an_unseen_engine():
    train = pd.DataFrame({"engine": ["vllm", "vllm"], "engine_year": [2024, 2025]})
    familiar = Familiarity.of(train, scale=1.0)
    assert familiar.releases == ("vllm@2024", "vllm@2025")
    queries = pd.DataFrame(
        {"engine": ["vllm", "vllm", "sglang"], "engine_year": [2025, 2026, 2026]}
    )
    # no numeric dimension is given: only the engine and its release count
    assert familiar.distance(queries).tolist() == [0.0, 1.0, 1.0]
    # the correction kept: trust 1 x exp(-distance / scale 1)
    assert familiar.weight(queries) == pytest.approx(np.exp([0.0, -1.0, -1.0]))


def test_the_releases_travel_with_the_model_card():
    familiar = Familiarity.of(pd.DataFrame({"engine": ["tgi"], "engine_year": [2023]}), 2.0)
    again = Familiarity.from_dict(familiar.to_dict())
    assert again.releases == ("tgi@2023",)
    # a card written before releases were recorded: no release distance at all
    old = familiar.to_dict()
    del old["releases"]
    queries = pd.DataFrame({"engine": ["tgi"], "engine_year": [2026]})
    assert Familiarity.from_dict(old).distance(queries).tolist() == [0.0]


def test_a_scenario_the_training_rows_never_had_keeps_no_correction_at_any_scale():
    train = pd.DataFrame({"engine": ["vllm", "vllm"], "scenario": ["offline", "offline"]})
    queries = pd.DataFrame({"engine": ["vllm", "vllm"], "scenario": ["offline", "server"]})
    for scale in (np.inf, 1.0):
        familiar = Familiarity.of(train, scale=scale, trust=0.5)
        assert familiar.scenarios == ("offline",)
        # a seen offline row keeps the trust (nothing else is far); the server row nothing
        assert familiar.weight(queries).tolist() == [0.5, 0.0]
    # through the model card; a card written before scenarios were recorded shrinks no row
    card = Familiarity.of(train, scale=np.inf, trust=0.5).to_dict()
    assert Familiarity.from_dict(card).weight(queries).tolist() == [0.5, 0.0]
    del card["scenarios"]
    assert Familiarity.from_dict(card).weight(queries).tolist() == [0.5, 0.5]
