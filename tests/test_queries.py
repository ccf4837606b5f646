import math

import numpy as np
import pandas as pd
import pytest

from wattgpu.errors import QueryError
from wattgpu.modeling.queries import check_queries

OK = {
    "gpu": "H100",
    "model": "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "scenario": "server",
    "request_rate_rps": 0.5,
}
NEW_GPU = {
    "gpu_memory_bandwidth_gb_s": 6000.0,
    "gpu_fp16_tensor_tflops": 1500.0,
    "gpu_tdp_w": 800.0,
    "gpu_memory_gb": 120.0,
}


def check(*rows, catalog):
    return check_queries(pd.DataFrame(list(rows)), catalog)


def test_names_resolve_to_canonical(small_catalog):
    out = check(OK, catalog=small_catalog)
    assert out.loc[0, "gpu"] == "NVIDIA H100 SXM5"
    assert out.loc[0, "model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert bool(out.loc[0, "gpu_in_catalog"]) and bool(out.loc[0, "llm_in_catalog"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scenario": "batch"}, "row 0: scenario must be one of offline, server; got 'batch'"),
        ({"request_rate_rps": -1.0}, "row 0: request_rate_rps must be at least 0; got -1.0"),
        ({"request_rate_rps": "fast"}, "row 0: request_rate_rps must be a number; got 'fast'"),
        (
            {"request_rate_rps": math.inf},
            "row 0: request_rate_rps must be a finite number; got inf",
        ),
        (
            {"request_rate_rps": None},
            "row 0: request_rate_rps is required for a server and must be greater than 0",
        ),
        (
            {"batch_size": 8.9, "scenario": "offline"},
            "row 0: batch_size must be a whole number; got 8.9",
        ),
        ({"num_gpus": 0}, "row 0: num_gpus must be at least 1; got 0"),
        ({"engine_year": 1999.0}, "row 0: engine_year must be at least 2000; got 1999.0"),
        ({"engine_year": 2024.5}, "row 0: engine_year must be a whole number; got 2024.5"),
        ({"model": None}, "row 0: model is required"),
        ({"gpu": 7}, "row 0: gpu must be a non-empty string; got 7"),
    ],
)
def test_bad_fields_are_named(small_catalog, change, message):
    with pytest.raises(QueryError) as err:
        check({**OK, **change}, catalog=small_catalog)
    assert str(err.value).startswith(message)


def test_the_bad_row_of_a_batch_is_named(small_catalog):
    with pytest.raises(QueryError, match=r"^row 2: scenario"):
        check(OK, OK, {**OK, "scenario": "Server?"}, catalog=small_catalog)


def test_unknown_gpu_without_specs_lists_close_matches_and_what_to_give(small_catalog):
    with pytest.raises(QueryError) as err:
        check({**OK, "gpu": "NVIDIA H100 SMX5"}, catalog=small_catalog)
    text = str(err.value)
    assert "closest: NVIDIA H100 SXM5" in text
    assert "gpu_memory_bandwidth_gb_s" in text and err.value.field == "gpu"


def test_unknown_gpu_with_specs_is_accepted(small_catalog):
    out = check({**OK, "gpu": "NVIDIA X1", **NEW_GPU}, catalog=small_catalog)
    assert out.loc[0, "gpu"] == "NVIDIA X1" and not out.loc[0, "gpu_in_catalog"]
    assert out.loc[0, "gpu_memory_bandwidth_gb_s"] == 6000.0


def test_unknown_llm_with_specs_gets_head_dim_and_active_params(small_catalog):
    specs = {
        "llm_params_b": 3.0,
        "llm_num_layers": 28,
        "llm_hidden_size": 3072,
        "llm_num_attention_heads": 24,
        "llm_num_kv_heads": 8,
    }
    out = check({**OK, "model": "acme/new-3b", **specs}, catalog=small_catalog)
    # 3072 / 24 = 128
    assert out.loc[0, "llm_head_dim"] == 128.0
    assert out.loc[0, "llm_active_params_b"] == 3.0
    with pytest.raises(QueryError, match="llm_num_kv_heads must divide llm_num_attention_heads"):
        check({**OK, "model": "acme/new-3b", **specs, "llm_num_kv_heads": 7}, catalog=small_catalog)


def test_empty_and_missing_columns(small_catalog):
    with pytest.raises(QueryError, match="empty query"):
        check_queries(pd.DataFrame(), small_catalog)
    with pytest.raises(QueryError, match=r"missing column\(s\) scenario"):
        check_queries(pd.DataFrame([{"gpu": "H100", "model": "x"}]), small_catalog)


def test_numpy_numbers_are_numbers(small_catalog):
    out = check({**OK, "request_rate_rps": np.float32(2.0)}, catalog=small_catalog)
    assert out.loc[0, "request_rate_rps"] == 2.0
