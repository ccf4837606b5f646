"""The analytical prior fitted on training rows only, for evaluation on held-out GPUs and LLMs.

The shipped constants (``physics.DEFAULT_CONSTANTS``) were fitted to every real row, the held-out
GPU's included, and its only server rows set ``server_power_factor``. An honest held-out figure
refits them on the training rows of each fold (``refit_prior``) and recomputes the prior columns
of both sides with the result.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from wattgpu.data.simulate import calibrate
from wattgpu.modeling.features import with_prior
from wattgpu.modeling.physics import DEFAULT_CONSTANTS, PhysicalConstants

# What the constants are fitted on: single-GPU, dense, 16-bit vLLM rows, less the 2024 batch runs
# of ML.ENERGY, whose CPU-bound engine no spec-based model can tell apart (on the same H100 and
# Llama-3.1-8B they report 4x the ITL and 40 % of the power of the 2025 runs).
EXCLUDED_FAMILIES = ("v2_vllm_batch_2024",)
SIXTEEN_BIT = ("float16", "bfloat16", "fp16", "bf16")
# A fit starts here, and a constant no training row informs stays here: the shipped values, but
# a server's power factor from the WattGPU paper's load-scaled TDP (0.6 / 0.9), not from our data.
NEUTRAL_START = replace(DEFAULT_CONSTANTS, server_power_factor=0.6 / 0.9)
MIN_FIT_ROWS = 20


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
    """Constants fitted on ``rows``' calibration rows (``NEUTRAL_START`` if too few)."""
    mask = calibration_mask(rows)
    if int(mask.sum()) < MIN_FIT_ROWS:
        return NEUTRAL_START
    constants, _ = calibrate(rows, mask, start=NEUTRAL_START)
    return constants


def refit_prior(train: pd.DataFrame, test: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both sides of a fold with the prior columns of constants fitted on ``train`` alone."""
    constants = fit_constants(train)
    return with_prior(train, constants), with_prior(test, constants)
