"""The honest check of the intervals: each held-out group bounded as the served model would.

For every split (CV, LOGO, LOLO, LOSO) each group's rows get the interval of an interval model
fitted without that group's residuals, through ``uncertainty.intervals`` -- the function the
served model calls -- so the coverage and width reported on the model card, by ``wattgpu
evaluate --intervals true`` and by ``bench/accuracy.py`` are those of the intervals a user is
served for such a row. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu.modeling.learning import side_by_side
from wattgpu.modeling.learning.recipe import Recipe
from wattgpu.modeling.learning.uncertainty import (
    COVERAGE,
    Intervals,
    fit_interval,
    held_out_analogs,
    intervals,
    kind_residuals,
    with_held_out_analogs,
)


def held_out_intervals(
    recipe: Recipe,
    frame: pd.DataFrame,
    residuals: Mapping[str, np.ndarray],
    checks: Mapping[str, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]],
    coverage: float = COVERAGE,
    seed: int = 0,
) -> dict[str, Intervals]:
    """Per split, each row's interval from an interval model fitted without the row's group.

    The honest check of the intervals: neither the difficulty model nor the conformal factors
    that bound a held-out GPU's (or source's, or LLM block's, or fold's) rows ever saw that
    group's residuals, and the rows are classified and bounded by ``intervals``, as served.

    Args:
        recipe: the target's recipe.
        frame: rows with features.
        residuals: per kind, every row's held-out residual (``kind_residuals``).
        checks: per split, (the split's held-out predictions of every row, each row's group,
            and the analog inputs each row had when held out, ``held_out_analogs``).
        coverage: nominal coverage.
        seed: CatBoost's and the inner folds' seed.

    The groups' interval models are fitted side by side, one single-threaded fit per core.

    """
    jobs = []
    for split, (pred, groups, analogs) in checks.items():
        groups = np.asarray(groups)
        for group in np.unique(groups):
            held = groups == group
            if not held.all():
                mine = {c: np.asarray(v)[held] for c, v in analogs.items()}
                jobs.append((split, held, np.asarray(pred, float), mine))

    # The rows travel to each worker once, not once per group (a group's job names them).
    rows = side_by_side.Shared((frame, dict(residuals)))
    answers = side_by_side.run(
        _held_group_intervals,
        [(recipe, rows, held, pred[held], mine, coverage, seed) for _, held, pred, mine in jobs],
    )
    out: dict[str, Intervals] = {}
    for (split, held, _, _), answer in zip(jobs, answers, strict=True):
        if split not in out:
            n = len(frame)
            out[split] = Intervals(
                np.full(n, np.nan),
                np.full(n, np.nan),
                np.full(n, "", dtype=object),
                np.full(n, "", dtype=object),
                np.zeros(n, dtype=bool),
            )
        for name in ("lower", "upper", "novelty", "kind", "validated"):
            getattr(out[split], name)[held] = getattr(answer, name)
    return out


def _held_group_intervals(
    recipe: Recipe,
    rows: side_by_side.Shared[tuple[pd.DataFrame, dict[str, np.ndarray]]],
    held: np.ndarray,
    pred: np.ndarray,
    analogs: dict[str, np.ndarray],
    coverage: float,
    seed: int,
) -> Intervals:
    """The intervals of the ``held`` rows from a model fitted on the other rows alone.

    ``rows``: every row with features, and per kind their held-out residuals. ``analogs``: the
    analog inputs the held rows had when they were predicted (as a served query has its own).
    """
    frame, residuals = rows.value
    train = {kind: np.asarray(values)[~held] for kind, values in residuals.items()}
    model = fit_interval(recipe, frame[~held], train, coverage, seed)
    return intervals(model, frame[held].assign(**analogs), pred)


def interval_figures(
    true: np.ndarray, pred: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> dict[str, float]:
    """Coverage and width of intervals, over the rows that have one.

    ``interval_coverage`` is the share of true values inside; ``interval_width`` the median of
    (upper - lower) / prediction.
    """
    true, pred = np.asarray(true, float), np.asarray(pred, float)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    ok = np.isfinite(lower) & np.isfinite(upper)
    if not ok.any():
        return {"interval_coverage": math.nan, "interval_width": math.nan}
    inside = (true[ok] >= lower[ok]) & (true[ok] <= upper[ok])
    return {
        "interval_coverage": float(inside.mean()),
        "interval_width": float(np.median((upper[ok] - lower[ok]) / pred[ok])),
    }


# The key of a held-out group's cells in each split's figures (``interval_cells``).
GROUP_KEY = {"CV": "fold", "LOGO": "gpu", "LOLO": "group", "LOSO": "source"}
CELL_COLUMNS = (
    "split",
    "gpu",
    "source",
    "group",
    "fold",
    "scenario",
    "n_rows",
    "interval_coverage",
    "interval_width",
    "novelty",
    "validated",
)


def interval_cells(
    oof: pd.DataFrame, split: str, held_out: Intervals, groups: np.ndarray
) -> pd.DataFrame:
    """``interval_figures`` of each held-out group and scenario of one split (``CELL_COLUMNS``).

    ``groups``: each row's group label under ``split`` (a GPU, a data family, the LLMs of an
    architecture block, a fold). ``novelty`` is the commonest kind the cell's rows were served
    as; ``validated`` the share of its rows whose factors were checked on their scenario and
    kind.
    """
    key = GROUP_KEY[split]
    records = []
    frame = pd.DataFrame({"group": np.asarray(groups), "scenario": oof["scenario"].to_numpy()})
    true, pred = oof["true"].to_numpy(float), oof["pred"].to_numpy(float)
    for (group, scenario), rows in frame.groupby(["group", "scenario"], sort=True).indices.items():
        figures = interval_figures(
            true[rows], pred[rows], held_out.lower[rows], held_out.upper[rows]
        )
        kinds = pd.Series(held_out.kind[rows]).value_counts()
        records.append(
            {
                "split": split,
                key: str(group),
                "scenario": scenario,
                "n_rows": len(rows),
                **figures,
                "novelty": str(kinds.index[0]) if len(kinds) else "",
                "validated": float(held_out.validated[rows].mean()),
            }
        )
    return pd.DataFrame.from_records(records, columns=list(CELL_COLUMNS))


@dataclass(frozen=True)
class IntervalCheck:
    """The intervals' held-out figures: per split and scenario, and per held-out group.

    Attributes:
        by_split: per split, per scenario (and ``all``), ``interval_figures``.
        cells: one row per (split, held-out group, scenario) (``CELL_COLUMNS``).
        held_out: per split, every row's interval as bounded on its held-out side.

    """

    by_split: dict[str, dict[str, dict[str, float]]]
    cells: pd.DataFrame
    held_out: dict[str, Intervals]


def fold_numbers(n: int, folds: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The number of the fold whose test side holds each of ``n`` rows (-1: none)."""
    labels = np.full(n, -1)
    for number, (_, test) in enumerate(folds):
        labels[test] = number
    return labels


def group_names(frame: pd.DataFrame, split: str, numbers: np.ndarray) -> np.ndarray:
    """A readable name of each row's held-out group.

    Its GPU (LOGO), its data family (LOSO), the LLMs of its block (LOLO), its fold (CV).
    """
    if split == "LOGO":
        return frame["gpu"].astype(str).to_numpy()
    if split == "LOSO":
        from wattgpu.modeling.learning.splits import source_family

        return source_family(frame)
    if split == "CV":
        return np.asarray([f"fold {k + 1}" for k in numbers], dtype=object)
    names = np.empty(len(frame), dtype=object)
    llms = frame["model"].astype(str).to_numpy()
    for number in np.unique(numbers):
        rows = numbers == number
        members = sorted(set(llms[rows]))
        extra = f" +{len(members) - 2}" if len(members) > 2 else ""
        names[rows] = ", ".join(members[:2]) + extra
    return names


def check_intervals(
    recipe: Recipe,
    frame: pd.DataFrame,
    oof: Mapping[str, pd.DataFrame],
    folds: Mapping[str, np.ndarray],
    coverage: float = COVERAGE,
    seed: int = 0,
) -> IntervalCheck:
    """Bound every split's held-out predictions as served, and score them.

    Args:
        recipe: the target's recipe.
        frame: rows with features (the order of every ``oof`` frame).
        oof: per split, the model's out-of-fold predictions (``true``, ``pred``, ``scenario``).
        folds: per split, each row's fold number (``fold_numbers``).
        coverage: nominal coverage.
        seed: CatBoost's and the inner folds' seed.

    """
    residuals = kind_residuals(oof)
    checks = {
        s: (oof[s]["pred"].to_numpy(float), folds[s], held_out_analogs(oof[s]))
        for s in oof
        if s in folds
    }
    fitted_on = with_held_out_analogs(frame, oof)
    held_out = held_out_intervals(recipe, fitted_on, residuals, checks, coverage, seed)
    by_split, cells = {}, []
    for split, bounded in held_out.items():
        part = oof[split]
        scenarios = part["scenario"].to_numpy()
        by_split[split] = {
            scenario: interval_figures(
                part["true"][rows], part["pred"][rows], bounded.lower[rows], bounded.upper[rows]
            )
            for scenario, rows in (
                ("all", np.ones(len(part), bool)),
                *((s, scenarios == s) for s in sorted(set(scenarios))),
            )
        }
        names = group_names(frame, split, folds[split])
        cells.append(interval_cells(part, split, bounded, names))
    table = pd.concat(cells, ignore_index=True) if cells else pd.DataFrame(columns=CELL_COLUMNS)
    return IntervalCheck(by_split, table, held_out)
