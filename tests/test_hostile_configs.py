"""A config.json cannot hurt whoever reads it: every number checked first, the count's cost flat.

A client describes an LLM by its config.json (REST ``model_config``, ``--model-config``); each
hostile config below is Llama-3.1-8B's (tests/fixtures/aiconfigurator, cut to the keys read)
with one field changed, and must be refused in one line naming the field, what is allowed and
the value cut short, before any arithmetic on it. ``HOSTILE`` is also sent over HTTP to a real
``wattgpu serve`` (tests/test_serve_guard.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from wattgpu.data.config_fields import CONFIG_RANGES
from wattgpu.data.llm_configs import layer_plan, parse_config, read_config
from wattgpu.errors import DataError, QueryError
from wattgpu.modeling.answering.queries import check_query_columns

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA = json.loads(
    (
        FIXTURES / "aiconfigurator/model_configs/meta-llama--Meta-Llama-3.1-8B_config.json"
    ).read_text()
)
QWEN3_MOE = json.loads((FIXTURES / "llm_configs/Qwen--Qwen3-30B-A3B_config.json").read_text())
LAYERS = "num_hidden_layers must be a whole number from 1 to 10000; got"


def llama(**changes: object) -> dict:
    return LLAMA | changes


# (what, the config as a client sends it: an object or JSON text, the message's start after
# "model_config: "); the first five are the issue's, each a 200 or a 500 before the checks
HOSTILE: list[tuple[str, object, str]] = [
    ("ten million layers", llama(num_hidden_layers=10_000_000), f"{LAYERS} 10000000"),
    ("10^12 layers", llama(num_hidden_layers=10**12), f"{LAYERS} 1000000000000"),
    (
        "an MLP of 1e308",
        llama(intermediate_size=1e308),
        "intermediate_size must be a whole number from 1 to 10000000; got 1e+308",
    ),
    (
        "an MLP of 10^400, a JSON integer",
        json.dumps(LLAMA).replace(
            '"intermediate_size": 14336', '"intermediate_size": 1' + "0" * 400
        ),
        "intermediate_size must be a whole number from 1 to 10000000; got an integer of about "
        "401 digits",
    ),
    (
        "a vocabulary of 10^300",
        llama(vocab_size=10**300),
        "vocab_size must be a whole number from 1 to 100000000; got an integer of about 301 digits",
    ),
    ("negative layers", llama(num_hidden_layers=-32), f"{LAYERS} -32"),
    ("no layers", llama(num_hidden_layers=0), f"{LAYERS} 0"),
    ("layers NaN", json.dumps(llama(num_hidden_layers=math.nan)), f"{LAYERS} nan"),
    ("layers Infinity", json.dumps(llama(num_hidden_layers=math.inf)), f"{LAYERS} inf"),
    ("layers a boolean", llama(num_hidden_layers=True), f"{LAYERS} True"),
    ("layers a string", llama(num_hidden_layers="32"), f"{LAYERS} '32'"),
    ("layers fractional", llama(num_hidden_layers=31.5), f"{LAYERS} 31.5"),
    ("layers a list", llama(num_hidden_layers=[32]), f"{LAYERS} [32]"),
    (
        "a head dimension of 10^6",
        llama(head_dim=10**6),
        "head_dim must be a whole number from 1 to 100000; got 1000000",
    ),
    (
        "a context of 10^10",
        llama(max_position_embeddings=10**10),
        "max_position_embeddings must be a whole number from 1 to 1000000000; got 10000000000",
    ),
    (
        "ten million experts",
        QWEN3_MOE | {"num_experts": 10_000_000},
        "num_experts must be a whole number from 0 to 100000; got 10000000",
    ),
    (
        "an expert width of 1e300",
        QWEN3_MOE | {"moe_intermediate_size": 1e300},
        "moe_intermediate_size must be a whole number from 1 to 10000000; got 1e+300",
    ),
    (
        "a KV LoRA rank of 10^9",
        llama(kv_lora_rank=10**9),
        "kv_lora_rank must be a whole number from 0 to 100000; got 1000000000",
    ),
    (
        "a sliding window of 10^12",
        llama(sliding_window=10**12),
        "sliding_window must be a whole number from 0 to 1000000000; got 1000000000000",
    ),
    (
        "a full-attention interval of -1",
        llama(full_attention_interval=-1),
        "full_attention_interval must be a whole number from 0 to 10000; got -1",
    ),
    (
        "layer types that are numbers",
        llama(layer_types=[1] * 32),
        "layer_types must list attention kinds (full_attention, sliding_attention, "
        "linear_attention, ...) of at most 64 characters; got 1",
    ),
    (
        "layer types longer than the layers",
        llama(layer_types=["full_attention"] * 33),
        "layer_types lists 33 layers, not 32",
    ),
    (
        "a dense-only layer of 10^20",
        QWEN3_MOE | {"mlp_only_layers": [10**20]},
        "mlp_only_layers must list layers, a whole number from 0 to 47; got 100000000000000000000",
    ),
    (
        "100 kB of dtype",
        llama(torch_dtype="x" * 100_000),
        "torch_dtype must be one of float32, fp32, float16, fp16, bfloat16, bf16, fp8, float8, "
        "int8, int4, mxfp4, nvfp4, fp8_block, int4_wo; got 'xxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxx...",
    ),
    (
        "100 kB of model type",
        llama(model_type="x" * 100_000),
        "model_type 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... is not an architecture",
    ),
    (
        "an unknown quant_method",
        llama(quantization_config={"quant_method": "y" * 100_000}),
        "quantization_config quant_method 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy... is not a weight",
    ),
    (
        "config groups that are a list",
        llama(quantization_config={"quant_method": "compressed-tensors", "config_groups": [4]}),
        "compressed-tensors config_groups must be a JSON object; got [4]",
    ),
    (
        "a quantization config that is a string",
        llama(quantization_config="awq"),
        "quantization_config must be a JSON object; got 'awq'",
    ),
    (
        "parameters beyond any GPU",
        llama(num_hidden_layers=10_000, hidden_size=1_000_000, intermediate_size=10_000_000),
        "the parameters it describes must be at most 100,000 billion; got 3.25e+08 billion",
    ),
    # a multimodal config nests its language model: the same faults inside are refused alike
    (
        "ten million layers in text_config",
        {"model_type": "qwen3_vl", "text_config": llama(num_hidden_layers=10_000_000)},
        f"{LAYERS} 10000000",
    ),
    (
        "an MLP of 1e308 in llm_config",
        {"model_type": "internvl_chat", "llm_config": llama(intermediate_size=1e308)},
        "intermediate_size must be a whole number from 1 to 10000000; got 1e+308",
    ),
    (
        "a text_config that is a number",
        {"model_type": "qwen3_vl", "text_config": 7},
        "text_config must be a JSON object; got 7",
    ),
]
# What the query check refuses once the config is read (its llm_* columns' own rules).
HOSTILE_SHAPES: list[tuple[str, object, str]] = [
    (
        "KV heads that do not divide the heads",
        llama(num_key_value_heads=7),
        "llm_num_kv_heads must divide llm_num_attention_heads; got 7 and 32",
    ),
    (
        "more experts per token than experts",
        QWEN3_MOE | {"num_experts_per_tok": 200},
        "llm_experts_per_token must be at most llm_num_experts; got 200 of 128",
    ),
]
# Text that is no config object: refused by the parser, whatever its size.
HOSTILE_TEXT: list[tuple[str, object, str]] = [
    ("a list", [LLAMA], "model_config must be a JSON object (a model's config.json); got list"),
    ("text that is no JSON", "{hidden_size: 1", "model_config is not valid JSON: Expecting"),
    ("nested too deeply", "[" * 200_000 + "]" * 200_000, "model_config is not a config.json"),
    (
        "an integer of 5,000 digits",
        '{"vocab_size": 1' + "0" * 5_000 + "}",
        "model_config is not valid JSON: Exceeds the limit (4300 digits)",
    ),
]


def refusal(config: object) -> str:
    with pytest.raises(DataError) as refused:
        read_config(parse_config(config, "model_config"), "model_config")
    return str(refused.value)


@pytest.mark.parametrize(("what", "config", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_config_is_refused_in_one_line_naming_the_field(what, config, message):
    said = refusal(config)
    assert said.startswith(f"model_config: {message}"), said
    assert "\n" not in said and len(said) < 400


@pytest.mark.parametrize(
    ("what", "text", "message"), HOSTILE_TEXT, ids=[h[0] for h in HOSTILE_TEXT]
)
def test_text_that_is_no_config_object_is_refused_in_one_line(what, text, message):
    with pytest.raises(DataError) as refused:
        parse_config(text, "model_config")
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 400


@pytest.mark.parametrize(
    ("what", "config", "message"),
    [*HOSTILE, *HOSTILE_SHAPES, *HOSTILE_TEXT],
    ids=[h[0] for h in [*HOSTILE, *HOSTILE_SHAPES, *HOSTILE_TEXT]],
)
def test_a_query_with_a_hostile_config_names_the_row_and_the_field(catalog, what, config, message):
    query = {"gpu": "NVIDIA A10", "scenario": "server", "concurrency": 8}
    rows = pd.DataFrame(
        [
            {**query, "model": "meta-llama/Llama-3.1-8B-Instruct"},
            {**query, "model": "acme/x", "model_config": config},
        ]
    )
    with pytest.raises(QueryError) as refused:
        check_query_columns(rows, catalog)
    assert refused.value.row == 1
    assert message in str(refused.value)
    assert len(str(refused.value)) < 400


# Values of every kind a client could put in a number's place.
WILD = [-1, 0, 0.5, 2.0**70, math.nan, math.inf, -math.inf, True, "8", [8], {"a": 8}, 10**400]


@pytest.mark.parametrize("field", sorted(CONFIG_RANGES))
def test_any_value_of_any_field_gives_a_row_or_a_data_error(field):
    """Never another exception (a 500 over REST), whatever a field holds, on a dense and an MoE
    config; the row's numbers, when there is one, lie in the llm_* columns' ranges."""
    for base in (LLAMA, QWEN3_MOE):
        for value in WILD:
            try:
                row = read_config(base | {field: value}, "c")
            except DataError:
                continue
            assert 0 < row["params_b"] <= 100_000 and 1 <= row["num_layers"] <= 10_000


def test_layers_are_counted_by_kind_as_a_layer_by_layer_count_would():
    """Ten layers: full attention every 4th (layers 3, 7), the others linear; experts from layer
    1 on in every 2nd (1, 3, 5, 7, 9) but layer 3 (dense only): experts in 1, 5, 7, 9."""
    config = {
        "num_hidden_layers": 10,
        "full_attention_interval": 4,
        "num_experts": 8,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 2,
        "mlp_only_layers": [3],
    }
    expected = {
        ("full_attention", True): 1,  # 7
        ("full_attention", False): 1,  # 3
        ("linear_attention", True): 3,  # 1, 5, 9
        ("linear_attention", False): 5,  # 0, 2, 4, 6, 8
    }
    assert layer_plan(config) == expected
    listed = ["full_attention" if i in (3, 7) else "linear_attention" for i in range(10)]
    assert layer_plan({**config, "layer_types": listed}) == expected
    # no interval: all full; the first three dense, then experts in every layer
    dense_first = {"num_hidden_layers": 61, "n_routed_experts": 256, "first_k_dense_replace": 3}
    assert layer_plan(dense_first) == {("full_attention", False): 3, ("full_attention", True): 58}


def _seconds(*configs: dict) -> list[float]:
    """Per config, the fastest of 9 timings of 50 readings, the configs timed in turn.

    Interleaved, so that a busy machine slows each alike; the fastest, so that it is the cost
    of the reading and not of the machine's other work.
    """
    best = [math.inf] * len(configs)
    for _ in range(9):
        for i, config in enumerate(configs):
            start = time.perf_counter()
            for _ in range(50):
                read_config(config, "c")
            best[i] = min(best[i], time.perf_counter() - start)
    return best


@pytest.mark.parametrize(
    "changes",
    [
        {},  # dense
        {"full_attention_interval": 4},
        {"num_experts": 16, "num_experts_per_tok": 4, "first_k_dense_replace": 3},
    ],
    ids=["dense", "linear every 4th", "experts after 3 dense"],
)
def test_a_config_of_10000_layers_is_read_in_the_time_of_one_of_32(changes):
    """Measured as a ratio of the two readings on the same machine; before layers were counted by
    kind, 10,000 layers took about 180 times as long as 32 (27.9 against 0.15 ms)."""
    linear = {  # Gated DeltaNet's fields, read where layers are linear
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
    }
    base = LLAMA | linear | changes
    short, long = _seconds(base | {"num_hidden_layers": 32}, base | {"num_hidden_layers": 10_000})
    assert read_config(base | {"num_hidden_layers": 10_000}, "c")["num_layers"] == 10_000
    assert long < 3 * short, (short, long)


def test_the_cli_refuses_a_hostile_config_file_in_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(llama(num_hidden_layers=10**12)))
    args = ["--gpu", "NVIDIA A10", "--model-config", str(path), "--concurrency", "8"]
    done = subprocess.run(
        [sys.executable, "-m", "wattgpu", "predict", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "WATTGPU_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == f"Error: {path}: {LAYERS} 1000000000000\n"
