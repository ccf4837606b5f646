"""Tensor peaks by number format, derived from the architecture: SMs x clock x per-SM rate.

``data/tensor_rates.csv`` holds, per compute capability (one architecture, or one half of it:
GA100 vs GA10x, Blackwell data centre vs consumer), the dense tensor operations one SM does per
clock in each format, with the NVIDIA whitepaper it comes from. A peak in TFLOPS (TOPS for the
integer formats) is ``sm_count x clock_MHz x rate / 1e6``.

The clock is the GPU's ``tensor_clock_mhz`` where the catalogue gives one, else its
``boost_clock_mhz``. Hopper and Blackwell data-centre sheets (and a few others) quote their
tensor peaks at a clock below the boost clock the same sheet or ``nvidia-smi`` gives (H100 SXM:
989.4 TFLOPS is 132 SMs x 1830 MHz x 4096, not the 1980 MHz boost); the catalogue names that clock
in ``tensor_clock_mhz`` (what the sheet's figure implies), so that a derived peak is the sheet's.

GeForce cards run FP16 with FP32 accumulation at half their FP16-accumulate rate (the
``geforce_fp32acc`` rate); the professional cards on the same die run it at the full rate, which
the catalogue leaves blank in ``fp32acc_tensor_tflops`` (blank: the FP16 figure holds).

Pure functions of DataFrames; :func:`read_tensor_rates` is the one reader.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.errors import DataError

TENSOR_RATES_FILE = "tensor_rates.csv"
# catalogue column -> rate column of tensor_rates.csv (dense operations per SM per clock)
PEAK_RATES = {
    "fp16_tensor_tflops": "fp16_flops_per_sm_clock",
    "fp8_tensor_tflops": "fp8_flops_per_sm_clock",
    "fp4_tensor_tflops": "fp4_flops_per_sm_clock",
    "int8_tensor_tops": "int8_ops_per_sm_clock",
    "int4_tensor_tops": "int4_ops_per_sm_clock",
}
GEFORCE_FP32ACC_RATE = "geforce_fp32acc_flops_per_sm_clock"
RATE_COLUMNS = ("compute_capability", *PEAK_RATES.values(), GEFORCE_FP32ACC_RATE, "source")
# How far a derived peak may lie from the vendor sheet's figure (issue 59: within 5 %).
PEAK_TOLERANCE = 0.05
# Stated figures the architecture's rate is not meant to explain, each with the reason: the
# sheet quotes another quantity. Every other stated peak must agree within PEAK_TOLERANCE.
SHEET_EXCEPTIONS = {
    ("NVIDIA A10G", "fp16_tensor_tflops"): (
        "no NVIDIA sheet; the catalogue keeps the half-rate figure third parties quote (70 of 140)"
    ),
    **{
        ("NVIDIA L40", column): (
            "the L40 sheet's figures are half the Ada rate at its boost clock in every format "
            "(its FP16 is the FP32-accumulate figure)"
        )
        for column in ("fp16_tensor_tflops", "fp8_tensor_tflops", "int8_tensor_tops")
    },
    ("NVIDIA L40", "int4_tensor_tops"): "as its other formats: half the Ada rate",
    ("NVIDIA L40S", "int4_tensor_tops"): "the L40S sheet lists INT4 at its INT8 figure (733)",
}


def read_tensor_rates(path: Path = SHIPPED_DATA_DIR / TENSOR_RATES_FILE) -> pd.DataFrame:
    """Read the per-architecture rate table; a missing column or capability twice is an error."""
    if not Path(path).is_file():
        raise DataError(f"tensor rate table not found: {path}")
    rates = pd.read_csv(path)
    missing = [c for c in RATE_COLUMNS if c not in rates.columns]
    if missing:
        raise DataError(f"tensor rate table {path} lacks column(s) {', '.join(missing)}")
    twice = rates["compute_capability"][rates["compute_capability"].duplicated()]
    if not twice.empty:
        raise DataError(
            f"tensor rate table {path} lists a compute capability twice. Got {twice.iloc[0]}."
        )
    return rates


def is_geforce(names: pd.Series) -> pd.Series:
    """Whether each GPU is a GeForce card (FP32 accumulation at half rate); TITANs are not."""
    return names.astype(str).str.contains("GeForce", case=False, regex=False)


def tensor_clock(gpus: pd.DataFrame) -> pd.Series:
    """The clock each GPU's tensor peaks are quoted at: ``tensor_clock_mhz``, else the boost."""
    return _numbers(gpus, "tensor_clock_mhz").fillna(_numbers(gpus, "boost_clock_mhz"))


def _numbers(gpus: pd.DataFrame, column: str) -> pd.Series:
    """The column as floats; blank where absent or not a number."""
    if column not in gpus.columns:
        return pd.Series(np.nan, index=gpus.index, dtype=float)
    return pd.to_numeric(gpus[column], errors="coerce").astype(float)


def derive_peaks(gpus: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Return the derived dense tensor peaks of each GPU, one column per catalogue peak column.

    Columns: the keys of ``PEAK_RATES`` and ``fp32acc_tensor_tflops`` (GeForce cards only;
    blank on the others, whose FP32 accumulation runs at the FP16 rate). A peak is blank where
    the GPU lacks an SM count, a clock or a capability the table lists, or where its
    architecture has no such format. Same index as ``gpus``; ``gpus`` is not changed.
    """
    capability = _numbers(gpus, "compute_capability").round(1)
    table = rates.assign(compute_capability=rates["compute_capability"].round(1))
    table = table.set_index("compute_capability")
    sm_clock = _numbers(gpus, "sm_count") * tensor_clock(gpus)
    out = pd.DataFrame(index=gpus.index)
    for column, rate in PEAK_RATES.items():
        out[column] = _peak(sm_clock, capability.map(table[rate]))
    geforce_rate = capability.map(table[GEFORCE_FP32ACC_RATE]).where(is_geforce(gpus["gpu"]))
    out["fp32acc_tensor_tflops"] = _peak(sm_clock, geforce_rate)
    return out


def _peak(sm_clock: pd.Series, rate: pd.Series) -> pd.Series:
    """SMs x MHz x operations per SM per clock, in tera-operations per second (rounded to 0.1)."""
    return (sm_clock * pd.to_numeric(rate, errors="coerce") / 1e6).round(1).astype(float)


def peak_ratios(gpus: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Each GPU's stated peak over its derived one, per peak column (blank where either is).

    A ratio outside ``1 +/- PEAK_TOLERANCE`` is a sheet the architecture's rate does not explain:
    a wrong rate, SM count or clock, or a sheet quoted at a clock the catalogue does not name.
    """
    derived = derive_peaks(gpus, rates)
    out = pd.DataFrame(index=gpus.index)
    for column in derived.columns:
        stated = _numbers(gpus, column)
        ratio = stated / derived[column].replace(0, np.nan)
        out[column] = ratio.astype(float)
    return out


def peaks_agree(gpus: pd.DataFrame, rates: pd.DataFrame) -> pd.Series:
    """Per GPU, whether every stated peak lies within ``PEAK_TOLERANCE`` of its derived one.

    A peak blank on either side, and the figures ``SHEET_EXCEPTIONS`` names, are not compared.
    """
    ratios = peak_ratios(gpus, rates)
    names = gpus["gpu"].astype(str)
    agree = pd.Series(True, index=gpus.index, dtype=bool)
    for column in ratios.columns:
        excepted = names.map(lambda name, c=column: (name, c) in SHEET_EXCEPTIONS).astype(bool)
        off = (ratios[column] - 1).abs() > PEAK_TOLERANCE
        agree &= ~(off & ~excepted)
    return agree
