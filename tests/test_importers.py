"""Importers of public data sets: Watt Counts, ML.ENERGY; their CLI; the offline fetch message."""

from __future__ import annotations

import math
import re
import shutil
import socket
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data import fetch as fetch_module
from wattgpu.data.clients import CLIENTS_FILE, LENGTHS_FILE
from wattgpu.data.importers import (
    AIC_CLIENT,
    AIC_FAMILY,
    ARGONNE_CLIENT,
    LLM_PILOT_CLIENT,
    MLENERGY_2023_MODEL_IDS,
    MLENERGY_CLIENTS,
    ImportResult,
    import_mlenergy,
    import_watt_counts,
    parse_list,
    read_mlenergy,
    read_watt_counts,
    summarise,
)
from wattgpu.data.measurements import read_measurements
from wattgpu.data.validation import validate_table
from wattgpu.errors import DataError

# Exactly the layout of data/watt_counts_subset.csv (maufadel/wattgpu): an unnamed index column,
# lists stored as text, a blank lambda_qps for offline runs (whose TTFT list is empty and whose
# latency list holds one value). Row 3 writes a list the way numpy prints it.
WATT_COUNTS_CSV = """\
,model,gpu_type,lambda_qps,generation_tokens_total,measurement_duration,gpu_energy,\
gpu_0_power_draw_watts_mean,gpu_0_power_draw_watts_min,gpu_0_power_draw_watts_max,\
gpu_0_power_draw_watts_std,time_to_first_token_seconds_events,\
e2e_request_latency_seconds_events,request_generation_tokens,request_prompt_tokens
0,meta-llama/Llama-3.1-8B-Instruct,NVIDIA H200,0.33,28,56.0,5600.0,100.0,60.0,150.0,10.0,\
"[0.5, 0.1, 0.3]","[2.0, 1.1, 0.3]","[16, 11, 1]","[100, 200, 300]"
3,Qwen/Qwen2.5-7B-Instruct,NVIDIA A100-SXM4-40GB,,400,40.0,12000.0,300.0,80.0,390.0,20.0,\
[],[40.0],[300. 100.],"[50, 150]"
5,Qwen/Qwen1.5-MoE-A2.7B-Chat,NVIDIA L4,0.017,20,10.0,500.0,50.0,20.0,70.0,5.0,\
[0.2],[2.0],[20],[10]
7,meta-llama/Llama-3.1-8B-Instruct,NVIDIA Quadro P1000,,100,10.0,400.0,40.0,10.0,47.0,5.0,\
[],[10.0],"[50, 50]","[10, 10]"
8,meta-llama/Llama-3.1-8B-Instruct,Tesla T4,,100,10.0,20000.0,2000.0,10.0,2100.0,5.0,\
[],[10.0],"[50, 50]","[10, 10]"
9,example-org/never-released-7b,NVIDIA L4,,100,10.0,400.0,40.0,10.0,70.0,5.0,\
[],[10.0],"[50, 50]","[10, 10]"
10,meta-llama/Llama-3.1-8B-Instruct,NVIDIA L4,0.33,0,10.0,400.0,40.0,10.0,70.0,5.0,\
[],[],[],[]
"""


@pytest.fixture(scope="module")
def watt_counts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wc") / "watt_counts_subset.csv"
    path.write_text(WATT_COUNTS_CSV, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def watt_counts(watt_counts_file, catalog) -> ImportResult:
    return import_watt_counts(read_watt_counts(watt_counts_file), catalog)


def test_parse_list_reads_python_and_numpy_lists():
    assert parse_list("[1.5, 2]") == [1.5, 2.0]
    assert parse_list("[1.5 2. 3.]") == [1.5, 2.0, 3.0]
    assert parse_list("[]") == []
    assert parse_list(float("nan")) == []
    with pytest.raises(ValueError):
        parse_list("1.5")


def test_watt_counts_server_row(watt_counts):
    row = watt_counts.rows.set_index("source_row").loc[0]
    # Watt Counts' "NVIDIA H200" is the H200 NVL (gpu_features.csv: gpu_db_name "H200 NVL"),
    # not the SXM that nvidia-smi's name means in our catalogue.
    assert row["gpu"] == "NVIDIA H200 NVL"
    assert row["gpu_source_name"] == "NVIDIA H200"
    assert row["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert row["scenario"] == "server"
    assert row["request_rate_rps"] == 0.33
    # requests (e2e 2.0, ttft 0.5, 16 tokens) and (e2e 1.1, ttft 0.1, 11 tokens); the third has
    # one token, so no gap: ((2.0-0.5)/15 + (1.1-0.1)/10) / 2 = (0.1 + 0.1) / 2 = 0.1 s
    assert row["itl_s"] == pytest.approx(0.1, rel=1e-12)
    assert row["itl_kind"] == "mean over requests of (e2e-ttft)/(tokens-1)"
    assert row["ttft_s"] == pytest.approx((0.5 + 0.1 + 0.3) / 3)  # 0.3 s
    assert row["output_tokens"] == pytest.approx(28 / 3)
    assert row["input_tokens"] == pytest.approx(200.0)
    assert row["inv_throughput_s_per_tok"] == pytest.approx(56.0 / 28)  # 2.0 s/token
    assert row["throughput_tok_s"] == pytest.approx(0.5)
    assert row["energy_per_token_j"] == pytest.approx(5600.0 / 28)  # 200 J/token
    assert row["mean_power_w"] == 100.0
    assert (row["engine"], row["dtype"], row["num_gpus"]) == ("vllm", "bfloat16", 1.0)
    assert row["source"] == "watt-counts (maufadel/wattgpu)"


def test_watt_counts_offline_row(watt_counts):
    row = watt_counts.rows.set_index("source_row").loc[3]
    assert row["gpu"] == "NVIDIA A100 SXM4 40GB"
    assert row["scenario"] == "offline"
    assert math.isnan(row["request_rate_rps"])
    assert math.isnan(row["batch_size"])  # the engine chose
    # no per-request TTFT in an offline run: no per-request ITL, only the paper's offline "ITL"
    assert math.isnan(row["itl_s"]) and pd.isna(row["itl_kind"])
    assert row["inv_throughput_s_per_tok"] == pytest.approx(40.0 / 400)  # 0.1 s/token
    assert row["energy_per_token_j"] == pytest.approx(12000.0 / 400)  # 30 J/token
    assert row["output_tokens"] == pytest.approx((300 + 100) / 2)  # numpy-style list
    assert row["input_tokens"] == pytest.approx((50 + 150) / 2)
    assert row["mean_power_w"] == 300.0


def test_watt_counts_drop_reasons(watt_counts):
    assert sorted(watt_counts.rows["source_row"]) == [0, 3]
    reasons = dict(
        zip(watt_counts.dropped["source_row"], watt_counts.dropped["reason"], strict=True)
    )
    assert reasons == {
        5: "MoE (weight format not recorded)",
        7: "GPU name does not resolve: 'NVIDIA Quadro P1000'",
        # 2000 W on a 70 W T4: power / TDP far above the suite's 1.5
        8: "fails validation: expect_column_values_to_be_between(power_over_tdp)",
        9: "LLM does not resolve: 'example-org/never-released-7b'",
        10: "no generated tokens",
    }
    assert list(watt_counts.dropped.columns) == [
        "source_row",
        "model",
        "gpu_type",
        "lambda_qps",
        "reason",
    ]


def test_watt_counts_summary(watt_counts):
    text = summarise(watt_counts)
    assert re.search(r"^rows kept +2$", text, re.M)
    assert re.search(r"^  multi-GPU \(per-GPU power\) +0$", text, re.M)
    assert re.search(r"^rows dropped +5$", text, re.M)
    assert re.search(
        r"^  MoE \(weight format not recorded\) +1  e\.g\. Qwen/Qwen1\.5-MoE-A2\.7B-Chat$",
        text,
        re.M,
    )


def test_watt_counts_missing_column(catalog):
    frame = pd.read_csv(pd.io.common.StringIO(WATT_COUNTS_CSV), index_col=0)
    with pytest.raises(DataError, match=r"lacks column\(s\) gpu_energy"):
        import_watt_counts(frame.drop(columns="gpu_energy"), catalog)


# --- ML.ENERGY -------------------------------------------------------------------------------

TEXT = ["gpu", "model", "model_source_name", "family", "task", "engine", "scenario", "itl_kind"]
NUMBERS = [
    "mean_power_w",
    "itl_s",
    "energy_per_token_j",
    "throughput_tok_s",
    "inv_throughput_s_per_tok",
    "batch_size",
    "request_rate_rps",
    "num_gpus",
    "output_tokens",
]
KEY = ["source_file", "gpu", "model_source_name", "batch_size", "num_gpus", "request_rate_rps"]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    # mean_power_w breaks the ties of the few configurations a V3 file lists twice
    return frame.sort_values([*KEY, "mean_power_w"], na_position="first").reset_index(drop=True)


def _assert_same(mine: pd.DataFrame, reference: pd.DataFrame) -> None:
    for column in ["source_file", *TEXT, "dtype"]:
        left = mine[column].astype(object).where(mine[column].notna(), "")
        right = reference[column].astype(object).where(reference[column].notna(), "")
        assert (left == right).all(), (column, left[left != right].head(3).tolist())
    for column in NUMBERS:
        left = pd.to_numeric(mine[column], errors="coerce").to_numpy(float)
        right = reference[column].to_numpy(float)
        np.testing.assert_allclose(left, right, rtol=1e-6, equal_nan=True, err_msg=column)


@pytest.fixture(scope="module")
def mlenergy_raw(reference) -> Path:
    """The ML.ENERGY raw files of ../shared/reference (a skip without it, outside CI)."""
    return reference / "mlenergy" / "raw"


@pytest.fixture(scope="module")
def reference_tidy(reference) -> pd.DataFrame:
    return pd.read_csv(reference / "mlenergy" / "measurements.csv")


@pytest.fixture(scope="module")
def mlenergy(catalog, mlenergy_raw) -> ImportResult:
    return import_mlenergy(mlenergy_raw, catalog)


def test_read_mlenergy_reproduces_the_reference_table(reference_tidy, mlenergy_raw):
    mine = read_mlenergy(mlenergy_raw)
    assert len(mine) == len(reference_tidy) == 1618
    _assert_same(_sorted(mine), _sorted(reference_tidy))


def test_import_mlenergy_keeps_or_drops_every_reference_row(
    mlenergy, reference_tidy, catalog, mlenergy_raw
):
    rows, dropped = mlenergy.rows, mlenergy.dropped
    assert len(rows) + len(dropped) == len(reference_tidy)
    keys = ["source_file", "source_row"]
    assert not pd.concat([rows[keys], dropped[keys]]).duplicated().any()
    # kept rows: canonical names, and the numbers of the table checked above
    assert (rows["gpu"] == rows["gpu_source_name"].map(catalog.find_gpu)).all()
    hf_ids = rows["model_source_name"].map(lambda n: MLENERGY_2023_MODEL_IDS.get(n, n))
    assert (rows["model"] == hf_ids.map(catalog.find_llm)).all()
    tidy = read_mlenergy(mlenergy_raw).set_index(keys)
    kept = rows.set_index(keys)
    expected = tidy.loc[kept.index]
    assert (kept["gpu_source_name"].to_numpy() == expected["gpu"].to_numpy()).all()
    for column in NUMBERS:
        np.testing.assert_allclose(
            kept[column].to_numpy(float),
            expected[column].to_numpy(float),
            rtol=1e-6,
            equal_nan=True,
        )
    # every MoE and every FP8 / MXFP4 row of the reference is kept, with its weight format
    flags = reference_tidy["flags"].fillna("")
    moe_rows = reference_tidy.loc[flags.str.contains("moe"), "source_file"].value_counts()
    kept_rows = rows["source_file"].value_counts()
    assert (kept_rows.reindex(moe_rows.index) == moe_rows).all()
    assert dict(rows["dtype"].value_counts()) == dict(reference_tidy["dtype"].value_counts())
    assert {"fp8", "mxfp4"} <= set(rows["dtype"].dropna())
    llms = catalog.llms
    moe = rows["model"].map(llms["active_params_b"]) < rows["model"].map(llms["params_b"])
    assert int(moe.sum()) == 363  # the count of ML.ENERGY MoE rows (H100, B200, A100)
    assert dropped.empty
    assert (rows["num_gpus"] > 1).sum() > 0  # multi-GPU rows are kept by default


def _row(result: ImportResult, source_file: str, **where: object) -> pd.Series:
    rows = result.rows[result.rows["source_file"] == source_file]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    assert len(rows) == 1, (source_file, where)
    return rows.iloc[0]


def test_mlenergy_rows_checked_by_hand(mlenergy):
    legacy = _row(
        mlenergy,
        "ml-energy+leaderboard-v2@c3af7f3/data/legacy/A100_chat_benchmark.csv",
        model_source_name="BAIR/koala-13b",
    )
    # CSV: response_length 265.5732034922767 tokens, latency 12.1433556952537 s,
    # energy 2144.8338435191445 J per response; power = energy / latency
    assert legacy["mean_power_w"] == pytest.approx(2144.8338435191445 / 12.1433556952537)
    assert legacy["itl_s"] == pytest.approx(12.1433556952537 / 265.5732034922767)
    assert legacy["energy_per_token_j"] == pytest.approx(2144.8338435191445 / 265.5732034922767)
    assert legacy["model"] == "TheBloke/koala-13B-HF"  # BAIR/koala-13b is no HF repository
    assert legacy["gpu_source_name"] == "A100" and legacy["batch_size"] == 1

    batch = _row(
        mlenergy,
        "ml-energy+leaderboard-v2@d51f433/data/A40_chat_benchmark.csv",
        model_source_name="lmsys/vicuna-7B",
        batch_size=4.0,
    )
    # batch 4: latency 25.87752078999064 s per batch, energy 905.0992419354778 J per request,
    # 178.72412634408602 tokens per request; no per-request ITL at batch > 1
    assert batch["mean_power_w"] == pytest.approx(905.0992419354778 * 4 / 25.87752078999064)
    assert batch["throughput_tok_s"] == pytest.approx(4 * 178.72412634408602 / 25.87752078999064)
    assert math.isnan(batch["itl_s"])

    server = _row(
        mlenergy,
        "ml-energy+leaderboard@2819ae1/data/llm/chat/A100-SXM4-40GB/TGI/google/gemma-1.1-2b-it/rate1.00.json",
    )
    # 163.45297 J per request x 0.98278 requests/s on one GPU
    assert server["mean_power_w"] == pytest.approx(163.45297000000068 * 0.9827805658933344)
    assert (server["scenario"], server["request_rate_rps"], server["engine"]) == (
        "server",
        1,
        "tgi",
    )
    assert math.isnan(server["itl_s"])

    v2 = _row(
        mlenergy,
        "ml-energy+leaderboard-v2@c3af7f3/data/llm_text_generation/chat/A100-SXM4-40GB/google/gemma-2-27b-it/bs128+tp4+pp1.json",
    )
    per_token = 230.644433524673 / 392.47133333333335
    assert v2["energy_per_token_j"] == pytest.approx(per_token)
    assert v2["mean_power_w"] == pytest.approx(per_token * 1051.3354539260472 / 4)  # per GPU
    assert v2["itl_s"] == pytest.approx(0.11220224938943191)
    assert (v2["num_gpus"], v2["batch_size"]) == (4, 128)

    v3 = _row(
        mlenergy,
        "ml-energy+leaderboard@0cd52da/public/data/models/Qwen__Qwen3-8B__gpqa.json",
        source_row=0,
    )
    # first configuration: B200, 1 GPU, max_num_seqs 8, 293.91 W, median ITL 32.50 ms
    assert v3["gpu"] == "NVIDIA B200"
    assert v3["mean_power_w"] == pytest.approx(293.91033781272114)
    assert v3["itl_s"] == pytest.approx(0.03249889700964559)
    assert v3["itl_kind"] == "median client-side ITL (chunk-smoothed)"
    assert v3["batch_size"] == 8
    # each generation's harness (serving_dynamics.md B1, B2; the reference README's Source 1)
    clients = [row["client"] for row in (legacy, batch, server, v2, v3)]
    assert clients == ["mlenergy-hf", "mlenergy-hf", "mlenergy-v1", "mlenergy-v2", "mlenergy-v3"]


def _copy_raw(raw: Path, dest: Path, *relative: str) -> Path:
    for rel in relative:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(raw / rel, dest / rel)
    return dest


V2_DIR = "ml-energy+leaderboard-v2@c3af7f3/data/llm_text_generation/chat/A100-SXM4-40GB"
SMALL_MLENERGY = (
    f"{V2_DIR}/google/gemma-2-9b-it/bs32+tp1+pp1.json",
    f"{V2_DIR}/google/gemma-2-9b-it/bs32+tp2+pp1.json",
    # metadata, not a measurement: passed over
    "ml-energy+leaderboard-v2@c3af7f3/data/llm_text_generation/chat/models.json",
)


def test_single_gpu_drops_multi_gpu_rows(tmp_path, catalog, mlenergy_raw):
    raw = _copy_raw(mlenergy_raw, tmp_path, *SMALL_MLENERGY)
    result = import_mlenergy(raw, catalog, single_gpu=True)
    assert result.rows["num_gpus"].tolist() == [1]
    assert result.dropped["reason"].tolist() == ["multi-GPU (2 GPUs)"]
    assert "multi-GPU (2 GPUs)" in summarise(result)


def test_mlenergy_folder_without_measurements(tmp_path, catalog):
    with pytest.raises(DataError, match="no ML.ENERGY measurement file under"):
        import_mlenergy(tmp_path, catalog)


def test_fetch_list_matches_the_reference_layout(mlenergy_raw):
    # fetched files land where the reference copy has them, so both import the same way
    for _, relative in fetch_module.DATASETS["mlenergy"]:
        assert (mlenergy_raw / relative).is_file(), relative


# --- CLI and fetch ---------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_every_new_command_has_help(invoke):
    for args in (
        ["import"],
        ["import", "watt-counts"],
        ["import", "mlenergy"],
        ["import", "argonne"],
        ["import", "length-distributions"],
        ["fetch"],
    ):
        result = invoke(*args, "--help")
        assert result.exit_code == 0, result.output
        assert "Usage:" in result.output


def test_cli_import_watt_counts_default_output(invoke, watt_counts_file, tmp_path):
    result = invoke("import", "watt-counts", str(watt_counts_file))
    assert result.exit_code == 0, result.output
    output = Path("data") / "external" / "watt-counts.csv"  # in the working directory
    assert f"wrote 2 rows to {output}" in result.output
    output = tmp_path / output
    assert "GPU name does not resolve: 'NVIDIA Quadro P1000'" in result.output
    written = pd.read_csv(output)
    assert written["gpu"].tolist() == ["NVIDIA H200 NVL", "NVIDIA A100 SXM4 40GB"]
    assert len(pd.read_csv(output.with_name("watt-counts.dropped.csv"))) == 5


def test_cli_import_single_gpu_and_output(invoke, tmp_path, mlenergy_raw):
    raw = _copy_raw(mlenergy_raw, tmp_path / "raw", *SMALL_MLENERGY)
    output = tmp_path / "out" / "ml.csv"
    result = invoke("import", "mlenergy", str(raw), "--output", str(output), "--single-gpu")
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(output)) == 1
    assert "multi-GPU (2 GPUs)" in result.output


def test_cli_import_nothing_usable(invoke, tmp_path):
    path = tmp_path / "moe_only.csv"
    lines = WATT_COUNTS_CSV.splitlines()
    path.write_text("\n".join([lines[0], *[line for line in lines if line.startswith("5,")]]))
    result = invoke("import", "watt-counts", str(path))
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"Error: no usable rows in {path}: all 1 were dropped (reasons above); nothing written"
    )
    assert not (tmp_path / "data" / "external").exists()


def test_cli_import_bad_files(invoke, tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("model,gpu\nx,y\n")
    result = invoke("import", "watt-counts", str(path))
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: Watt Counts table lacks column(s) gpu_type, lambda_qps, generation_tokens_total"
    )
    assert len(result.output.strip().splitlines()) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    result = invoke("import", "mlenergy", str(empty))
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: no ML.ENERGY measurement file under {empty} (expected *_benchmark.csv, "
        "rate*.json, bs*+tp*+pp*.json or public/data/models/*.json)"
    )


def test_cli_fetch_offline(invoke, tmp_path, monkeypatch):
    url = f"http://127.0.0.1:{_closed_port()}/watt_counts_subset.csv"
    monkeypatch.setitem(fetch_module.DATASETS, "watt-counts", [(url, "watt_counts_subset.csv")])
    dest = tmp_path / "wc"
    result = invoke("fetch", "watt-counts", "--dest", str(dest), "--timeout", "2")
    assert result.exit_code == 1
    target = dest / "watt_counts_subset.csv"
    assert re.fullmatch(
        re.escape("Error: cannot reach 127.0.0.1: this machine is offline (")
        + r"[^)]+"
        + re.escape(
            f"); download {url} into {target} by hand and run "
            f"`wattgpu data import watt-counts {target}`"
        ),
        result.output.strip(),
    ), result.output
    assert not dest.exists()  # nothing half-written


def test_fetch_unknown_dataset():
    with pytest.raises(DataError, match="unknown data set 'nonesuch'; expected one of watt-counts"):
        fetch_module.fetch("nonesuch")


# --- the shipped tables --------------------------------------------------------------------------

# shipped file stem -> (the import command, the reference folder of its raw files)
SHIPPED_TABLES = {
    "mlenergy": ("mlenergy", "mlenergy"),
    "argonne": ("argonne", "argonne_llm_inference_bench"),
    "llm_pilot": ("llm-pilot", "ibm_llm_pilot"),
    "aiconfigurator": ("aiconfigurator", "aiconfigurator"),
}


@pytest.mark.parametrize("stem", sorted(SHIPPED_TABLES))
def test_shipped_measurements_are_the_importers_output_byte_for_byte(
    stem, reference, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WATTGPU_DATA_DIR", raising=False)
    output = tmp_path / f"{stem}.csv"
    command, folder = SHIPPED_TABLES[stem]
    raw = reference / folder / "raw"
    result = CliRunner().invoke(cli, ["data", "import", command, str(raw), "--output", str(output)])
    assert result.exit_code == 0, result.output
    shipped = SHIPPED_DATA_DIR / "measurements"
    assert output.read_bytes() == (shipped / f"{stem}.csv").read_bytes()
    dropped = output.with_name(f"{stem}.dropped.csv")
    assert dropped.read_bytes() == (shipped / f"{stem}.dropped.csv").read_bytes()


@pytest.mark.parametrize("stem", sorted(SHIPPED_TABLES))
def test_every_shipped_row_names_its_harness(stem):
    # one client per source generation, as the importers write it (data/clients.csv)
    expected = {
        **MLENERGY_CLIENTS,
        "latency_sweep": ARGONNE_CLIENT,
        "power_sweep": ARGONNE_CLIENT,
        "tgi_closed_loop_2023": LLM_PILOT_CLIENT,
        AIC_FAMILY: AIC_CLIENT,
    }
    rows = pd.read_csv(SHIPPED_DATA_DIR / "measurements" / f"{stem}.csv", low_memory=False)
    assert rows["client"].notna().all()
    assert (rows["client"] == rows["family"].map(expected)).all()
    assert set(rows["client"]) <= set(pd.read_csv(SHIPPED_DATA_DIR / CLIENTS_FILE)["client"])


def test_shipped_length_distributions_are_the_importers_output_byte_for_byte(
    reference, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    output = tmp_path / "lengths.csv"
    result = CliRunner().invoke(
        cli, ["data", "import", "length-distributions", str(reference), "--output", str(output)]
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"wrote 84 rows to {output}"
    assert output.read_bytes() == (SHIPPED_DATA_DIR / LENGTHS_FILE).read_bytes()


def test_length_distributions_need_both_sources(invoke, tmp_path):
    result = invoke("import", "length-distributions", str(tmp_path))
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: no LLM-Pilot results file under {tmp_path} (expected "
        "results_<model>_gpu<N>_<type>_u<users>.csv or .csv.xz)"
    )
    assert not (tmp_path / "data" / "external" / LENGTHS_FILE).exists()


def test_a_measurement_file_without_a_client_loads(tmp_path, catalog):
    # a user's own file predates clients: its rows get the client their load implies
    path = tmp_path / "mine.csv"
    pd.DataFrame(
        {
            "gpu": ["NVIDIA H100 SXM5", "NVIDIA H100 SXM5"],
            "model": ["meta-llama/Llama-3.1-8B-Instruct"] * 2,
            "scenario": ["offline", "server"],
            "batch_size": [16, None],
            "request_rate_rps": [None, 2.0],
            "mean_power_w": [600.0, 350.0],
            "itl_s": [0.02, 0.012],
        }
    ).to_csv(path, index=False)
    rows = read_measurements([path])
    assert rows["client"].isna().all()
    assert validate_table("measurements", rows, catalog).success
