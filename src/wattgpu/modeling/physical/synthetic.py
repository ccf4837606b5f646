"""A generator of a measurement set marked as generated, and the fit of the analytical model.

The analytical model of LLM serving itself (``serving_model``, its ``PhysicalConstants`` in
``physics``) lives in ``wattgpu.modeling.physical.regimes``; this module fits its
constants to measured rows (``calibrate``, ``fidelity``) and draws a measurement set from it
(``synthesize``). Pure: the CLI writes the file.
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.errors import ConfigError, DataError
from wattgpu.modeling.metrics import mdape
from wattgpu.modeling.physical.columns import columns_of
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.physics import (
    CONSTANT_BOUNDS,
    DEFAULT_CONSTANTS,
    PhysicalConstants,
)
from wattgpu.modeling.physical.regimes import serving_model, serving_model_columns

# per target: (the analytical model's column, the measured column)
PREDICTED_AND_MEASURED = {"power": ("power_w", "mean_power_w"), "itl": ("itl_s", "itl_s")}


def _group_keys(rows: pd.DataFrame) -> pd.Series:
    """Name the data set of each row: ``source/family`` as far as the row says."""
    parts = [
        rows[c].astype("object").fillna("?").astype(str) for c in ("source", "family") if c in rows
    ]
    if not parts:
        return pd.Series("all", index=rows.index)
    key = parts[0]
    for part in parts[1:]:
        key = key + "/" + part
    return key


def fidelity(
    rows: pd.DataFrame, constants: PhysicalConstants, fitted: pd.Series | None = None
) -> pd.DataFrame:
    """MdAPE of the model against measured rows, per target and data set (and engine), and overall.

    Args:
        rows: measured rows from ``build_features`` with ``mean_power_w`` and/or ``itl_s``.
        constants: the constants to evaluate.
        fitted: boolean mask of the rows a fit used; adds an overall line ``fitted`` for them.

    Returns:
        Columns ``target, data_set, engine, n_rows, mdape_pct, median_log_ratio`` (the bias:
        median of log(pred / true)). The overall lines have data set ``all`` (and ``fitted``).

    """
    pred = serving_model(rows, constants)
    keys = _group_keys(rows)
    engine = (
        rows["engine"].astype("object").fillna("?")
        if "engine" in rows
        else pd.Series("?", rows.index)
    )
    out = []
    for target, (p, t) in PREDICTED_AND_MEASURED.items():
        true = (
            pd.to_numeric(rows[t], errors="coerce") if t in rows else pd.Series(np.nan, rows.index)
        )
        have = true.notna() & (true > 0)
        frame = pd.DataFrame({"true": true, "pred": pred[p], "key": keys, "engine": engine})[have]
        parts = [(k, e, g) for (k, e), g in frame.groupby(["key", "engine"], sort=True)]
        parts.append(("all", "any", frame))
        if fitted is not None:
            parts.append(("fitted", "any", frame[fitted.astype(bool)[have]]))
        for key, eng, g in parts:
            if len(g):
                out.append(
                    {
                        "target": target,
                        "data_set": key,
                        "engine": eng,
                        "n_rows": len(g),
                        "mdape_pct": mdape(g["true"], g["pred"]),
                        "median_log_ratio": float(np.median(np.log(g["pred"] / g["true"]))),
                    }
                )
    return pd.DataFrame(out)


def calibrate(
    rows: pd.DataFrame,
    fit_mask: pd.Series | None = None,
    start: PhysicalConstants = DEFAULT_CONSTANTS,
    fixed: tuple[str, ...] = ("idle_fraction",),
    f_scale: float = 0.1,
) -> tuple[PhysicalConstants, pd.DataFrame]:
    """Fit the constants to measured rows by robust least squares on log errors of both targets.

    Every (target, data set) group weighs the same whatever its size, so one large data set cannot
    drown the others; the soft-L1 loss (scale ``f_scale`` in log units) keeps a few odd rows from
    dragging the fit.

    Args:
        rows: measured rows from ``build_features`` (``mean_power_w`` and/or per-request
            ``itl_s``; ``source``/``family`` name the data set when present).
        fit_mask: the rows to fit on (default: all); the report covers every row.
        start: the starting point, and the values of the ``fixed`` constants.
        fixed: constants held at their ``start`` value. Idle power is by default: real serving
            runs rarely leave the GPU idle long enough to tell idle power from dynamic power.
        f_scale: residual size, in log units, beyond which the loss grows linearly.

    Returns:
        The fitted constants and ``fidelity(rows, fitted, fit_mask)``.

    """
    fit_mask = pd.Series(True, index=rows.index) if fit_mask is None else fit_mask.astype(bool)
    fit_rows = rows[fit_mask.to_numpy()]
    targets, weights = _fit_targets(fit_rows)
    names = _free_constants(fixed)
    low = np.array([CONSTANT_BOUNDS[n][0] for n in names])
    high = np.array([CONSTANT_BOUNDS[n][1] for n in names])
    x0 = np.clip([getattr(start, n) for n in names], low, high)

    def constants_of(x: np.ndarray) -> PhysicalConstants:
        return replace(start, **{n: float(v) for n, v in zip(names, x, strict=True)})

    # read once: the solver evaluates the model a few hundred times on the same rows
    columns = columns_of(fit_rows)

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = serving_model_columns(columns, constants_of(x))
        parts = []
        for target, (have, true) in targets.items():
            r = np.log(pred[PREDICTED_AND_MEASURED[target][0]][have] / true)
            parts.append(weights[target] * _soft_l1(r, f_scale))
        return np.concatenate(parts)

    from scipy.optimize import least_squares  # here: 0.5 s of every command that imports this

    # Tolerances of 1e-5 (SciPy's default: 1e-8): the loss is flat near its minimum, and on some
    # folds the default ones took 5 s and 800 evaluations to move the constants within it.
    result = least_squares(
        residuals, x0, bounds=(low, high), x_scale=high - low, ftol=1e-5, xtol=1e-5, gtol=1e-5
    )
    constants = constants_of(result.x)
    return constants, fidelity(rows, constants, fit_mask)


def _fit_targets(
    fit_rows: pd.DataFrame,
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, np.ndarray]]:
    """Per target, the rows with a positive measurement and its values, and the rows' weights.

    A row weighs ``1 / sqrt(size of its (target, data set) group)``, so every group's squared
    residuals weigh the same in total.

    Raises:
        DataError: no row has a positive measurement of either target.

    """
    keys = _group_keys(fit_rows)
    weights, targets = {}, {}
    for target, (_, t) in PREDICTED_AND_MEASURED.items():
        true = pd.to_numeric(fit_rows[t], errors="coerce") if t in fit_rows else None
        if true is None:
            continue
        have = (true.notna() & (true > 0)).to_numpy()
        sizes = keys[have].map(keys[have].value_counts())
        targets[target] = (have, true.to_numpy(dtype=float)[have])
        weights[target] = 1.0 / np.sqrt(sizes.to_numpy(dtype=float))
    if not any(len(v[1]) for v in targets.values()):
        raise DataError(
            f"calibrate needs rows with a positive mean_power_w or itl_s; got {len(fit_rows)} "
            "rows with neither"
        )
    return targets, weights


def _free_constants(fixed: tuple[str, ...]) -> list[str]:
    """The names of the constants a fit may move: all but ``fixed``.

    Raises:
        ConfigError: ``fixed`` names something that is not a constant.

    """
    unknown = set(fixed) - {f.name for f in fields(PhysicalConstants)}
    if unknown:
        allowed = ", ".join(f.name for f in fields(PhysicalConstants))
        raise ConfigError(f"fixed must name constants ({allowed}); got {sorted(unknown)}")
    return [f.name for f in fields(PhysicalConstants) if f.name not in fixed]


def _soft_l1(r: np.ndarray, f_scale: float) -> np.ndarray:
    """Residuals whose squares sum to the soft-L1 loss of ``r`` (scale ``f_scale``)."""
    return np.sign(r) * np.sqrt(2.0 * f_scale**2 * (np.sqrt(1.0 + (r / f_scale) ** 2) - 1.0))


# The generated workload grid: single GPU, vLLM, both scenarios.
OFFLINE_BATCH_SIZES = (1, 8, 32, 128)
SERVER_RATES_RPS = (0.1, 0.5, 1.0, 2.0, 4.0)
TOKEN_LENGTHS = ((512, 256), (1024, 1024))  # (input, output)
LLMS_PER_GPU = 6
MAX_PARAMS_B = 75.0
MIN_KV_SEQS = 8  # sequences of the longest length the KV cache must hold for an LLM to count
POWER_NOISE = 0.03  # log-normal sigma
ITL_NOISE = 0.05
MEASUREMENT_COLUMNS = (
    "gpu", "model", "scenario", "request_rate_rps", "batch_size", "input_tokens", "output_tokens",
    "engine", "dtype", "num_gpus", "mean_power_w", "itl_s", "ttft_s", "throughput_tok_s",
    "energy_per_token_j", "source", "measured_at",
)  # fmt: skip


def _generated_source(seed: int) -> str:
    return f"generated: wattgpu data synthesize (analytical model, seed {seed}) — not measured"


def _candidate_llms(catalog: Catalog) -> pd.DataFrame:
    """Pick the dense decoder LLMs up to ``MAX_PARAMS_B``, with the 16-bit dtype they run in."""
    llms = catalog.llms
    params = pd.to_numeric(llms["params_b"], errors="coerce")
    active = pd.to_numeric(llms["active_params_b"], errors="coerce").fillna(params)
    experts = pd.to_numeric(llms.get("num_experts", pd.Series(np.nan, llms.index)), errors="coerce")
    arch = llms["arch"].astype("object").fillna("decoder") if "arch" in llms else "decoder"
    keep = (params <= MAX_PARAMS_B) & (active >= params) & ~(experts > 1) & (arch == "decoder")
    out = llms.loc[keep, ["model", "params_b"]].reset_index(drop=True)
    dtype = llms.loc[keep, "dtype"].astype("object").str.lower().to_numpy()
    out["dtype"] = np.where(np.isin(dtype, ["float16", "bfloat16"]), dtype, "bfloat16")
    return out


def _pick_llms(catalog: Catalog, rng: np.random.Generator) -> pd.DataFrame:
    """Up to ``LLMS_PER_GPU`` LLMs per GPU that fit with room for KV cache, spread over sizes.

    The fitting LLMs of a GPU are cut into ``LLMS_PER_GPU`` size bands; from each band the LLM
    used least so far is taken (ties broken by a seeded shuffle), so most LLMs appear somewhere.
    """
    llms = _candidate_llms(catalog)
    order = rng.permutation(len(llms))
    used = np.zeros(len(llms))
    longest_in, longest_out = max(TOKEN_LENGTHS, key=sum)
    pairs = []
    for gpu in catalog.gpus["gpu"]:
        probe = llms[["model", "dtype"]].assign(
            gpu=gpu, scenario="offline", input_tokens=longest_in, output_tokens=longest_out
        )
        fits = (build_features(probe, catalog)["max_concurrent_seqs"] >= MIN_KV_SEQS).to_numpy()
        index = np.flatnonzero(fits)
        index = index[np.argsort(llms["params_b"].to_numpy()[index], kind="stable")]
        for band in np.array_split(index, min(LLMS_PER_GPU, len(index))) if len(index) else []:
            best = band[np.lexsort((order[band], used[band]))[0]]
            used[best] += 1
            pairs.append((gpu, llms.at[best, "model"], llms.at[best, "dtype"]))
    return pd.DataFrame(pairs, columns=["gpu", "model", "dtype"])


def synthesize(
    catalog: Catalog, seed: int = 0, constants: PhysicalConstants = DEFAULT_CONSTANTS
) -> pd.DataFrame:
    """Generate a measurement set: every catalogue GPU, most dense LLMs, both scenarios.

    Single GPU, engine vllm; offline at ``OFFLINE_BATCH_SIZES``, server at ``SERVER_RATES_RPS``
    (Poisson), each (GPU, LLM) pair at one of ``TOKEN_LENGTHS`` drawn at random (a size that
    keeps a tuning trial's 28 leave-one-GPU-out fits to seconds); the model's values times
    log-normal noise
    (``POWER_NOISE``, ``ITL_NOISE``), power never above TDP. ``source`` says the rows are
    generated; ``measured_at`` is blank.

    Args:
        catalog: the GPU and LLM catalogues.
        seed: seeds the choice of LLMs per GPU and the noise.
        constants: the model's constants.

    Returns:
        Rows in the measurement schema (``MEASUREMENT_COLUMNS``).

    """
    rng = np.random.default_rng(seed)
    pairs = _pick_llms(catalog, rng)
    loads = [("offline", np.nan, float(b)) for b in OFFLINE_BATCH_SIZES]
    loads += [("server", float(r), np.nan) for r in SERVER_RATES_RPS]
    grid = pd.DataFrame(loads, columns=["scenario", "request_rate_rps", "batch_size"])
    lengths = np.asarray(TOKEN_LENGTHS, dtype=float)[
        rng.integers(0, len(TOKEN_LENGTHS), len(pairs))
    ]
    pairs = pairs.assign(input_tokens=lengths[:, 0], output_tokens=lengths[:, 1])
    rows = pairs.merge(grid, how="cross")
    rows["engine"] = "vllm"
    rows["num_gpus"] = 1.0
    features = build_features(rows, catalog)
    pred = serving_model(features, constants)
    tdp = features["gpu_tdp_w"].to_numpy(dtype=float)
    itl_noise = np.exp(rng.normal(0.0, ITL_NOISE, len(rows)))
    rows["mean_power_w"] = np.minimum(
        pred["power_w"] * np.exp(rng.normal(0.0, POWER_NOISE, len(rows))), tdp
    )
    rows["itl_s"] = pred["itl_s"] * itl_noise
    rows["ttft_s"] = pred["ttft_s"] * itl_noise
    rows["throughput_tok_s"] = pred["throughput_tok_s"] / itl_noise
    rows["energy_per_token_j"] = rows["mean_power_w"] * rows["num_gpus"] / rows["throughput_tok_s"]
    rows["source"] = _generated_source(seed)
    rows["measured_at"] = ""
    return rows[list(MEASUREMENT_COLUMNS)]
