"""Predictions that need no learning: the paper's load-scaled TDP and the memory roofline."""

from __future__ import annotations

import numpy as np
import pandas as pd

OFFLINE_LOAD = 0.9
SERVER_LOW_LOAD = 0.2
SERVER_HIGH_LOAD = 0.6
SERVER_RATE_THRESHOLD_RPS = 0.2


def load_scaled_tdp(frame: pd.DataFrame) -> np.ndarray:
    """Power = rho x TDP: rho 0.9 offline, 0.2 for a server below 0.2 req/s, 0.6 at or above."""
    rate = frame["request_rate_rps"].astype(float).fillna(0.0)
    server_rho = np.where(rate < SERVER_RATE_THRESHOLD_RPS, SERVER_LOW_LOAD, SERVER_HIGH_LOAD)
    rho = np.where(frame["scenario"] == "offline", OFFLINE_LOAD, server_rho)
    return rho * frame["gpu_tdp_w"].to_numpy(dtype=float)


def roofline_itl(frame: pd.DataFrame) -> np.ndarray:
    """Per-request ITL lower bound, s: time to read the 16-bit weights once, 2 x params / bandwidth.

    One decode step serves every sequence of the batch, so this is not divided by the batch
    (dividing would estimate aggregate time per token, 1 / throughput, a different quantity).
    Tensor-parallel rows read their share of the weights from each GPU at once.
    """
    params = frame["llm_params_b"].to_numpy(dtype=float) * 1e9
    bandwidth = frame["gpu_memory_bandwidth_gb_s"].to_numpy(dtype=float) * 1e9
    gpus = frame["num_gpus"].astype(float).fillna(1.0).clip(lower=1.0).to_numpy()
    return 2.0 * params / (bandwidth * gpus)


def prefill_ttft(frame: pd.DataFrame) -> np.ndarray:
    """TTFT lower bound, s: the prompt's prefill at the FP16 tensor peak, no queueing.

    2 x active params x input tokens / (FP16 FLOP/s x GPUs).
    """
    params = frame["llm_params_b"].to_numpy(dtype=float)
    active = frame["llm_active_params_b"].astype(float).fillna(pd.Series(params, frame.index))
    flops = frame["gpu_fp16_tensor_tflops"].to_numpy(dtype=float) * 1e12
    gpus = frame["num_gpus"].astype(float).fillna(1.0).clip(lower=1.0).to_numpy()
    tokens = frame["input_tokens"].to_numpy(dtype=float)
    return 2.0 * active.to_numpy() * 1e9 * tokens / (flops * gpus)


BASELINES = {
    "power": ("load-scaled-tdp", load_scaled_tdp),
    "itl": ("roofline", roofline_itl),
    "ttft": ("prefill-roofline", prefill_ttft),
}


# --- the practitioner's baseline: the nearest measured GPU (or LLM) ------------------------------

# What makes two measurements "the same workload": a row on another GPU (or of another LLM) with
# equal values in every one of these columns that the frame has (blank equals blank). The source
# and task name the benchmark, so one source's mean output length is never matched with
# another's. A closed loop (``users`` given) is set by its users: its rate is what the GPU
# achieved and its mean prompt length what its sample of the data set held, both outcomes.
WORKLOAD_COLUMNS = (
    "scenario",
    "engine",
    "engine_year",
    "dtype",
    "num_gpus",
    "batch_size",
    "request_rate_rps",
    "users",
    "input_tokens",
    "itl_kind",
    "source",
    "task",
)
OUTCOMES_OF_A_CLOSED_LOOP = ("request_rate_rps", "input_tokens")
# (the item a split holds out, the column that measures nearness) per kind of neighbour.
NEIGHBOUR = {"gpu": ("gpu", "gpu_memory_bandwidth_gb_s"), "llm": ("model", "llm_params_b")}
# The neighbour each split asks: the GPU closest in bandwidth when GPUs are held out (and on CV,
# which holds out (LLM, GPU) pairs), the LLM closest in parameter count when LLMs are, and the
# closest measurement of another source when a source is (``nearest_elsewhere``).
NEAREST_BY_SPLIT = {"CV": "gpu", "LOGO": "gpu", "LOLO": "llm", "LOSO": "elsewhere"}
NEAREST_METHOD = "nearest-measured"
# An ITL read off a neighbour is multiplied by (x_neighbour / x_asked) ** exponent, per kind of
# neighbour and scenario: whichever of "as measured" (0) and "scaled" (1: ITL ~ 1 / bandwidth;
# -1: ITL ~ params) did better on the shipped data (ITL MdAPE on the rows the baseline answers):
# nearest GPU, LOGO offline 38.2 % as measured, 24.3 % scaled -> scaled; LOGO server (LLM-Pilot's
# TGI closed loops) 34.5 % as measured, 46.0 % scaled -> as measured; nearest LLM, LOLO offline
# 7.6 % / 9.5 %, server 32.7 % / 38.5 % -> as measured. Power is read off as measured.
NEAREST_ITL_EXPONENT = {
    ("gpu", "offline"): 1.0,
    ("gpu", "server"): 0.0,
    ("llm", "offline"): 0.0,
    ("llm", "server"): 0.0,
}


def nearest_measured(
    train: pd.DataFrame,
    test: pd.DataFrame,
    column: str,
    neighbour: str,
    *,
    exponent: float | np.ndarray = 0.0,
) -> np.ndarray:
    """Each test row answered by the same workload's measurement on its nearest measured neighbour.

    The practitioner's answer for a GPU (LLM) nobody measured: take the training GPU closest in
    memory bandwidth (the LLM closest in parameter count) that ran the same LLM (on the same GPU)
    under the same workload (``WORKLOAD_COLUMNS``), and read off its mean ``column``. Nearness
    is ``|log(x / x_asked)|`` (twice as fast and half as fast are as far); neighbours at equal
    distance are averaged. The answer is multiplied by ``(x_neighbour / x_asked) ** exponent``
    (``NEAREST_ITL_EXPONENT``: an ITL scales about as 1 / bandwidth).

    Args:
        train: measured rows with ``column``, the catalogue columns and the workload columns.
        test: the rows to answer (their own measurements are never read).
        column: the measured column to read off (``mean_power_w``, ``itl_s``).
        neighbour: ``gpu`` (nearest GPU by bandwidth) or ``llm`` (nearest LLM by parameters).
        exponent: the power of the nearness ratio that scales the answer (0: as measured), one
            for all rows or one per test row.

    Returns:
        One answer per test row, NaN where no training row shares its workload.

    """
    item, near = NEIGHBOUR[neighbour]
    fixed = "gpu" if item == "model" else "model"
    keys = [fixed, *(c for c in WORKLOAD_COLUMNS if c in train.columns and c in test.columns)]
    measured = train[train[column].astype(float).notna()]
    means = (
        measured.assign(_key=_key(measured, keys))
        .groupby(["_key", item], observed=True)
        .agg(_value=(column, "mean"), _near=(near, "first"))
        .reset_index()
    )
    asked = pd.DataFrame(
        {
            "_row": np.arange(len(test)),
            "_key": _key(test, keys).to_numpy(),
            "_item": test[item].to_numpy(dtype=object).astype(str),
            "_asked": test[near].to_numpy(dtype=float),
        }
    )
    pairs = asked.merge(means, on="_key")
    pairs = pairs[pairs[item].astype(str) != pairs["_item"]]
    closest = _closest(pairs, _log_distance(pairs["_near"], pairs["_asked"]))
    powers = np.broadcast_to(np.asarray(exponent, dtype=float), (len(test),))
    factor = (closest["_near"] / closest["_asked"]) ** powers[closest["_row"].to_numpy()]
    answers = (closest["_value"] * factor).groupby(closest["_row"]).mean()
    out = np.full(len(test), np.nan)
    out[answers.index.to_numpy()] = answers.to_numpy()
    return out


def nearest_elsewhere(train: pd.DataFrame, test: pd.DataFrame, column: str) -> np.ndarray:
    """Each test row answered by the training measurement closest to it, whatever its source.

    The practitioner's answer for a set-up nobody measured (leave one source out: no training
    row shares the held-out source's engine, method or benchmark, so no workload matches
    exactly). Among the training rows that measured ``column`` under the same scenario, in
    order, each step keeping the closest of the rows the step before kept:

    1. the LLM: the same LLM if the training side has it, else the LLM nearest in
       ``|log(params / params_asked)|``;
    2. the GPU nearest in memory bandwidth (``|log|`` again; the nearest-GPU rule of
       ``nearest_measured``);
    3. the load nearest in ``|log(concurrency / concurrency_asked)|``: the features'
       ``concurrency`` (an offline batch, the engine's cap when blank; a closed loop's users; an
       open server's sequences by Little's law under the prior), else ``users`` or
       ``batch_size``;
    4. the tokens nearest in ``|log(in / in_asked)| + |log(out / out_asked)|``.

    Rows at equal distance are averaged; read off as measured. A blank equals a blank and is
    farthest from a number.

    Returns:
        One answer per test row, NaN where no training row has its scenario.

    """
    measured = train[train[column].astype(float).notna()]
    known = pd.DataFrame(
        {
            "scenario": measured["scenario"].astype(str).to_numpy(),
            "_model": measured["model"].astype(str).to_numpy(),
            "_params": measured["llm_params_b"].to_numpy(dtype=float),
            "_gpu": measured["gpu"].astype(str).to_numpy(),
            "_bandwidth": measured["gpu_memory_bandwidth_gb_s"].to_numpy(dtype=float),
            "_load": _load(measured),
            "_in": measured["input_tokens"].to_numpy(dtype=float),
            "_out": measured["output_tokens"].to_numpy(dtype=float),
            "_value": measured[column].to_numpy(dtype=float),
        }
    )
    pairs = pd.DataFrame(
        {
            "_row": np.arange(len(test)),
            "scenario": test["scenario"].astype(str).to_numpy(),
            "_model_asked": test["model"].astype(str).to_numpy(),
            "_params_asked": test["llm_params_b"].to_numpy(dtype=float),
            "_bandwidth_asked": test["gpu_memory_bandwidth_gb_s"].to_numpy(dtype=float),
            "_load_asked": _load(test),
            "_in_asked": test["input_tokens"].to_numpy(dtype=float),
            "_out_asked": test["output_tokens"].to_numpy(dtype=float),
        }
    )
    steps = (
        (["_model", "_params"], lambda p: _llm_distance(p)),
        (["_gpu", "_bandwidth"], lambda p: _log_distance(p["_bandwidth"], p["_bandwidth_asked"])),
        (["_load"], lambda p: _log_distance(p["_load"], p["_load_asked"])),
        (
            ["_in", "_out", "_value"],
            lambda p: (
                _log_distance(p["_in"], p["_in_asked"]) + _log_distance(p["_out"], p["_out_asked"])
            ),
        ),
    )
    keys = ["scenario"]
    for columns, distance in steps:
        step = known[[*keys, *columns]].drop_duplicates()
        pairs = pairs.merge(step, on=keys)
        pairs = _closest(pairs, distance(pairs))
        keys = [*keys, *(c for c in columns if c != "_value")]
    answers = pairs.groupby("_row")["_value"].mean()
    out = np.full(len(test), np.nan)
    out[answers.index.to_numpy()] = answers.to_numpy()
    return out


def _load(frame: pd.DataFrame) -> np.ndarray:
    """The load ``nearest_elsewhere`` compares: ``concurrency``, else ``users``, else batch."""
    for name in ("concurrency", "users", "batch_size"):
        if name in frame.columns:
            return frame[name].to_numpy(dtype=float)
    return np.full(len(frame), np.nan)


def _llm_distance(pairs: pd.DataFrame) -> np.ndarray:
    """The same LLM nearest of all (-1), else ``|log(params / params_asked)|``."""
    same = (pairs["_model"] == pairs["_model_asked"]).to_numpy()
    return np.where(same, -1.0, _log_distance(pairs["_params"], pairs["_params_asked"]))


def _log_distance(near: pd.Series, asked: pd.Series) -> np.ndarray:
    """``|log(near / asked)|``: 0 between two blanks, infinite between a blank and a number."""
    near, asked = np.asarray(near, dtype=float), np.asarray(asked, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.abs(np.log(near / asked))
    blank = np.isnan(near) | np.isnan(asked)
    return np.where(blank, np.where(np.isnan(near) & np.isnan(asked), 0.0, np.inf), distance)


def _closest(pairs: pd.DataFrame, distance: np.ndarray) -> pd.DataFrame:
    """The pairs at the least ``distance`` from their asked row (``_row``); ties all kept."""
    pairs = pairs.assign(_distance=np.round(distance, 12))
    least = pairs.groupby("_row")["_distance"].transform("min")
    return pairs[pairs["_distance"] == least].drop(columns="_distance")


def _key(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One hash per row of ``columns``' values (blank equals blank), alike in any two slices.

    A closed loop's ``OUTCOMES_OF_A_CLOSED_LOOP`` count as blank. Hashed column by column by
    pandas (``hash_pandas_object``), not joined as text: the same rows, a tenth of the time.
    """
    closed = (
        frame["users"].notna().to_numpy()
        if "users" in frame.columns
        else np.zeros(len(frame), dtype=bool)
    )
    values = pd.DataFrame(
        {
            c: frame[c].where(~closed) if c in OUTCOMES_OF_A_CLOSED_LOOP else frame[c]
            for c in columns
        },
        index=frame.index,
    )
    return pd.util.hash_pandas_object(values, index=False)
