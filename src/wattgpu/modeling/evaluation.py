"""Out-of-fold predictions and the evaluation table (model next to its baseline)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from wattgpu.data.measurements import SCENARIOS
from wattgpu.modeling import models
from wattgpu.modeling.baselines import BASELINES
from wattgpu.modeling.metrics import summarise
from wattgpu.modeling.splits import SPLITS, split_indices
from wattgpu.modeling.targets import MEASURED_COLUMN

# Threads, not worker processes: CatBoost fits release the GIL, so threads are as fast here, and
# they die with the job. Process pools (joblib's loky) outlive a killed parent for minutes.
FOLD_BACKEND = "threading"

TABLE_COLUMNS = (
    "method",
    "target",
    "scenario",
    "split",
    "mdape",
    "pearson_r",
    "gpu_tau",
    "llm_tau",
    "n_rows",
)


def out_of_fold(
    target: str,
    frame: pd.DataFrame,
    split: str,
    params: dict[str, Any] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Predict every row with a model that never saw its fold's group.

    Returns:
        ``gpu``, ``model``, ``scenario``, ``true`` and ``pred`` (SI units) per row.

    """
    pred = np.full(len(frame), np.nan)
    folds = list(split_indices(frame, split, seed=seed))
    # One single-threaded fit per core beats one fit over all cores on data this small
    # (CatBoost's threads have too little work per tree to keep the cores busy).
    jobs = min(len(folds), os.cpu_count() or 1)
    answers = Parallel(n_jobs=jobs, backend=FOLD_BACKEND)(
        delayed(_fit_predict)(target, frame.iloc[train], frame.iloc[test], params, seed)
        for train, test in folds
    )
    for (_, test), answer in zip(folds, answers, strict=True):
        pred[test] = answer
    return pd.DataFrame(
        {
            "gpu": frame["gpu"].to_numpy(),
            "model": frame["model"].to_numpy(),
            "scenario": frame["scenario"].to_numpy(),
            "true": frame[MEASURED_COLUMN[target]].to_numpy(dtype=float),
            "pred": pred,
        }
    )


def _fit_predict(
    target: str, train: pd.DataFrame, test: pd.DataFrame, params: dict[str, Any] | None, seed: int
) -> np.ndarray:
    model = models.fit(target, train, {**(params or {}), "thread_count": 1}, seed=seed)
    return models.predict(target, model, test)


def baseline_predictions(target: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The target's no-learning baseline, in the same shape as ``out_of_fold``."""
    _, baseline = BASELINES[target]
    return pd.DataFrame(
        {
            "gpu": frame["gpu"].to_numpy(),
            "model": frame["model"].to_numpy(),
            "scenario": frame["scenario"].to_numpy(),
            "true": frame[MEASURED_COLUMN[target]].to_numpy(dtype=float),
            "pred": baseline(frame),
        }
    )


def score(predictions: pd.DataFrame, method: str, target: str, split: str) -> list[dict[str, Any]]:
    """One table record per scenario present in ``predictions``."""
    records = []
    for scenario in SCENARIOS:
        rows = predictions[predictions["scenario"] == scenario]
        if rows.empty:
            continue
        records.append(
            {
                "method": method,
                "target": target,
                "scenario": scenario,
                "split": split,
                **summarise(rows),
            }
        )
    return records


def evaluate(
    target: str,
    frame: pd.DataFrame,
    params: dict[str, Any] | None = None,
    splits: tuple[str, ...] = SPLITS,
    seed: int = 0,
    progress: Any = None,
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The evaluation table of the CatBoost model and the baseline on every split and scenario.

    Args:
        progress: optional callable run after each split (e.g. a progress bar's ``update``).

    Returns:
        The table (``TABLE_COLUMNS``) and the model's out-of-fold predictions per split.

    """
    method, _ = BASELINES[target]
    baseline = baseline_predictions(target, frame)
    records: list[dict[str, Any]] = []
    oof: dict[str, pd.DataFrame] = {}
    for split in splits:
        oof[split] = out_of_fold(target, frame, split, params, seed=seed)
        records += score(oof[split], "catboost", target, split)
        records += score(baseline, method, target, split)
        if progress is not None:
            progress()
    table = pd.DataFrame.from_records(records, columns=list(TABLE_COLUMNS))
    return table, oof


def to_markdown(table: pd.DataFrame) -> str:
    """Render the evaluation table as a wide Markdown table (one row per method and scenario)."""
    wide = table.pivot_table(
        index=["target", "method", "scenario"],
        columns="split",
        values=["mdape", "pearson_r", "gpu_tau", "llm_tau"],
        aggfunc="first",
    )
    splits = [s for s in SPLITS if s in table["split"].unique()]
    header = ["target", "method", "scenario"]
    header += [f"{s} MdAPE %" for s in splits] + [f"{s} r" for s in splits]
    header += [f"{s} GPU τ" for s in splits] + [f"{s} LLM τ" for s in splits]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, row in wide.iterrows():
        cells = list(key)
        for metric, fmt in (
            ("mdape", "{:.1f}"),
            ("pearson_r", "{:.3f}"),
            ("gpu_tau", "{:.2f}"),
            ("llm_tau", "{:.2f}"),
        ):
            for split in splits:
                value = row.get((metric, split), np.nan)
                cells.append("–" if pd.isna(value) else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
