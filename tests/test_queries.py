import math

import numpy as np
import pandas as pd
import pytest

from wattgpu.errors import QueryError
from wattgpu.modeling.answering.queries import RANGES, Range, check_queries, query_frame

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

NEW_LLM = {
    "llm_params_b": 3.0,
    "llm_num_layers": 28,
    "llm_hidden_size": 3072,
    "llm_num_attention_heads": 24,
    "llm_num_kv_heads": 8,
}


def check(*rows, catalog):
    return check_queries(pd.DataFrame(list(rows)), catalog)


def test_a_server_may_state_its_load_as_concurrent_users(small_catalog):
    out = check({**OK, "request_rate_rps": None, "concurrency": 16}, catalog=small_catalog)
    assert out.loc[0, "concurrency"] == 16.0 and np.isnan(out.loc[0, "request_rate_rps"])


def test_names_resolve_to_canonical(small_catalog):
    out = check(OK, catalog=small_catalog)
    assert out.loc[0, "gpu"] == "NVIDIA H100 SXM5"
    assert out.loc[0, "model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert bool(out.loc[0, "gpu_in_catalog"]) and bool(out.loc[0, "llm_in_catalog"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scenario": "batch"}, "row 0: scenario must be one of offline, server; got 'batch'"),
        (
            {"request_rate_rps": -1.0},
            "row 0: request_rate_rps must be a number greater than 0 and at most 10000 "
            "requests/s; got -1",
        ),
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
            "row 0: batch_size must be a whole number from 1 to 65536; got 8.9",
        ),
        ({"num_gpus": 0}, "row 0: num_gpus must be a whole number from 1 to 1024; got 0"),
        (
            {"engine_year": 1999.0},
            "row 0: engine_year must be a whole number from 2000 to 2100; got 1999",
        ),
        (
            {"engine_year": 2024.5},
            "row 0: engine_year must be a whole number from 2000 to 2100; got 2024.5",
        ),
        ({"request_rate_rps": True}, "row 0: request_rate_rps must be a number; got True"),
        ({"request_rate_rps": "0.5"}, "row 0: request_rate_rps must be a number; got '0.5'"),
        (
            {"dtype": "banana"},
            "row 0: dtype must be one of float32, fp32, float16, fp16, bfloat16, bf16, fp8, "
            "float8, int8, int4, mxfp4, nvfp4, fp8_block, int4_wo; got 'banana'",
        ),
        (
            {"batch_size": 32},
            "row 0: batch_size applies to offline only (a server's batch follows from its rate); "
            "leave it blank on a server row (got 32)",
        ),
        (
            {"scenario": "offline"},
            "row 0: request_rate_rps applies to a server only; leave it blank on an offline row "
            "(got 0.5)",
        ),
        (
            {"concurrency": 16},
            "row 0: give request_rate_rps or concurrency for a server, not both "
            "(got 0.5 requests/s and 16 users)",
        ),
        (
            {"scenario": "offline", "request_rate_rps": None, "concurrency": 16},
            "row 0: concurrency applies to a server only; leave it blank on an offline row "
            "(got 16)",
        ),
        (
            {"request_rate_rps": None, "concurrency": 0},
            "row 0: concurrency must be a whole number from 1 to 65536 concurrent users; got 0",
        ),
        (
            {"request_rate_rps": None, "concurrency": 2.5},
            "row 0: concurrency must be a whole number from 1 to 65536 concurrent users; got 2.5",
        ),
        ({"gpu": "x" * 201}, "row 0: gpu must be at most 200 characters; got 201"),
        ({"model": None}, "row 0: model is required"),
        ({"gpu": 7}, "row 0: gpu must be a non-empty string; got 7"),
        # the engine knobs (issue 57): a range each, chunked prefill on or off
        ({"max_num_seqs": 0}, "row 0: max_num_seqs must be a whole number from 1 to 65536; got 0"),
        (
            {"max_batched_tokens": 8},
            "row 0: max_batched_tokens must be a whole number from 16 to 1048576; got 8",
        ),
        ({"max_num_seqs": "many"}, "row 0: max_num_seqs must be a number; got 'many'"),
        (
            {"chunked_prefill": "maybe"},
            "row 0: chunked_prefill must be on or off (or true/false, 1/0); got 'maybe'",
        ),
        (
            {"chunked_prefill": 2},
            "row 0: chunked_prefill must be on or off (or true/false, 1/0); got 2",
        ),
        ({"client": ""}, "row 0: client must be a non-empty string; got ''"),
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


# every numeric field with its range: each bound is accepted, a step beyond it refused
RANGE_CASES = list(RANGES.items())


def _row_for(field: str, value: float) -> dict:
    """A valid query whose ``field`` is ``value`` (an uncatalogued GPU/LLM for spec fields)."""
    row = {**OK}
    if field == "batch_size":
        row = {**OK, "scenario": "offline", "request_rate_rps": None}
    if field == "concurrency":
        row = {**OK, "request_rate_rps": None}
    if field.startswith("gpu_"):
        row |= {"gpu": "NVIDIA X1", **NEW_GPU}
    if field.startswith("llm_"):
        row |= {"model": "acme/new-3b", **NEW_LLM}
    row[field] = value
    return row


def _inside(rule: Range) -> list[float]:
    low = rule.low + (1 if rule.whole else 1e-3) if rule.low_open else rule.low
    return [low, rule.high]


def _outside(rule: Range) -> list[float]:
    below = rule.low if rule.low_open else rule.low - (1 if rule.whole else 1e-3 * rule.low or 1e-3)
    return [below, rule.high + (1 if rule.whole else rule.high * 1e-3)]


@pytest.mark.parametrize(("field", "rule"), RANGE_CASES, ids=[f for f, _ in RANGE_CASES])
def test_every_range_rule_takes_its_bounds_and_refuses_beyond(small_catalog, field, rule):
    for value in _inside(rule):
        row = _row_for(field, value)
        if field == "llm_params_b":
            row["llm_active_params_b"] = value
        if field == "llm_num_attention_heads":
            row["llm_num_kv_heads"] = 1.0
        if field == "llm_num_kv_heads":
            row["llm_num_attention_heads"] = value
        if field == "llm_active_params_b":
            row["llm_params_b"] = value
        out = check(row, catalog=small_catalog)
        assert out.loc[0, field] == value
    for value in _outside(rule):
        with pytest.raises(QueryError) as err:
            check(_row_for(field, value), catalog=small_catalog)
        shown = int(value) if float(value).is_integer() else value  # a whole number whole
        assert str(err.value) == f"row 0: {field} must be {rule.describe()}; got {shown!r}"
        assert err.value.field == field and err.value.row == 0
    if rule.whole:
        with pytest.raises(QueryError, match=f"{field} must be a whole number"):
            check(_row_for(field, rule.low + 1.5), catalog=small_catalog)


def test_chunked_prefill_reads_on_off_true_false_and_one_zero(small_catalog):
    given = ["on", "OFF", True, False, 1, 0.0, None]
    out = check(*({**OK, "chunked_prefill": v} for v in given), catalog=small_catalog)
    np.testing.assert_array_equal(out["chunked_prefill"], [1, 0, 1, 0, 1, 0, np.nan])


def test_range_messages_by_hand():
    assert RANGES["gpu_tdp_w"].describe() == "a number from 10 to 2000 W"
    assert RANGES["gpu_memory_bandwidth_gb_s"].describe() == "a number from 50 to 20000 GB/s"
    assert RANGES["gpu_memory_gb"].describe() == "a number from 1 to 1024 GB"
    assert RANGES["llm_params_b"].describe() == "a number greater than 0 and at most 100000 billion"


def test_active_parameters_above_total_are_refused(small_catalog):
    with pytest.raises(QueryError) as err:
        check({**OK, "llm_active_params_b": 9.0}, catalog=small_catalog)
    # the catalogue's Llama-3.1-8B has 8.03 B parameters in all
    assert str(err.value) == (
        "row 0: llm_active_params_b must be at most the total parameters llm_params_b; "
        "got 9 active of 8.03 billion"
    )
    with pytest.raises(QueryError, match="got 4 active of 3 billion"):
        check(
            {**OK, "model": "acme/new-3b", **NEW_LLM, "llm_active_params_b": 4.0},
            catalog=small_catalog,
        )


def test_a_bad_value_is_quoted_short(small_catalog):
    with pytest.raises(QueryError) as err:
        check({**OK, "dtype": "b" * 150}, catalog=small_catalog)
    assert len(str(err.value)) < 250 and str(err.value).endswith("...b'")


def test_numbers_in_a_mixed_column_name_the_bad_row(small_catalog):
    rows = [OK, {**OK, "request_rate_rps": 2}, {**OK, "request_rate_rps": False}]
    with pytest.raises(QueryError, match=r"^row 2: request_rate_rps must be a number; got False"):
        check(*rows, catalog=small_catalog)
    with pytest.raises(QueryError, match=r"^row 1: gpu must be a non-empty string; got \[1\]"):
        check(OK, {**OK, "gpu": [1]}, catalog=small_catalog)


def test_query_frame_takes_records_columns_and_one_record():
    rows = [{"gpu": "L4", "model": "m"}, {"gpu": "T4", "model": "n"}]
    assert query_frame(rows)["gpu"].tolist() == ["L4", "T4"]
    assert query_frame({"gpu": ["L4", "T4"], "model": ["m", "n"]})["model"].tolist() == ["m", "n"]
    assert query_frame({"gpu": "L4", "model": "m"}).to_dict("records") == [rows[0]]
    frame = pd.DataFrame(rows)
    assert query_frame(frame) is frame


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            {"gpu": ["L4", "T4"], "model": ["m"]},
            "columns must all have the same length; got gpu: 2, model: 1",
        ),
        (
            "H100",
            "the query must be a table: records (a list of objects) or columns of equal "
            "length; got str",
        ),
        (7, "got int"),
    ],
)
def test_query_frame_refuses_what_is_no_table(payload, message):
    with pytest.raises(QueryError, match=None) as refused:
        query_frame(payload)
    assert message in str(refused.value)


def test_warnings_of_several_models_name_the_model_they_belong_to():
    from wattgpu.lifecycle.client import merged_warnings

    merged = merged_warnings({"power": "a; b", "itl": "a", "ttft": "a; c"})
    assert merged == "a; power: b; ttft: c"
    assert merged_warnings({"power": "", "itl": ""}) == ""


def test_a_field_given_twice_is_refused_by_name(small_catalog):
    frame = pd.DataFrame([[*OK.values(), 1.0]], columns=[*OK, "request_rate_rps"])
    with pytest.raises(QueryError) as refused:
        check_queries(frame, small_catalog)
    assert str(refused.value) == "column 'request_rate_rps' is given more than once"
    assert refused.value.field == "request_rate_rps"


def test_an_unknown_scenario_names_the_first_row_with_it(small_catalog):
    rows = [OK, {**OK, "scenario": " batch "}, {**OK, "scenario": "batch"}]
    with pytest.raises(QueryError) as refused:
        check(*rows, catalog=small_catalog)
    assert str(refused.value) == "row 1: scenario must be one of offline, server; got 'batch'"
