"""Warnings for queries outside what the model was trained on."""

import pandas as pd
from test_features import query

from wattgpu.modeling.answering.domain import domain_warnings, training_domain
from wattgpu.modeling.physical.features import build_features


def test_queries_inside_the_domain_get_no_warning_and_outside_get_one_each(small_catalog):
    # as if trained on the 2023 and 2024 vLLM of one GPU and LLM
    trained = build_features(
        pd.concat([query(engine_year=2023.0), query(engine_year=2024.0)], ignore_index=True),
        small_catalog,
    )
    domain = training_domain(trained)
    assert domain["engine_year"] == [2023.0, 2024.0]
    inside = build_features(query(engine_year=2024.0), small_catalog)
    unnamed = build_features(query(), small_catalog)  # no year: today's vLLM (0.19, of 2026)
    other_engine = build_features(query(engine="tgi", engine_year=2023.0), small_catalog)
    assert domain_warnings(inside, domain) == [""]
    # a release year outside the trained ones is no warning: it acts only through a bounded trend
    assert domain_warnings(unnamed, domain) == [""]
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


def test_the_domain_knows_the_load_and_warns_outside_it(small_catalog):
    # trained on offline rows and on closed loops of 2 and 16 users (an achieved rate of 3.5)
    trained = build_features(
        pd.concat(
            [
                query(),
                query(scenario="server", concurrency=2, request_rate_rps=3.5),
                query(scenario="server", concurrency=16, request_rate_rps=9.0),
            ],
            ignore_index=True,
        ),
        small_catalog,
    )
    domain = training_domain(trained)
    assert domain["scenarios"] == ["offline", "server"]
    assert domain["users"] == [2.0, 16.0]
    # a closed loop's rate is an outcome: no open-loop rate was trained
    assert domain["request_rate_rps"][0] != domain["request_rate_rps"][0]  # NaN
    assert domain["itl_statistics"] == ["median"]
    inside = build_features(query(scenario="server", concurrency=8), small_catalog)
    assert domain_warnings(inside, domain) == [""]
    # 16 x 1.25 = 20 users is the edge of the trained range
    many = build_features(query(scenario="server", concurrency=64), small_catalog)
    assert domain_warnings(many, domain) == ["concurrency 64 beyond the trained range (max 16)"]
    by_rate = build_features(query(scenario="server", request_rate_rps=1.0), small_catalog)
    assert domain_warnings(by_rate, domain) == [
        "load as a request rate: the model saw servers given by concurrent users only"
    ]
    offline_only = training_domain(build_features(query(), small_catalog))
    assert domain_warnings(inside, offline_only) == [
        "scenario server not seen in training (offline only)"
    ]


def test_a_batch_gets_each_rows_own_warnings_in_order(small_catalog):
    # the warnings are joined once per distinct pattern: rows that share one must still each
    # get their own numbers, in the order the warnings are checked
    trained = build_features(
        pd.concat(
            [query(scenario="server", concurrency=2), query(scenario="server", concurrency=16)],
            ignore_index=True,
        ),
        small_catalog,
    )
    domain = training_domain(trained)
    users = [8, 64, 8, 100, 64]
    rows = build_features(
        pd.concat(
            [query(scenario="server", concurrency=u, engine_year=2023.0) for u in users],
            ignore_index=True,
        ),
        small_catalog,
    )
    assert domain_warnings(rows, domain) == [
        "",
        "concurrency 64 beyond the trained range (max 16)",
        "",
        "concurrency 100 beyond the trained range (max 16)",
        "concurrency 64 beyond the trained range (max 16)",
    ]
