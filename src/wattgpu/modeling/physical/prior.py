"""The analytical prior fitted on training rows only, for evaluation on held-out GPUs and LLMs.

The shipped constants (``physics.DEFAULT_CONSTANTS``) were fitted to every real row, the held-out
GPU's included, and its only server rows set ``server_power_factor``. An honest held-out figure
refits them on the training rows of each fold (``refit_prior``) and recomputes the prior columns
of both sides with the result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd

from wattgpu.modeling.physical.physics import (
    DEFAULT_CONSTANTS,
    DEFAULT_TTFT_TERMS,
    MAX_ENGINE_EFFECT,
    MAX_YEAR_EFFECT,
    NO_ENGINE_EFFECTS,
    NO_TTFT_TERMS,
    EngineEffects,
    PhysicalConstants,
    TtftTerms,
)
from wattgpu.modeling.physical.prior_columns import with_prior
from wattgpu.modeling.physical.synthetic import calibrate
from wattgpu.modeling.physical.targets import MEASURED_COLUMN, SOURCE_COLUMN, rows_measuring

# What the constants are fitted on: single-GPU, dense, 16-bit vLLM rows, less the 2024 batch runs
# of ML.ENERGY, whose CPU-bound engine no spec-based model can tell apart (on the same H100 and
# Llama-3.1-8B they report 4x the ITL and 40 % of the power of the 2025 runs).
EXCLUDED_FAMILIES = ("v2_vllm_batch_2024",)
SIXTEEN_BIT = ("float16", "bfloat16", "fp16", "bf16")
# A fit starts here, and a constant no training row informs stays here: the shipped values, but
# a server's power factor from the WattGPU paper's load-scaled TDP (0.6 / 0.9), not from our data.
NEUTRAL_START = replace(DEFAULT_CONSTANTS, server_power_factor=0.6 / 0.9)
MIN_FIT_ROWS = 20
# Host-side floors a fit may choose from, s per layer per step (10 us to 5 ms, log-spaced).
FLOOR_GRID = np.geomspace(1e-5, 5e-3, 200)
# vLLM's overheads are in the constants themselves.
CALIBRATED_ENGINE = "vllm"


def calibration_mask(rows: pd.DataFrame) -> pd.Series:
    """The rows the analytical model's constants are fitted on (see ``EXCLUDED_FAMILIES``)."""
    blank = pd.Series("", index=rows.index)
    flags = rows.get("flags", blank).astype("object").fillna("").astype(str)
    family = rows.get("family", blank).astype("object").fillna("").astype(str)
    single = rows["num_gpus"].astype(float).fillna(1.0) == 1.0
    dense = (rows["llm_active_params_b"] >= rows["llm_params_b"]) & ~flags.str.contains("moe")
    sixteen = rows["dtype"].astype(str).str.lower().isin(SIXTEEN_BIT) & ~flags.str.contains("fp8")
    vllm = rows["engine"].astype(str) == "vllm"
    return single & dense & sixteen & vllm & ~family.isin(EXCLUDED_FAMILIES)


def fit_constants(rows: pd.DataFrame) -> PhysicalConstants:
    """Constants fitted on ``rows``' calibration rows (``NEUTRAL_START`` if too few).

    Folds that hold out no calibration row fit the same rows: a fit is kept per distinct set of
    calibration rows (by content), so a job's folds and trials fit each set once.
    """
    mask = calibration_mask(rows)
    if int(mask.sum()) < MIN_FIT_ROWS:
        return NEUTRAL_START
    part = rows[mask.to_numpy()]
    key = _content_key(part)
    if key not in _FITTED:
        constants, _ = calibrate(part, start=NEUTRAL_START)
        _FITTED[key] = constants
    return _FITTED[key]


# The constants fitted per set of calibration rows (``_content_key``); a few hundred bytes each.
_FITTED: dict[bytes, PhysicalConstants] = {}


def _content_key(rows: pd.DataFrame) -> bytes:
    """A digest of the rows' values (not their index): equal for the same rows in any fold."""
    hashed = pd.util.hash_pandas_object(rows.reset_index(drop=True), index=False)
    return hashlib.sha256(np.sort(hashed.to_numpy()).tobytes()).digest()


def fit_engine_floors(rows: pd.DataFrame) -> dict[str, float]:
    """Per engine but vLLM, the host-side time per layer of a decode step, s.

    The value on ``FLOOR_GRID`` that best explains the engine's measured ITLs as
    ``max(prior_itl_s, floor x layers)`` (least median absolute log error); engines with fewer
    than ``MIN_FIT_ROWS`` ITL rows get none. ``rows`` need the prior columns (``with_prior``).
    """
    # the file's ITL as measured: the prior, like "latency / output tokens", counts the prefills
    measured = rows_measuring(SOURCE_COLUMN["itl"], rows)
    floors = {}
    for engine, part in measured.groupby(measured["engine"].astype(str)):
        if engine == CALIBRATED_ENGINE or len(part) < MIN_FIT_ROWS:
            continue
        layers = part["llm_num_layers"].to_numpy(float)[:, None]
        prior = part["prior_itl_s"].to_numpy(float)[:, None]
        itl = part["itl_s"].to_numpy(float)[:, None]
        errors = np.median(np.abs(np.log(np.maximum(prior, FLOOR_GRID * layers) / itl)), axis=0)
        floors[engine] = float(FLOOR_GRID[int(np.argmin(errors))])
    return floors


# What makes two rows the same set-up but for the engine: one LLM on one GPU under one workload.
PAIRING_COLUMNS = (
    "model",
    "gpu",
    "dtype",
    "num_gpus",
    "scenario",
    "input_tokens",
    "output_tokens",
    "concurrency",
    "request_rate_rps",
    "itl_statistic",
)


def fit_engine_effects(rows: pd.DataFrame) -> EngineEffects:
    """The engines' factors on the decode step and the per-year trend, from paired rows only.

    Rows of one set-up (``PAIRING_COLUMNS``) measured on several (engine, release year) pairs
    tell what the engine changes with nothing else changed: their log-ratios of measured to
    prior ITL, centred per set-up, are fitted by least squares on one indicator per engine
    (vLLM the reference) and the release year, and the results are clipped to the bounds of
    ``physics``. ``rows`` need the prior columns without engine effects. Nothing paired (or too
    few rows): no effects.
    """
    measured = rows_measuring(MEASURED_COLUMN["itl"], rows)
    if measured.empty:
        return NO_ENGINE_EFFECTS
    setups = measured.reindex(columns=list(PAIRING_COLUMNS)).astype(object).fillna("")
    keys = setups.groupby(list(PAIRING_COLUMNS), dropna=False).ngroup()
    variant = measured["engine"].astype(str) + "@" + measured["engine_year"].astype(str)
    paired = variant.groupby(keys).transform("nunique") > 1
    part = measured[paired.to_numpy()]
    if len(part) < MIN_FIT_ROWS:
        return NO_ENGINE_EFFECTS
    group = keys[paired.to_numpy()].to_numpy()
    residual = np.log(
        part[MEASURED_COLUMN["itl"]].to_numpy(float) / part["prior_itl_s"].to_numpy(float)
    )
    engines = sorted(set(part["engine"].astype(str)) - {CALIBRATED_ENGINE})
    reference = float(np.median(part["engine_year"].to_numpy(float)))
    design = np.column_stack(
        [(part["engine"].astype(str) == e).to_numpy(float) for e in engines]
        + [part["engine_year"].to_numpy(float) - reference]
    )
    frame = pd.DataFrame(np.column_stack([residual, design]))
    centred = (frame - frame.groupby(group).transform("mean")).to_numpy()
    solution, *_ = np.linalg.lstsq(centred[:, 1:], centred[:, 0], rcond=None)
    factors = {
        e: float(np.clip(solution[i], -MAX_ENGINE_EFFECT, MAX_ENGINE_EFFECT))
        for i, e in enumerate(engines)
        if np.any(centred[:, 1 + i] != 0.0)
    }
    per_year = float(np.clip(solution[-1], -MAX_YEAR_EFFECT, MAX_YEAR_EFFECT))
    return EngineEffects(factors, per_year, reference)


# What a TTFT fit may choose from: a fixed cost of 1 ms to 1 s, a scale of 1/3 to 30 (a coarse
# grid, then a fine one around its best point).
TTFT_OVERHEAD_GRID = np.concatenate([[0.0], np.geomspace(1e-3, 1.0, 61)])
TTFT_SCALE_GRID = np.geomspace(1.0 / 3.0, 30.0, 91)
_COARSE = 6  # every 6th point of each grid first


def fit_ttft_terms(rows: pd.DataFrame) -> TtftTerms:
    """A request's fixed cost and the prefill's scale that best explain the measured TTFTs.

    The pair on the grids with the least median absolute log error of ``overhead + scale x
    prior``, searched on every sixth point of each grid and then on every point within six of
    the best; too few rows with a TTFT: none. ``rows`` need the prior columns without the terms.
    """
    measured = rows_measuring(MEASURED_COLUMN["ttft"], rows)
    if len(measured) < MIN_FIT_ROWS:
        return NO_TTFT_TERMS
    prior = measured["prior_ttft_s"].to_numpy(float)
    true = measured[MEASURED_COLUMN["ttft"]].to_numpy(float)

    def best(overheads: np.ndarray, scales: np.ndarray) -> tuple[int, int]:
        guess = overheads[None, :, None] + scales[None, None, :] * prior[:, None, None]
        errors = np.median(np.abs(np.log(guess / true[:, None, None])), axis=0)
        return np.unravel_index(int(np.argmin(errors)), errors.shape)

    o_coarse, s_coarse = (
        np.arange(0, len(TTFT_OVERHEAD_GRID), _COARSE),
        np.arange(0, len(TTFT_SCALE_GRID), _COARSE),
    )
    i, j = best(TTFT_OVERHEAD_GRID[o_coarse], TTFT_SCALE_GRID[s_coarse])
    o_fine = np.arange(
        max(0, o_coarse[i] - _COARSE), min(len(TTFT_OVERHEAD_GRID), o_coarse[i] + _COARSE + 1)
    )
    s_fine = np.arange(
        max(0, s_coarse[j] - _COARSE), min(len(TTFT_SCALE_GRID), s_coarse[j] + _COARSE + 1)
    )
    i, j = best(TTFT_OVERHEAD_GRID[o_fine], TTFT_SCALE_GRID[s_fine])
    return TtftTerms(float(TTFT_OVERHEAD_GRID[o_fine[i]]), float(TTFT_SCALE_GRID[s_fine[j]]))


def fit_prior(
    train: pd.DataFrame, target: str | None = None
) -> tuple[PhysicalConstants, dict[str, float], EngineEffects, TtftTerms]:
    """The analytical model's constants, engine floors, engine effects and TTFT terms.

    ``target``: the target the prior serves. Only TTFT reads the TTFT terms (``prior_ttft_s``):
    for power and ITL they are not fitted and the shipped ones stand (``None``: fitted).
    """
    constants = fit_constants(train)
    # The floors and the engine effects both read the prior ITL with neither, which no floor
    # changes: one set of prior columns serves both fits.
    bare = with_prior(train, constants, {}, NO_ENGINE_EFFECTS, NO_TTFT_TERMS)
    floors = fit_engine_floors(bare)
    effects = fit_engine_effects(bare)
    if target not in (None, "ttft"):
        return constants, floors, effects, DEFAULT_TTFT_TERMS
    ttft = fit_ttft_terms(with_prior(train, constants, floors, effects, NO_TTFT_TERMS))
    return constants, floors, effects, ttft


def refit_prior(
    train: pd.DataFrame, test: pd.DataFrame, target: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both sides of a fold with the prior columns of constants and floors fitted on ``train``.

    ``target``: as ``fit_prior``'s (``refit_prior_for`` binds it).
    """
    fitted = fit_prior(train, target)
    return with_prior(train, *fitted), with_prior(test, *fitted)


def refit_prior_for(
    target: str,
) -> Callable[[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]]:
    """``refit_prior`` for ``target``'s folds (a fold's ``prepare``; it pickles to the workers)."""
    return partial(refit_prior, target=target)
