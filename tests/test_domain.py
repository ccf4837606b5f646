"""Warnings for queries outside what the model was trained on."""

import pandas as pd
from test_features import query

from wattgpu.modeling.domain import domain_warnings, training_domain
from wattgpu.modeling.features import build_features


def test_queries_inside_the_domain_get_no_warning_and_outside_get_one_each(small_catalog):
    # as if trained on the 2023 and 2024 vLLM of one GPU and LLM
    trained = build_features(
        pd.concat([query(engine_year=2023.0), query(engine_year=2024.0)], ignore_index=True),
        small_catalog,
    )
    domain = training_domain(trained)
    assert domain["engine_year"] == [2023.0, 2024.0]
    inside = build_features(query(engine_year=2024.0), small_catalog)
    unnamed = build_features(query(), small_catalog)  # no year: the default, 2025
    other_engine = build_features(query(engine="tgi", engine_year=2023.0), small_catalog)
    assert domain_warnings(inside, domain) == [""]
    assert domain_warnings(unnamed, domain) == [
        "engine year 2025 outside the trained years (2023-2024)"
    ]
    assert domain_warnings(other_engine, domain) == ["engine 'tgi' not seen in training (vllm)"]
