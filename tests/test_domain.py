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


def test_a_weight_format_warns_only_when_not_trained_on(small_catalog):
    rows = pd.DataFrame(
        [
            {"gpu": "NVIDIA H100 SXM5", "model": "meta-llama/Llama-3.1-8B-Instruct"}
            | {"scenario": "offline", "batch_size": 8.0, "dtype": dtype}
            for dtype in ("bf16", "fp8")
        ]
    )
    features = build_features(rows, small_catalog)
    trained = training_domain(features.iloc[:1])
    assert trained["formats_seen"] == ["bfloat16"] and trained["moe_seen"] is False
    assert domain_warnings(features, trained)[1] == (
        "weights in fp8: the model was trained on none (bfloat16 only)"
    )
    assert domain_warnings(features, training_domain(features)) == ["", ""]
