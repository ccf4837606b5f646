"""The Argonne LLM-Inference-Bench importer, its CLI command and its fetch list."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REFERENCE

from wattgpu.data import fetch as fetch_module
from wattgpu.data.importers import (
    ARGONNE_ITL_KIND,
    ImportResult,
    import_argonne,
    read_argonne,
    summarise,
)
from wattgpu.errors import DataError

ARGONNE_RAW = REFERENCE / "argonne_llm_inference_bench" / "raw"
ARGONNE_TIDY = REFERENCE / "argonne_llm_inference_bench" / "measurements.csv"
COMMIT_DIR = "argonne-lcf+LLM-Inference-Bench@4211f5d"

HEADER = (
    "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,Throughput"
)
# Real lines of Plots/All_results.csv (file lines 2, 1632, 256, 1411, 3589, 216), then one with
# a made-up model name.
ALL_RESULTS = f"""\
{HEADER}
Nvidia GH200 GPU,1,TensorRT-LLM,mistralai/Mistral-7B-v0.1,128,16,0.8496496915817261,\
4820.8103181615925
Nvidia H100 GPU,4,vLLM,meta-llama/Meta-Llama-3-70B,2048,16,50.37927148396678,1300.8524750274892
Nvidia A100 GPU,2,llama.cpp,meta-llama/Llama-2-7b-hf,128,16,2.398466,106.734884
Nvidia H100 GPU,1,TensorRT-LLM,Qwen/Qwen2-7B,2048,1,0.0826040506362915,49585.94606982204
AMD MI300X GPU,2,vLLM,meta-llama/Llama-2-70b-hf,128,1,5.6004650899994886,45.710489376521295
Nvidia A100 GPU,4,Deepspeed-MII,mistralai/Mixtral-8x7B-v0.1,128,16,2.4134912490844727,\
1697.126518090242
Nvidia A100 GPU,1,vLLM,example-org/never-released-7b,128,1,1.5,170.0
"""
# Real lines 3 and 59 of Plots/Fig_16_a_b/power_results.csv, with its blank second line.
POWER_RESULTS = f"""\
{HEADER},avg_power

Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,1024,16,25.050500875338912,1308.0776373720582,\
292973.44
Nvidia GH200 GPU,1,TensorRT-LLM,meta-llama/Meta-Llama-3-8B,1024,16,8.858555221557618,\
3699.023055165686,445911.0606060606
"""
LATENCY_FILE = f"{COMMIT_DIR}/Plots/All_results.csv"
POWER_FILE = f"{COMMIT_DIR}/Plots/Fig_16_a_b/power_results.csv"


def _write_raw(root: Path, all_results: str = ALL_RESULTS, power: str = POWER_RESULTS) -> Path:
    for rel, text in ((LATENCY_FILE, all_results), (POWER_FILE, power)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    # another CSV of the repository (a figure's subset) is passed over
    (root / COMMIT_DIR / "Plots" / "Fig_3").mkdir(parents=True)
    (root / COMMIT_DIR / "Plots" / "Fig_3" / "A100_H100_quant_all_results.csv").write_text("x\n1\n")
    return root


@pytest.fixture(scope="module")
def small_raw(tmp_path_factory) -> Path:
    return _write_raw(tmp_path_factory.mktemp("argonne"))


@pytest.fixture(scope="module")
def small(small_raw, catalog) -> ImportResult:
    return import_argonne(small_raw, catalog)


def _kept(result: ImportResult, source_file: str, source_row: int) -> pd.Series:
    rows = result.rows
    match = rows[(rows["source_file"] == source_file) & (rows["source_row"] == source_row)]
    assert len(match) == 1, (source_file, source_row)
    return match.iloc[0]


def test_power_row_checked_by_hand(small):
    row = _kept(small, POWER_FILE, 0)
    # A100, vLLM, Llama-2-7b, 1024 in/out, batch 16: 25.050500875338912 s, 292973.44 mW
    assert row["mean_power_w"] == pytest.approx(292.97344, rel=1e-12)
    assert row["itl_s"] == pytest.approx(25.050500875338912 / 1024)  # 24.46 ms, incl. prefill
    assert row["itl_kind"] == ARGONNE_ITL_KIND
    assert row["throughput_tok_s"] == pytest.approx(16 * 1024 / 25.050500875338912)  # 654 tok/s
    assert row["inv_throughput_s_per_tok"] == pytest.approx(25.050500875338912 / (16 * 1024))
    # 292.97 W x 25.05 s / 16384 tokens = 0.448 J/token
    assert row["energy_per_token_j"] == pytest.approx(292.97344 * 25.050500875338912 / 16384)
    assert row["gpu"] == "NVIDIA A100 SXM4 40GB" and row["gpu_source_name"] == "Nvidia A100 GPU"
    assert row["client"] == "argonne"  # its harness: one offline batch sent at t = 0
    assert row["model"] == "meta-llama/Llama-2-7b-hf"
    assert (row["engine"], row["scenario"], row["batch_size"], row["num_gpus"]) == (
        "vllm",
        "offline",
        16,
        1,
    )
    assert (row["input_tokens"], row["output_tokens"]) == (1024, 1024)
    assert (row["family"], row["task"]) == ("power_sweep", "random_in1024_out1024")
    assert pd.isna(row["dtype"])  # not stated by the source (16-bit in its scripts)
    # software of 2024 (paper PMBS 2024, raw files committed 2024-09-27), not the default 2025
    assert (small.rows["engine_year"] == 2024).all()
    gh200 = _kept(small, POWER_FILE, 1)
    assert gh200["gpu"] == "NVIDIA GH200 96GB HBM3"
    assert gh200["mean_power_w"] == pytest.approx(445.9110606060606)
    assert gh200["engine"] == "trtllm"


def test_latency_rows_checked_by_hand(small):
    gh200 = _kept(small, LATENCY_FILE, 0)
    # GH200, TensorRT-LLM, Mistral-7B, 128 in/out, batch 16 in 0.8496496915817261 s: no power
    assert math.isnan(gh200["mean_power_w"]) and math.isnan(gh200["energy_per_token_j"])
    assert gh200["itl_s"] == pytest.approx(0.8496496915817261 / 128)  # 6.64 ms
    assert gh200["throughput_tok_s"] == pytest.approx(16 * 128 / 0.8496496915817261)  # 2410
    assert gh200["task"] == "random_in128_out128" and gh200["family"] == "latency_sweep"

    multi = _kept(small, LATENCY_FILE, 1)
    # four H100s, vLLM, Llama-3-70B, 2048 in/out, batch 16 in 50.37927148396678 s
    assert multi["gpu"] == "NVIDIA H100 SXM5" and multi["num_gpus"] == 4
    assert multi["itl_s"] == pytest.approx(50.37927148396678 / 2048)  # 24.6 ms
    assert multi["throughput_tok_s"] == pytest.approx(16 * 2048 / 50.37927148396678)  # 650

    llama_cpp = _kept(small, LATENCY_FILE, 2)
    # llama-bench's "batch 16" is its prompt batch; it generates one sequence of 128 tokens in
    # 2.398466 s (the source: (128 + 128) / 2.398466 = 106.73 tok/s, no factor 16)
    assert llama_cpp["engine"] == "llama.cpp" and llama_cpp["num_gpus"] == 2
    assert (llama_cpp["batch_size"], llama_cpp["source_batch_size"]) == (1, 16)
    assert llama_cpp["itl_s"] == pytest.approx(2.398466 / 128)
    assert llama_cpp["throughput_tok_s"] == pytest.approx(128 / 2.398466)
    assert llama_cpp["inv_throughput_s_per_tok"] == pytest.approx(2.398466 / 128)


def test_argonne_drop_reasons(small):
    assert sorted(small.rows["source_file"] + ":" + small.rows["source_row"].astype(str)) == [
        f"{LATENCY_FILE}:0",
        f"{LATENCY_FILE}:1",
        f"{LATENCY_FILE}:2",
        f"{LATENCY_FILE}:5",  # Mixtral-8x7B: mixture-of-experts rows are kept
        f"{POWER_FILE}:0",
        f"{POWER_FILE}:1",
    ]
    reasons = dict(zip(small.dropped["source_row"], small.dropped["reason"], strict=True))
    assert reasons == {
        # 0.0826 s for 2048 tokens of Qwen2-7B: 40 us per token
        3: "implausibly short latency (< 2 ms per output token)",
        4: "not an NVIDIA GPU (AMD MI300X GPU)",
        6: "LLM does not resolve: 'example-org/never-released-7b'",
    }
    assert set(small.dropped["source_file"]) == {LATENCY_FILE}
    text = summarise(small)
    assert re.search(r"^rows kept +6$", text, re.M)
    assert re.search(r"^  multi-GPU \(per-GPU power\) +3$", text, re.M)
    assert re.search(
        r"^  not an NVIDIA GPU \(AMD MI300X GPU\) +1  e\.g\. meta-llama/Llama-2", text, re.M
    )


def test_implausible_run_keeps_its_power(tmp_path, catalog):
    # a power-sweep run under 2 ms per token keeps its power; only its ITL/throughput go
    power = f"{HEADER},avg_power\nNvidia H100 GPU,1,vLLM,Qwen/Qwen2-7B,1024,1,1.0,2048.0,300000.0\n"
    result = import_argonne(_write_raw(tmp_path, power=power), catalog)
    row = _kept(result, POWER_FILE, 0)
    assert row["mean_power_w"] == 300.0
    assert math.isnan(row["itl_s"]) and pd.isna(row["itl_kind"])
    assert math.isnan(row["throughput_tok_s"]) and math.isnan(row["energy_per_token_j"])


def test_single_gpu_drops_multi_gpu_rows(small_raw, catalog):
    result = import_argonne(small_raw, catalog, single_gpu=True)
    assert (result.rows["num_gpus"] == 1).all() and len(result.rows) == 3
    dropped = dict(zip(result.dropped["source_row"], result.dropped["reason"], strict=False))
    assert dropped[1] == "multi-GPU (4 GPUs)" and dropped[2] == "multi-GPU (2 GPUs)"


def test_argonne_bad_files(tmp_path, catalog):
    with pytest.raises(DataError, match="no Argonne results file under"):
        import_argonne(tmp_path, catalog)
    raw = _write_raw(tmp_path / "raw", all_results="Hardware,Model\nNvidia A100 GPU,x\n")
    with pytest.raises(DataError, match=re.escape(f"Argonne file {LATENCY_FILE} is not in")):
        import_argonne(raw, catalog)


# --- the reference table (../shared/reference) -------------------------------------------------

TEXT = ["source_file", "family", "task", "gpu", "model", "model_source_name", "engine", "scenario"]
NUMBERS = [
    "mean_power_w",
    "itl_s",
    "energy_per_token_j",
    "num_gpus",
    "input_tokens",
    "output_tokens",
]
# llama.cpp rows differ from the reference in these (see wattgpu.data.importers.argonne)
PER_SEQUENCE = ["batch_size", "throughput_tok_s", "inv_throughput_s_per_tok"]
KEY = ["source_file", "gpu", "engine", "model_source_name", "num_gpus", "input_tokens"]


@pytest.fixture(scope="module")
def reference_tidy() -> pd.DataFrame:
    """The third party's tidy table; missing is a failure in CI, a skip elsewhere."""
    if not ARGONNE_TIDY.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI: the reference measurements are missing at {ARGONNE_TIDY}")
        pytest.skip(f"reference measurements not found at {ARGONNE_TIDY}")
    return pd.read_csv(ARGONNE_TIDY)


@pytest.fixture(scope="module")
def argonne(reference_tidy, catalog) -> ImportResult:
    return import_argonne(ARGONNE_RAW, catalog)


def test_read_argonne_reproduces_the_reference_table(reference_tidy):
    mine = read_argonne(ARGONNE_RAW)
    mine = mine[~mine["_reason"].fillna("").str.startswith("not an NVIDIA GPU")]
    # the source repeats 23 configurations; their ITLs tell the repeats apart
    mine = mine.sort_values([*KEY, "source_batch_size", "itl_s"]).reset_index(drop=True)
    ref = reference_tidy.sort_values([*KEY, "batch_size", "itl_s"]).reset_index(drop=True)
    assert mine.groupby("family").size().to_dict() == {"latency_sweep": 2126, "power_sweep": 48}
    assert ref.groupby("family").size().to_dict() == {"latency_sweep": 2126, "power_sweep": 48}
    assert not mine.duplicated([*KEY, "source_batch_size", "itl_s"]).any()
    for column in TEXT:
        assert (mine[column] == ref[column]).all(), column
    assert (mine["source_batch_size"] == ref["batch_size"]).all()
    known = mine["itl_s"].notna()
    assert (mine.loc[known, "itl_kind"] == ref.loc[known, "itl_kind"]).all()
    for column in [*NUMBERS, *PER_SEQUENCE]:
        left, right = mine[column].to_numpy(float), ref[column].to_numpy(float)
        if column in PER_SEQUENCE:
            # the reference counts llama-bench's prompt batch as sequences
            llama = (mine["engine"] == "llama.cpp").to_numpy()
            factor = mine["source_batch_size"].to_numpy(float)
            scale = {"batch_size": factor, "throughput_tok_s": factor}.get(column, 1 / factor)
            left = np.where(llama, left * scale, left)
        np.testing.assert_allclose(left, right, rtol=1e-6, equal_nan=True, err_msg=column)
    blanked = ref["flags"].fillna("").str.contains("implausibly_short_latency_itl_blanked")
    assert int(blanked.sum()) == 33
    assert mine.loc[blanked, "itl_s"].isna().all() and mine.loc[~blanked, "itl_s"].notna().all()


def test_import_argonne_keeps_or_drops_every_row(argonne, catalog):
    rows, dropped = argonne.rows, argonne.dropped
    assert len(rows) + len(dropped) == 4772 + 48  # data rows of the two files
    keys = ["source_file", "source_row"]
    assert not pd.concat([rows[keys], dropped[keys]]).duplicated().any()
    reasons = dropped["reason"].str.replace(r" \(.*\)$", "", regex=True).value_counts().to_dict()
    assert reasons == {"not an NVIDIA GPU": 2646, "implausibly short latency": 33}
    assert (rows["gpu"] == rows["gpu_source_name"].map(catalog.find_gpu)).all()
    assert set(rows["gpu"]) == {
        "NVIDIA A100 SXM4 40GB",
        "NVIDIA H100 SXM5",
        "NVIDIA GH200 96GB HBM3",
    }
    assert rows.groupby("family").size().to_dict() == {"latency_sweep": 2093, "power_sweep": 48}
    assert rows["mean_power_w"].notna().sum() == 48 and rows["itl_s"].notna().all()


def test_fetch_list_matches_the_reference_layout(reference_tidy):
    for _, relative in fetch_module.DATASETS["argonne"]:
        assert (ARGONNE_RAW / relative).is_file(), relative
    assert fetch_module.import_hint("argonne", Path("x")) == "wattgpu data import argonne x"


# --- CLI -------------------------------------------------------------------------------------


def test_cli_import_argonne(invoke, tmp_path):
    raw = _write_raw(tmp_path / "raw")
    assert "Usage:" in invoke("import", "argonne", "--help").output
    result = invoke("import", "argonne", str(raw))
    assert result.exit_code == 0, result.output
    output = Path("data") / "external" / "argonne.csv"  # in the working directory
    assert f"wrote 6 rows to {output}" in result.output
    output = tmp_path / output
    assert "not an NVIDIA GPU (AMD MI300X GPU)" in result.output
    written = pd.read_csv(output)
    assert set(written["gpu_source_name"]) == {
        "Nvidia A100 GPU",
        "Nvidia H100 GPU",
        "Nvidia GH200 GPU",
    }
    assert (
        len(pd.read_csv(output.with_name("argonne.dropped.csv"))) == 3
    )  # the Mixtral (MoE) row is kept
    single = tmp_path / "out" / "single.csv"
    result = invoke("import", "argonne", str(raw), "--output", str(single), "--single-gpu")
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(single)) == 3 and "multi-GPU (4 GPUs)" in result.output


def test_cli_import_argonne_bad_file(invoke, tmp_path):
    raw = _write_raw(tmp_path / "raw", power="Hardware,Latency\nNvidia A100 GPU,1.0\n")
    result = invoke("import", "argonne", str(raw))
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: Argonne file {POWER_FILE} is not in a known format: lacks column(s) "
        "Num of Hardware, Framework, Model, Input Output Length, Batch Size, avg_power"
    )
