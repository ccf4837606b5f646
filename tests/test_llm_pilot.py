"""The LLM-Pilot importer and its CLI command, on real raw rows cut down to a few requests.

tests/fixtures/llm_pilot/ holds, under the source's own layout and beside its licence
(LICENSE-DATA.md, CDLA-Permissive-2.0), three raw files of
github.com/IBM/LLM-performance-prediction@3c66483, each reduced to a few of its real lines:

* ``results_EleutherAI__gpt-neox-20b_gpu1_h100_u4.csv``: requests 5, 68, 80, 88 (all answered);
* ``results_llama-7b_gpu2_t4_u8.csv``: requests 0, 7 (a file with two index columns);
* ``results_EleutherAI__gpt-neox-20b_gpu2_a100_u128.csv``: requests 1, 2 (CUDA out of memory,
  status 408), 76, 156 (answered), 538 (status 408, no message), 2450 (status 9999, deadline).

Every expected number below is worked out by hand from those lines (the arithmetic is in the
comments), not by the code under test.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.importers import (
    LLM_PILOT_ITL_KIND,
    ImportResult,
    failure_reason,
    import_llm_pilot,
    read_llm_pilot,
    summarise,
)
from wattgpu.data.measurements import TAIL_COLUMNS, read_measurements
from wattgpu.data.validation import validate_table
from wattgpu.errors import DataError

FIXTURE = Path(__file__).parent / "fixtures" / "llm_pilot"
RAW = "IBM+LLM-performance-prediction@3c66483/preprocess_data/performance_characterization_data_raw"
H100_U4 = f"{RAW}/results_EleutherAI__gpt-neox-20b_gpu1_h100_u4.csv"
T4_U8 = f"{RAW}/results_llama-7b_gpu2_t4_u8.csv"
A100_U128 = f"{RAW}/results_EleutherAI__gpt-neox-20b_gpu2_a100_u128.csv"


@pytest.fixture(scope="module")
def pilot(catalog) -> ImportResult:
    return import_llm_pilot(FIXTURE, catalog)


def _row(result: ImportResult, source_file: str) -> pd.Series:
    rows = result.rows.set_index("source_file")
    return rows.loc[source_file]


def test_the_licence_travels_with_the_fixture():
    text = (FIXTURE / "IBM+LLM-performance-prediction@3c66483" / "LICENSE-DATA.md").read_text()
    assert text.startswith("# Community Data License Agreement - Permissive - Version 2.0")
    shipped = Path(__file__).parents[1] / "data" / "LICENSE-CDLA-Permissive-2.0.txt"
    assert shipped.read_text() == text


def test_h100_case_checked_by_hand(pilot):
    row = _row(pilot, H100_U4)
    assert (row["gpu"], row["gpu_source_name"]) == ("NVIDIA H100 SXM5", "H100")
    assert row["model"] == "EleutherAI/gpt-neox-20b"
    assert (row["scenario"], row["engine"], row["engine_year"]) == ("server", "tgi", 2023)
    assert row["client"] == "llm-pilot"  # its harness: a closed loop of N users, traced lengths
    assert (row["num_gpus"], row["concurrency"]) == (1, 4)
    assert math.isnan(row["mean_power_w"])  # power was not measured
    # latency_ms_per_token of the four requests: [5, 41], [5, 125, 22], [5, 124, 24, 24, 24],
    # [5, 126, 21, 22]. Element 1 is the TTFT, elements 2+ the ITL samples.
    # ITL samples 22, 24, 24, 24, 21, 22 -> sorted 21 22 22 | 24 24 24 -> median (22 + 24) / 2
    assert row["itl_s"] == pytest.approx(0.023)
    assert row["itl_kind"] == LLM_PILOT_ITL_KIND
    # mean (22 + 24 + 24 + 24 + 21 + 22) / 6 = 137 / 6 ms
    assert row["itl_mean_s"] == pytest.approx(137 / 6 / 1000)
    assert row["itl_samples"] == 6
    # TTFT 41, 125, 124, 126 -> sorted 41 124 | 125 126 -> median (124 + 125) / 2 = 124.5 ms
    assert row["ttft_s"] == pytest.approx(0.1245)
    # tails by linear interpolation between closest ranks (numpy's default): the p-th
    # percentile of n sorted samples x0..x(n-1) sits at rank r = p / 100 * (n - 1), between
    # x(floor r) and the next one.
    # TTFT, n = 4 (41 124 125 126): p90 at r = 2.7 -> 125 + 0.7 * (126 - 125) = 125.7 ms;
    # p99 at r = 2.97 -> 125 + 0.97 * 1 = 125.97 ms.
    assert row["ttft_p90_s"] == pytest.approx(0.1257)
    assert row["ttft_p99_s"] == pytest.approx(0.12597)
    # ITL, n = 6 (21 22 22 24 24 24): p90 at r = 4.5 and p99 at r = 4.95 both fall between
    # x4 = 24 and x5 = 24 -> 24 ms; the tail equals the top three samples, above the 23 ms median
    assert row["itl_p90_s"] == pytest.approx(0.024)
    assert row["itl_p99_s"] == pytest.approx(0.024)
    # first start 1697104455215, last end 1697104464976: 9761 ms; 4 answered requests
    assert row["wall_time_s"] == pytest.approx(9.761)
    assert row["request_rate_rps"] == pytest.approx(4 / 9.761)
    # output tokens 1 + 3 + 5 + 4 = 13 over experiment_duration_s 120
    assert row["throughput_tok_s"] == pytest.approx(13 / 120)
    assert row["inv_throughput_s_per_tok"] == pytest.approx(120 / 13)
    # input tokens (18 + 109 + 874 + 96) / 4 = 274.25; output tokens 13 / 4 = 3.25
    assert (row["input_tokens"], row["output_tokens"]) == (274.25, 3.25)
    assert (row["completed_requests"], row["failed_requests"]) == (4, 0)
    assert row["measured_at"] == "2023-10-12T09:54:15Z"  # 1697104455215 ms since the epoch


def test_t4_case_resolves_the_llama_name_and_keeps_two_gpus(pilot):
    row = _row(pilot, T4_U8)
    assert (row["gpu"], row["model"]) == ("NVIDIA Tesla T4", "huggyllama/llama-7b")
    assert row["model_source_name"] == "llama-7b"
    assert (row["num_gpus"], row["concurrency"]) == (2, 8)
    # [24, 580] and [28, 575, 50, 42]: ITL samples 50, 42 -> median = mean = 46 ms
    assert row["itl_s"] == pytest.approx(0.046)
    assert row["itl_mean_s"] == pytest.approx(0.046)
    # TTFT 580, 575 -> median 577.5 ms
    assert row["ttft_s"] == pytest.approx(0.5775)
    # both start at 1697465345565; the last ends at 1697465346261: 696 ms for 2 requests
    assert row["request_rate_rps"] == pytest.approx(2 / 0.696)
    # output tokens 1 + 3 = 4 in 120 s
    assert row["throughput_tok_s"] == pytest.approx(4 / 120)


def test_a100_case_with_failed_requests(pilot):
    row = _row(pilot, A100_U128)
    # the authors' A100 is 40 GB and not SXM (their gpu_features.csv): the PCIe 40GB card
    assert row["gpu"] == "NVIDIA A100 PCIe 40GB"
    assert (row["num_gpus"], row["concurrency"]) == (2, 128)
    # answered: [139, 2085, 98, 81, 95, 95] and [164, 2061, 97, 81]
    # ITL samples 98 81 95 95 97 81 -> sorted 81 81 95 | 95 97 98 -> median 95 ms
    assert row["itl_s"] == pytest.approx(0.095)
    # mean (98 + 81 + 95 + 95 + 97 + 81) / 6 = 547 / 6 ms
    assert row["itl_mean_s"] == pytest.approx(547 / 6 / 1000)
    # TTFT 2085, 2061 -> median 2073 ms
    assert row["ttft_s"] == pytest.approx(2.073)
    # tails (rank r = p / 100 * (n - 1), linear between neighbours, as in the H100 case):
    # TTFT, n = 2 (2061 2085): p90 at r = 0.9 -> 2061 + 0.9 * 24 = 2082.6 ms;
    # p99 at r = 0.99 -> 2061 + 0.99 * 24 = 2084.76 ms
    assert row["ttft_p90_s"] == pytest.approx(2.0826)
    assert row["ttft_p99_s"] == pytest.approx(2.08476)
    # ITL, n = 6 (81 81 95 95 97 98): p90 at r = 4.5 -> 97 + 0.5 * (98 - 97) = 97.5 ms;
    # p99 at r = 4.95 -> 97 + 0.95 * 1 = 97.95 ms (the failed requests' gaps are not pooled)
    assert row["itl_p90_s"] == pytest.approx(0.0975)
    assert row["itl_p99_s"] == pytest.approx(0.09795)
    # first start 1697454826670; last event: request 2450 started at 1697454887925 and failed
    # without an end time (the last end time is 1697454839094): 61255 ms for 2 answered requests
    assert row["wall_time_s"] == pytest.approx(61.255)
    assert row["request_rate_rps"] == pytest.approx(2 / 61.255)
    # output tokens 6 + 4 = 10 in 120 s; inputs (100 + 47) / 2 = 73.5; outputs 10 / 2 = 5
    assert row["throughput_tok_s"] == pytest.approx(10 / 120)
    assert (row["input_tokens"], row["output_tokens"]) == (73.5, 5.0)
    assert (row["completed_requests"], row["failed_requests"]) == (2, 4)


def test_failed_requests_are_reported_not_lost(pilot):
    dropped = pilot.dropped
    assert len(pilot.rows) == 3
    assert set(dropped["source_file"]) == {A100_U128}
    got = dropped.set_index("reason")[["source_row", "requests", "concurrency", "num_gpus"]]
    assert got.to_dict("index") == {
        "request failed (status 408): CUDA out of memory": {
            "source_row": 1,
            "requests": 2,
            "concurrency": 128,
            "num_gpus": 2,
        },
        "request failed (status 408): no error message": {
            "source_row": 538,
            "requests": 1,
            "concurrency": 128,
            "num_gpus": 2,
        },
        "request failed (status 9999): timed out (context deadline exceeded)": {
            "source_row": 2450,
            "requests": 1,
            "concurrency": 128,
            "num_gpus": 2,
        },
    }
    # the failed lines plus the answered requests are all the file's requests
    assert dropped["requests"].sum() + _row(pilot, A100_U128)["completed_requests"] == 6
    assert "request failed (status 408): CUDA out of memory" in summarise(pilot)


def test_failure_reason_kinds():
    assert failure_reason(408, "[]") == "request failed (status 408): no error message"
    assert failure_reason(408, "['Batch ID 7 not found in cache.']") == (
        "request failed (status 408): TGI lost the batch (Batch ID not found in cache)"
    )
    assert failure_reason(500, "['something else']") == "request failed (status 500): other error"


def test_a_case_without_an_answer_is_dropped_whole(tmp_path, catalog):
    # only the two out-of-memory requests of the A100 file
    lines = (FIXTURE / A100_U128).read_text().splitlines(keepends=True)
    path = tmp_path / "results_EleutherAI__gpt-neox-20b_gpu2_a100_u128.csv"
    path.write_text("".join(lines[:3]))
    result = import_llm_pilot(tmp_path, catalog)
    assert result.rows.empty
    assert sorted(result.dropped["reason"]) == [
        "no request answered",
        "request failed (status 408): CUDA out of memory",
    ]
    assert sorted(result.dropped["requests"]) == [2, 2]


def test_single_gpu_drops_the_multi_gpu_cases(catalog):
    result = import_llm_pilot(FIXTURE, catalog, single_gpu=True)
    assert list(result.rows["source_file"]) == [H100_U4]
    assert (result.dropped["reason"] == "multi-GPU (2 GPUs)").sum() == 2


def test_other_files_are_passed_over_and_bad_ones_named(tmp_path):
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match="no LLM-Pilot results file under"):
        read_llm_pilot(tmp_path)
    bad = tmp_path / "results_x_gpu1_h100_u1.csv"
    bad.write_text("status,model\n200,x\n")
    with pytest.raises(DataError, match=r"results_x_gpu1_h100_u1\.csv is not in a known format: "):
        read_llm_pilot(tmp_path)


def test_cli_import_llm_pilot(invoke, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(FIXTURE, raw)
    output = tmp_path / "out" / "llm_pilot.csv"
    result = invoke("import", "llm-pilot", str(raw), "--output", str(output))
    assert result.exit_code == 0, result.output
    assert "wrote 3 rows to" in result.output
    assert "wrote 3 dropped rows and their reasons to" in result.output
    rows = pd.read_csv(output)
    assert rows["concurrency"].tolist() == [4, 128, 8]
    assert rows["mean_power_w"].isna().all()


def test_the_shipped_table_gives_every_case_its_tails_in_order(catalog):
    rows = read_measurements([SHIPPED_DATA_DIR / "measurements" / "llm_pilot.csv"])
    assert len(rows) == 494
    assert rows[list(TAIL_COLUMNS)].notna().all().all()
    assert (rows["ttft_s"] <= rows["ttft_p90_s"]).all()
    assert (rows["ttft_p90_s"] <= rows["ttft_p99_s"]).all()
    assert (rows["itl_s"] <= rows["itl_p90_s"]).all()
    assert (rows["itl_p90_s"] <= rows["itl_p99_s"]).all()
    assert validate_table("measurements", rows, catalog).success
