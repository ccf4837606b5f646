"""How far a query lies from the training rows: engines and their releases."""

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
