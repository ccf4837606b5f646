"""The AIConfigurator importer, LLM rows built from configs, and the hand-typed catalogue rows.

tests/fixtures/aiconfigurator/ holds, beside the repository's LICENSE (Apache-2.0), eight real
lines of github.com/ai-dynamo/aiconfigurator@095f58a
``aic-core/src/aiconfigurator_core/systems/silicon_sample.csv`` (its rows 0, 420, 26, 309, 1405,
661, 637 and 628, byte for byte) and some of the ``model_configs/*_config.json`` it ships, cut
down to the keys ``wattgpu.data.llm_configs`` reads (the raw files stay in ../shared).
Every expected number below is worked out by hand from those lines.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.importers import AIC_DISAGG, AIC_ITL_KIND, import_aiconfigurator
from wattgpu.data.importers.aiconfigurator import (
    AIC_CONCURRENCY_MISMATCH,
    AIC_LAYOUT_MISMATCH,
    engine_version,
    weight_dtype,
)
from wattgpu.data.llm_configs import catalogue_row, count_params
from wattgpu.errors import DataError
from wattgpu.modeling.physical.features import itl_statistic

FIXTURE = Path(__file__).parent / "fixtures" / "aiconfigurator"
CONFIGS = FIXTURE / "model_configs"
AIC_RAW = REFERENCE / "aiconfigurator" / "raw" / "ai-dynamo+aiconfigurator@095f58a"
AIC_CONFIGS = AIC_RAW / "aic-core" / "src" / "aiconfigurator_core" / "model_configs"
WATTGPU_FEATURES = REFERENCE / "wattgpu" / "model_features.csv"


def _config(stem: str) -> dict:
    return json.loads((CONFIGS / f"{stem}_config.json").read_text())


@pytest.fixture(scope="module")
def result():
    # GB200 is left out explicitly, so that the test does not depend on when it is catalogued.
    gpus = pd.read_csv(SHIPPED_DATA_DIR / "gpus.csv")
    llms = pd.read_csv(SHIPPED_DATA_DIR / "llms.csv")
    catalog = Catalog.from_frames(gpus[gpus["gpu"] != "NVIDIA GB200"], llms)
    return import_aiconfigurator(FIXTURE, catalog)


# The source's row number -> the fixture's (its ``source_row``).
FIXTURE_ROW = {0: 0, 420: 1, 26: 2, 309: 3, 1405: 4, 661: 5, 637: 6, 628: 7}


def _kept(result, source_row: int) -> pd.Series:
    return result.rows.set_index("source_row").loc[FIXTURE_ROW[source_row]]


def _reason(result, source_row: int) -> str:
    return result.dropped.set_index("source_row").loc[FIXTURE_ROW[source_row], "reason"]


def test_the_licence_travels_with_the_fixture():
    text = (FIXTURE / "LICENSE").read_text()
    shipped = (Path(__file__).parents[1] / "data" / "LICENSE-Apache-2.0.txt").read_text()
    for licence in (text, shipped):
        assert "Apache License" in licence and "Version 2.0, January 2004" in licence


def test_kept_and_dropped(result):
    assert sorted(result.rows["source_row"]) == sorted(FIXTURE_ROW[i] for i in (26, 309, 420, 661))
    assert _reason(result, 0) == AIC_DISAGG
    assert _reason(result, 1405) == AIC_LAYOUT_MISMATCH  # tp 1, no dp; experts on 2 x 1 GPUs
    assert _reason(result, 637) == "GPU name does not resolve: 'gb200'"
    assert _reason(result, 628) == AIC_CONCURRENCY_MISMATCH  # batch 56, concurrency 224


def test_deepseek_on_64_b200_with_attention_data_parallel(result):
    row = _kept(result, 420)
    assert (row["gpu"], row["model"]) == ("NVIDIA B200", "deepseek-ai/DeepSeek-V3")
    assert (row["gpu_source_name"], row["engine"], row["engine_version"]) == (
        "b200_sxm",
        "trtllm",
        "1.2.0rc6.post2",
    )
    # tp 1 x attention_dp 64 x pp 1 = 64 GPUs (= moe_tp 8 x moe_ep 8); batch 4 per rank x 64
    assert row["num_gpus"] == 64
    assert row["concurrency"] == 256
    assert (row["input_tokens"], row["output_tokens"]) == (1024, 8192)
    assert row["ttft_s"] == pytest.approx(0.9066183994952098)  # 906.618... ms
    assert row["itl_s"] == pytest.approx(0.021374843718536397)  # 21.374... ms
    assert row["dtype"] == "nvfp4"
    assert row["measured_at"] == "2026-02-03T00:00:00.000Z"
    assert row["task"] == "isl1024_osl8192"
    assert (row["tensor_parallel"], row["attention_dp"], row["moe_expert_parallel"]) == (1, 64, 8)


def test_minimax_batch_is_per_data_parallel_rank(result):
    row = _kept(result, 26)
    # tp 4 x attention_dp 4 = 16 GPUs (= moe 1 x 16); batch 64 x 4 = silicon_concurrency 256
    assert (row["num_gpus"], row["concurrency"]) == (16, 256)
    assert (row["engine"], row["engine_version"], row["dtype"]) == ("vllm", "0.19.0", "fp8")
    assert row["ttft_s"] == pytest.approx(0.3880431298702206)


def test_blank_backend_version_and_dense_rows(result):
    row = _kept(result, 309)  # backend_version blank, no image named: engine_version blank
    assert pd.isna(row["engine_version"])
    assert (row["num_gpus"], row["concurrency"]) == (8, 32)
    assert row["itl_s"] == pytest.approx(0.013958856669512974)
    qwen = _kept(result, 661)  # Qwen3-32B on SGLang, tp 2, moe 1 x 1 (the defaults), no format
    assert (qwen["gpu"], qwen["model"]) == ("NVIDIA H100 SXM5", "Qwen/Qwen3-32B")
    assert (qwen["num_gpus"], qwen["concurrency"]) == (2, 16)
    assert pd.isna(qwen["dtype"]) and pd.isna(qwen["measured_at"])
    assert qwen["engine_version"] == "0.5.1.post1"
    assert (qwen["ttft_s"], qwen["itl_s"]) == pytest.approx((0.8408064807531249, 0.016538571871875))


def test_every_kept_row_is_a_closed_loop_without_power(result):
    rows = result.rows
    assert (rows["scenario"] == "server").all()
    assert rows["request_rate_rps"].isna().all() and rows["batch_size"].isna().all()
    assert rows["mean_power_w"].isna().all()
    assert "engine_year" not in rows or rows["engine_year"].isna().all()
    assert (rows["itl_kind"] == AIC_ITL_KIND).all()
    assert set(rows["source"]) == {"nvidia aiconfigurator (silicon_sample)"}
    assert set(rows["client"]) == {"aiconfigurator"}  # its harness: a closed loop, fixed lengths
    assert list(itl_statistic(np.array([AIC_ITL_KIND], dtype=object))) == ["mean"]


def test_engine_version_from_the_image_tag():
    source = (
        "db-dump/2026-04-27; config_id=759; silicon_concurrency=4; "
        "measured=2026-04-18T00:00:00.000Z; workflow_run_id=778; "
        "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.1.0-dev.2"
    )
    # a Dynamo runtime image's tag is Dynamo's version, not TensorRT-LLM's
    assert engine_version(None, source) == "dynamo-1.1.0-dev.2"
    assert engine_version("1.1.0-dev.2", source) == "dynamo-1.1.0-dev.2"
    assert engine_version("glm5-hopper", source) == "glm5-hopper"
    assert engine_version(None, "image=nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2") == "1.2.0rc2"
    assert engine_version(float("nan"), "image=lmsysorg/sglang:nightly-dev; x=1") == "nightly-dev"
    assert engine_version(None, "source_file=2026-04-06.csv; model=GLM-5; ; ; wip=True") is None


def test_weight_dtype():
    assert weight_dtype("fp8", "fp8", "fp8_block") == ("fp8", None)
    assert weight_dtype("fp4", "nvfp4", "nvfp4") == ("nvfp4", None)
    assert weight_dtype("int4", "int4_wo", "int4_wo") == ("int4_wo", None)
    assert weight_dtype("bf16", None, None) == ("bfloat16", None)
    assert weight_dtype(None, None, None) == (None, None)
    assert weight_dtype("fp8", "fp8", "nvfp4")[1].startswith("GEMMs and experts")


# --- parameter counts against the model cards -------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "total_b", "active_b"),
    [
        ("meta-llama--Meta-Llama-3.1-8B", 8.03, 8.03),
        ("meta-llama--Meta-Llama-3.1-70B", 70.55, 70.55),
        ("deepseek-ai--DeepSeek-V3", 671, 37),
        ("Qwen--Qwen3-32B", 32.8, 32.8),
        ("Qwen--Qwen3-235B-A22B", 235, 22),
    ],
)
def test_parameter_count_matches_the_model_card(stem, total_b, active_b):
    total, active = count_params(_config(stem))
    assert total == pytest.approx(total_b, rel=0.02)
    assert active == pytest.approx(active_b, rel=0.02)


def test_gpt_oss_count_matches_openais_table():
    total, active = count_params(_config("openai--gpt-oss-120b"))
    assert total == pytest.approx(116.83, rel=0.002)
    # OpenAI's 5.13B active leaves out the input embedding (a lookup): 201,088 x 2,880
    assert active - 201088 * 2880 / 1e9 == pytest.approx(5.13, rel=0.002)


def test_catalogue_rows_of_the_attention_kinds():
    mla = catalogue_row(_config("deepseek-ai--DeepSeek-V3"))
    assert (mla["attention"], mla["kv_lora_rank"], mla["qk_rope_head_dim"]) == ("mla", 512, 64)
    assert (mla["head_dim"], mla["num_experts"], mla["shared_experts"]) == (128, 256, 1)
    assert (mla["weight_format"], mla["moe_intermediate_size"]) == ("fp8", 2048)
    oss = catalogue_row(_config("openai--gpt-oss-120b"))
    assert (oss["attention"], oss["sliding_window"], oss["num_sliding_layers"]) == (
        "sliding",
        128,
        18,
    )
    assert (oss["num_kv_layers"], oss["weight_format"]) == (18, "mxfp4")
    qwen = catalogue_row(_config("Qwen--Qwen3.5-397B-A17B"))  # every 4th layer full
    assert (qwen["attention"], qwen["arch"]) == ("linear_hybrid", "hybrid")
    assert (qwen["num_linear_layers"], qwen["num_kv_layers"]) == (45, 15)
    assert qwen["params_b"] == pytest.approx(397, rel=0.02)  # "397B-A17B"
    assert qwen["active_params_b"] == pytest.approx(17, rel=0.03)
    kimi = catalogue_row(_config("moonshotai--Kimi-K2.5"))  # text_config; INT4 experts
    assert (kimi["weight_format"], kimi["num_experts"], kimi["num_layers"]) == ("int4_wo", 384, 61)
    assert kimi["params_b"] == pytest.approx(1030, rel=0.02)  # card: 1T total, 32B active
    assert kimi["active_params_b"] == pytest.approx(32, rel=0.03)
    dense = catalogue_row(_config("meta-llama--Meta-Llama-3.1-8B"))
    assert (dense["attention"], dense["num_experts"], dense["kv_lora_rank"]) == ("gqa", None, None)


# --- the hand-typed catalogue rows against the configs in ../shared ----------------------------

STRUCTURAL = (
    "num_layers",
    "num_kv_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "num_experts",
    "experts_per_token",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "sliding_window",
    "num_sliding_layers",
    "num_linear_layers",
    "attention",
)


def _aic_configs() -> dict[str, dict]:
    """model id -> config, for every config AIConfigurator ships (``org--name`` -> ``org/name``)."""
    out = {}
    for path in sorted(AIC_CONFIGS.glob("*_config.json")):
        if path.name.endswith("_hf_quant_config.json"):
            continue
        model = path.name.removesuffix("_config.json").replace("--", "/", 1)
        out[model] = json.loads(path.read_text())
    return out


def _feature_configs() -> dict[str, dict]:
    """model id -> the config fields WattGPU's model_features.csv lists (blank ones left out)."""
    frame = pd.read_csv(WATTGPU_FEATURES, sep=";", dtype=str, keep_default_na=False)
    out = {}
    for _, row in frame.iterrows():
        config: dict = {}
        for key, text in row.items():
            if text in ("", "N/A"):
                continue
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = {"TRUE": True, "FALSE": False}.get(text, text)
            config[key] = int(value) if isinstance(value, float) and value.is_integer() else value
        out[row["model_name"]] = config
    return out


def _same(mine: object, theirs: object) -> bool:
    if mine is None or (isinstance(mine, float) and math.isnan(mine)):
        return theirs is None or (isinstance(theirs, float) and math.isnan(theirs))
    if isinstance(theirs, str) or isinstance(mine, str) and str(mine) not in ("True", "False"):
        return str(mine) == str(theirs)
    if isinstance(theirs, bool) or str(mine) in ("True", "False"):
        return str(mine).lower() == str(theirs).lower()
    return theirs is not None and float(mine) == float(theirs)


def test_hand_typed_rows_agree_with_the_shipped_configs():
    if not AIC_CONFIGS.is_dir() or not WATTGPU_FEATURES.is_file():
        pytest.skip(f"the configs in {REFERENCE} are not at hand")
    llms = pd.read_csv(SHIPPED_DATA_DIR / "llms.csv")
    names = {
        name: model
        for model, aliases in zip(llms["model"], llms["aliases"].fillna(""), strict=True)
        for name in [model, *[a for a in aliases.split("|") if a]]
    }
    configs = {**_feature_configs(), **_aic_configs()}
    checked, wrong = 0, []
    for name, config in configs.items():
        model = names.get(name)
        if model is None:
            continue
        try:
            expected = catalogue_row(config)
        except (DataError, KeyError, TypeError, ValueError):
            continue  # a config the builder cannot read (older families); not a catalogue fact
        row = llms.set_index("model").loc[model]
        checked += 1
        dense = ("intermediate_size",) if pd.isna(row["num_experts"]) else ()
        for column in (*STRUCTURAL, *dense, "max_position_embeddings"):
            if column in row.index and not _same(row[column], expected[column]):
                wrong.append(f"{model} ({name}): {column} {row[column]} != {expected[column]}")
    assert checked >= 20
    assert not wrong, "\n".join(wrong)
