"""The LLM-Pilot importer: TGI closed-loop request logs into one server row per case.

Reads ``results_<model>_gpu<count>_<type>_u<users>.csv`` (optionally ``.xz``) of
github.com/IBM/LLM-performance-prediction (folder
``preprocess_data/performance_characterization_data_raw``, commit 3c66483, measurements
CDLA-Permissive-2.0). One file is one case: one LLM served by
Hugging Face TGI on 1, 2 or 4 GPUs of one type under a closed loop of N users for 120 s; one raw
row is one request. The case becomes one ``server`` row, read as the authors read it (shared
reference README, "Source 3"): answered requests only (``status`` 200); per request, element 1
of ``latency_ms_per_token`` is the TTFT and elements 2 and later are ITL samples (element 0, a
short first event, is not used); per case the median TTFT, the median of all ITL samples, and
throughput = answered output tokens / ``experiment_duration_s``. Power was not measured.
The tails are taken over the same samples as the medians: the p90 and p99 of TTFT over the
answered requests, and of ITL over all gaps pooled across them.

Failed requests are not lost: each case adds one dropped line per kind of failure, with the
number of requests it stands for. A case with no answered request, or with no ITL sample, is
dropped as a whole.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.importers.common import (
    RAW_ROW_ID_COLUMNS,
    ImportResult,
    finish_import,
    read_raw_files,
)
from wattgpu.data.importers.watt_counts import parse_list

LLM_PILOT_SOURCE = "ibm llm-pilot ({family})"
LLM_PILOT_FAMILY = "tgi_closed_loop_2023"
# TGI releases of 2023 (the requests' timestamps are of October-December 2023).
LLM_PILOT_ENGINE_YEAR = 2023
LLM_PILOT_ITL_KIND = "median_gap (all gaps after the first token, all answered requests)"
# The harness (data/clients.csv): a closed loop of N users for 120 s, lengths sampled from the
# authors' production traces, medians of TTFT and of all gaps (serving_dynamics.md, B4).
LLM_PILOT_CLIENT = "llm-pilot"
# The source's GPU types -> the catalogue variant, from the authors' own spec table
# (predict_performance/gpu_features.csv): A10 24 GB PCIe; T4 16 GB PCIe; A100 40 GB, not SXM
# (so PCIe); H100 80 GB SXM at 3,350 GB/s. The bare "A100" alias of the catalogue means the SXM4
# card of other sources, so the mapping is explicit.
LLM_PILOT_GPUS = {
    "A10": "NVIDIA A10",
    "T4": "NVIDIA Tesla T4",
    "A100": "NVIDIA A100 PCIe 40GB",
    "H100": "NVIDIA H100 SXM5",
}
# Names that are not Hugging Face repositories -> the HF id of the same weights.
LLM_PILOT_MODEL_IDS = {"llama-7b": "huggyllama/llama-7b", "llama-13b": "huggyllama/llama-13b"}
LLM_PILOT_COLUMNS = (
    "status",
    "errors",
    "model",
    "num_users",
    "n_gpus",
    "gpu_type",
    "start_timestamp",
    "end_timestamp",
    "experiment_duration_s",
    "n_input_tokens",
    "n_output_tokens",
    "latency_ms_per_token",
)
LLM_PILOT_ID_COLUMNS = (*RAW_ROW_ID_COLUMNS, "num_gpus", "concurrency", "requests")
# Text in a failed request's ``errors`` -> what went wrong, checked in order.
LLM_PILOT_FAILURES = (
    ("CUDA out of memory", "CUDA out of memory"),
    ("context deadline exceeded", "timed out (context deadline exceeded)"),
    ("not found in cache", "TGI lost the batch (Batch ID not found in cache)"),
    ("context canceled", "cancelled by the load generator"),
)
# The name of a results file (one case): results_<model>_gpu<count>_<type>_u<users>.csv[.xz].
LLM_PILOT_FILE = re.compile(r"results_.+_gpu\d+_[a-z0-9]+_u\d+\.csv(\.xz)?")
# The tails written beside the medians, as <metric>_p<q>_s. numpy's default percentile (linear
# interpolation between the closest ranks, Hyndman and Fan's type 7): the source's notebook
# (preprocess_data/Preprocess_data.ipynb) computes medians only (np.nanmedian) and so names no
# percentile definition of its own.
LLM_PILOT_TAILS = (90, 99)


def failure_reason(status: int, errors: str) -> str:
    """The dropped-table reason of one failed request: its status and what went wrong."""
    text = str(errors)
    what = next((kind for needle, kind in LLM_PILOT_FAILURES if needle in text), None)
    if what is None:
        what = "no error message" if text.strip() in ("", "[]", "nan") else "other error"
    return f"request failed (status {int(status)}): {what}"


def _one(frame: pd.DataFrame, column: str) -> Any:
    values = frame[column].dropna().unique()
    if len(values) != 1:
        raise ValueError(f"column {column} must hold one value per file, got {list(values)[:4]}")
    return values[0]


def _case(frame: pd.DataFrame, rel: str) -> dict[str, Any]:
    """The case's identity and its workload (the parts of a row that every line shares)."""
    gpu_type, model = str(_one(frame, "gpu_type")), str(_one(frame, "model"))
    users, gpus = int(_one(frame, "num_users")), int(_one(frame, "n_gpus"))
    start = int(frame["start_timestamp"].min())
    return {
        "source_file": rel,
        "source_row": None,
        "family": LLM_PILOT_FAMILY,
        "task": "closed_loop",
        "gpu": gpu_type,
        "_gpu_lookup": LLM_PILOT_GPUS.get(gpu_type, gpu_type),
        "model_source_name": model,
        "model": LLM_PILOT_MODEL_IDS.get(model, model),
        "engine": "tgi",
        "engine_year": LLM_PILOT_ENGINE_YEAR,
        "scenario": "server",
        "num_gpus": gpus,
        "concurrency": users,
        "measured_at": dt.datetime.fromtimestamp(start / 1000, tz=dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        # not stated; TGI serves 16-bit weights by default, so blank passes the 16-bit filter
        "dtype": None,
        "source": LLM_PILOT_SOURCE.format(family=LLM_PILOT_FAMILY),
        "client": LLM_PILOT_CLIENT,
        "_reason": None,
    }


def _tails(metric: str, samples: list[float]) -> dict[str, float]:
    """``<metric>_p90_s`` and ``<metric>_p99_s`` of the samples (blank where there are none)."""
    if not samples:
        return {f"{metric}_p{q}_s": math.nan for q in LLM_PILOT_TAILS}
    values = np.percentile(samples, LLM_PILOT_TAILS)
    return {f"{metric}_p{q}_s": float(v) for q, v in zip(LLM_PILOT_TAILS, values, strict=True)}


def _statistics(answered: pd.DataFrame, wall_s: float, duration_s: float) -> dict[str, Any]:
    """The case's measured numbers over its answered requests (times in the source are ms)."""
    gaps = [parse_list(text) for text in answered["latency_ms_per_token"]]
    ttft = [g[1] / 1000 for g in gaps if len(g) >= 2]
    itl = [x / 1000 for g in gaps for x in g[2:]]
    tokens = float(answered["n_output_tokens"].sum())
    throughput = tokens / duration_s
    return {
        "itl_s": statistics.median(itl) if itl else math.nan,
        "itl_kind": LLM_PILOT_ITL_KIND if itl else None,
        "itl_mean_s": statistics.fmean(itl) if itl else math.nan,
        "itl_samples": len(itl),
        "ttft_s": statistics.median(ttft) if ttft else math.nan,
        **_tails("ttft", ttft),
        **_tails("itl", itl),
        "request_rate_rps": len(answered) / wall_s,
        "throughput_tok_s": throughput,
        "inv_throughput_s_per_tok": 1 / throughput if throughput > 0 else math.nan,
        "input_tokens": float(answered["n_input_tokens"].mean()),
        "output_tokens": float(answered["n_output_tokens"].mean()),
        "wall_time_s": wall_s,
        "experiment_duration_s": duration_s,
    }


def _read_llm_pilot_file(path: Path, rel: str) -> list[dict[str, Any]]:
    """The case row of one raw file, then one dropped line per kind of failed request."""
    frame = pd.read_csv(path)
    missing = [c for c in LLM_PILOT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"lacks column(s) {', '.join(missing)}")
    if frame.empty:
        raise ValueError("holds no request")
    case = _case(frame, rel)
    ok = frame["status"] == 200
    # the wall time of the case: first request sent to the last event seen (an answer, a failure,
    # or the start of a request that failed without an end time)
    last = max(frame["end_timestamp"].max(), frame["start_timestamp"].max())
    wall_s = (int(last) - int(frame["start_timestamp"].min())) / 1000
    duration_s = float(_one(frame, "experiment_duration_s"))
    row = case | {"requests": len(frame), "completed_requests": int(ok.sum())}
    row |= {"failed_requests": int((~ok).sum())}
    if ok.any():
        row |= _statistics(frame[ok], wall_s, duration_s)
    if not ok.any():
        row["_reason"] = "no request answered"
    elif math.isnan(row["itl_s"]):
        row["_reason"] = "no ITL sample (no answered request streamed a second token)"
    rows = [row]
    failed = frame[~ok]
    reasons = [
        failure_reason(s, e) for s, e in zip(failed["status"], failed["errors"], strict=True)
    ]
    first_column = frame.columns[0]
    failed = failed.assign(_reason=reasons)
    for reason, group in failed.groupby("_reason", sort=True):
        source_row = group[first_column].iloc[0] if first_column.startswith("Unnamed") else None
        rows.append(case | {"_reason": reason, "requests": len(group), "source_row": source_row})
    return rows


def read_llm_pilot(raw_dir: Path) -> pd.DataFrame:
    """Read every LLM-Pilot case under ``raw_dir`` (names as written; failures as extra lines).

    Recognised files, anywhere below ``raw_dir``: ``results_*_gpu<N>_<type>_u<N>.csv[.xz]``.
    ``source_file`` is the path relative to ``raw_dir``. A case line has ``source_row`` blank and
    ``requests`` = all its requests; a failure line (``_reason`` set) has the raw index of the
    first request of that kind in ``source_row`` and their number in ``requests``.

    Raises:
        DataError: ``raw_dir`` is not a folder, holds no results file, or a file is unreadable.

    """

    def read_file(path: Path, rel: str) -> list[dict[str, Any]]:
        return _read_llm_pilot_file(path, rel) if LLM_PILOT_FILE.fullmatch(path.name) else []

    return read_raw_files(
        raw_dir,
        "LLM-Pilot",
        read_file,
        "no LLM-Pilot results file under {raw_dir} (expected "
        "results_<model>_gpu<N>_<type>_u<users>.csv or .csv.xz)",
    )


def import_llm_pilot(raw_dir: Path, catalog: Catalog, *, single_gpu: bool = False) -> ImportResult:
    """Read the LLM-Pilot raw files under ``raw_dir`` and turn them into measurement rows.

    One ``server`` row per (LLM, GPU type, GPU count, users): ``concurrency`` = the users of
    the closed loop; ``request_rate_rps`` = answered requests / wall time of the case (a closed
    loop has no set rate); ``itl_s`` = the median of all ITL samples (``itl_mean_s`` their
    mean); ``ttft_s`` = the median TTFT; ``throughput_tok_s`` = answered output tokens / 120 s;
    ``completed_requests`` and ``failed_requests``; ``mean_power_w`` blank (not measured).

    Args:
        raw_dir: folder holding the raw files (e.g. ``data/external/llm-pilot``).
        catalog: GPU and LLM catalogues the names must resolve through.
        single_gpu: drop rows that ran on more than one GPU (kept by default).

    """
    tidy = read_llm_pilot(raw_dir)
    ids = tidy[list(LLM_PILOT_ID_COLUMNS)].copy()
    ids["source_row"] = pd.to_numeric(ids["source_row"]).astype("Int64")
    provenance = (
        "itl_mean_s",
        "itl_samples",
        "completed_requests",
        "failed_requests",
        "wall_time_s",
        "experiment_duration_s",
        "source_file",
        "family",
        "task",
    )
    for column in provenance:  # absent when no case had an answered request
        if column not in tidy.columns:
            tidy[column] = math.nan
    return finish_import(tidy, ids, catalog, single_gpu=single_gpu, provenance=provenance)
