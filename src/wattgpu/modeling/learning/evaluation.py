"""Out-of-fold predictions, plain and nested, and the evaluation table (model next to its baseline).

Pure: the nested evaluation is handed its tuner, so this module never imports Optuna or MLflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.measurements import SCENARIOS
from wattgpu.modeling.learning import models, side_by_side
from wattgpu.modeling.learning.analogs import RESIDUAL, Evidence, find_in
from wattgpu.modeling.learning.baselines import (
    BASELINES,
    NEAREST_BY_SPLIT,
    NEAREST_ITL_EXPONENT,
    NEAREST_METHOD,
    nearest_elsewhere,
    nearest_measured,
)
from wattgpu.modeling.learning.recipe import Recipe
from wattgpu.modeling.learning.side_by_side import Shared
from wattgpu.modeling.learning.splits import (
    LLM_BLOCKS,
    SPLITS,
    can_split,
    source_family,
    split_groups,
    split_indices,
)
from wattgpu.modeling.metrics import LOAD_COLUMNS, summarise
from wattgpu.modeling.physical.features import ANALOG_FEATURES
from wattgpu.modeling.physical.itl import DEFAULT_ITL_STATISTIC
from wattgpu.modeling.physical.targets import MEASURED_COLUMN, PRIOR_COLUMN, capped

# A tuner: the hyperparameters it chose on these rows alone, for an objective of this split's
# MdAPE (``wattgpu.lifecycle.tuning.tuner``; ``modeling`` itself never imports Optuna).
Tuner = Callable[[pd.DataFrame, str], dict[str, Any]]
# Rewrites a fold's (train, test) rows from the training side alone (e.g. ``prior.refit_prior``).
Prepare = Callable[[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]]
Fold = tuple[np.ndarray, np.ndarray]
# A fold's (train, test) rows, rewritten by a ``Prepare`` once for all the fits made on it.
PreparedFold = tuple[pd.DataFrame, pd.DataFrame]

# The analytical prior alone (the column the target is the log-ratio to), fitted like the model:
# with ``prepare``, its constants and engine floors come from each fold's training side.
PRIOR_METHOD = "physics-prior"
# The practitioner's method done properly: the prior x exp(the weighted residual of the row's
# measured analogs in the fold's training rows, ``analogs``), the prior alone where it has none.
SCALED_METHOD = "scaled-nearest"
# The workload columns an answer carries, so that the GPU ranking compares like with like
# (``metrics.workload_labels``).
WORKLOAD_COLUMNS = (*LOAD_COLUMNS, "input_tokens", "output_tokens", "num_gpus")

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


def predictions_frame(
    target: str,
    frame: pd.DataFrame,
    pred: np.ndarray,
    prior: np.ndarray | None = None,
    extra: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """The frame of every out-of-fold answer: ``gpu``, ``model``, ``scenario``, ``true``, ``pred``.

    ``true`` is ``frame``'s measured ``target`` and ``pred`` the given answers, both in SI units;
    ``itl_statistic`` says which ITL statistic the row measured (the served one when unknown);
    the ``WORKLOAD_COLUMNS`` that ``frame`` has and ``source_family`` come along; ``prior``, when
    given, is the analytical prior's answer (``PRIOR_METHOD``); ``extra`` columns are added as
    given (the fold's ``scaled`` answer, ``SCALED_METHOD``, and the analog inputs).
    """
    statistic = (
        frame["itl_statistic"].to_numpy()
        if "itl_statistic" in frame.columns
        else np.full(len(frame), DEFAULT_ITL_STATISTIC, dtype=object)
    )
    out = pd.DataFrame(
        {
            "gpu": frame["gpu"].to_numpy(),
            "model": frame["model"].to_numpy(),
            "scenario": frame["scenario"].to_numpy(),
            "true": frame[MEASURED_COLUMN[target]].to_numpy(dtype=float),
            "pred": pred,
            "itl_statistic": statistic,
            **{c: frame[c].to_numpy() for c in WORKLOAD_COLUMNS if c in frame.columns},
            "source_family": source_family(frame),
        }
    )
    if prior is not None:
        out["prior"] = prior
    for name, values in (extra or {}).items():
        out[name] = values
    return out


# The model scored apart on the rows that measured the served ITL statistic (the median gap) and
# on the rest (mean TPOT, latency / output tokens), so the served number's own error shows.
BY_STATISTIC = {
    "catboost (median-ITL rows)": True,
    "catboost (other-ITL rows)": False,
}


def score_by_statistic(predictions: pd.DataFrame, split: str) -> list[dict[str, Any]]:
    """ITL: the model's records on the rows that measured the served statistic, and the rest."""
    served = (predictions["itl_statistic"] == DEFAULT_ITL_STATISTIC).to_numpy()
    records: list[dict[str, Any]] = []
    for method, keep in BY_STATISTIC.items():
        records += score(predictions[served == keep], method, "itl", split)
    return records


def out_of_fold(
    recipe: Recipe,
    frame: pd.DataFrame,
    split: str,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    prepare: Prepare | None = None,
) -> pd.DataFrame:
    """Predict every row with a model that never saw its fold's group (the recipe's folds).

    Returns:
        ``predictions_frame``: ``gpu``, ``model``, ``scenario``, ``true``, ``pred`` and
        ``prior`` per row.

    """
    folds = list(split_indices(frame, split, seed=seed, folds=recipe.folds))
    return predict_folds(recipe, frame, folds, [params] * len(folds), seed=seed, prepare=prepare)


def prepared_folds(
    frame: pd.DataFrame, folds: list[Fold], prepare: Prepare | None
) -> list[Shared[PreparedFold]]:
    """Each fold's (train, test) rows, rewritten by ``prepare`` from its training side alone.

    Done once per fold, so that every fit on the fold (every trial of a study) reuses it; each
    worker reads a fold once, and featurises it once (``side_by_side.Shared``).
    """
    sides = [(frame.iloc[train], frame.iloc[test]) for train, test in folds]
    if prepare is not None:
        sides = side_by_side.run(prepare, sides)  # each fold's refit on a core of its own
    return [Shared(fold) for fold in sides]


@dataclass(frozen=True)
class PreparedSplit:
    """A split's folds of some rows, each side rewritten once by a ``Prepare`` (``prepare_split``).

    Attributes:
        split: the split (``LOGO``, ...).
        folds: its (train, test) row positions.
        prepared: each fold's rewritten sides, shared with the workers (``prepared_folds``).

    """

    split: str
    folds: list[Fold]
    prepared: list[Shared[PreparedFold]]


def prepare_split(
    recipe: Recipe, frame: pd.DataFrame, split: str, seed: int, prepare: Prepare | None
) -> PreparedSplit:
    """``split``'s folds of ``frame`` (the recipe's fold counts), each rewritten by ``prepare``."""
    folds = list(split_indices(frame, split, seed=seed, folds=recipe.folds))
    return PreparedSplit(split, folds, prepared_folds(frame, folds, prepare))


def predict_folds(
    recipe: Recipe,
    frame: pd.DataFrame,
    folds: list[Fold],
    fold_params: list[dict[str, Any] | None],
    *,
    seed: int = 0,
    prepare: Prepare | None = None,
    prepared: list[Shared[PreparedFold]] | None = None,
) -> pd.DataFrame:
    """Each fold's test rows predicted by a model fitted on its training rows with its params.

    ``prepare(train, test)``, when given, rewrites both sides of each fold from its training
    side (in the fold's worker); ``prepared``, when given, are the folds so rewritten already
    (``prepared_folds``). Rows in no test fold stay NaN.

    Returns:
        ``predictions_frame`` with ``prior``: the analytical prior of each fold's test rows as
        that fold's sides have it.

    """
    (answer,) = submit_fold_sets(
        recipe, frame, [folds], [fold_params], seed=seed, prepare=prepare, prepared=[prepared]
    )()
    return answer


def submit_fold_sets(
    recipe: Recipe,
    frame: pd.DataFrame,
    fold_sets: list[list[Fold]],
    params_sets: list[list[dict[str, Any] | None]],
    *,
    seed: int = 0,
    prepare: Prepare | None = None,
    prepared: list[list[Shared[PreparedFold]] | None] | None = None,
) -> Callable[[], list[pd.DataFrame]]:
    """Start ``predict_folds`` of several sets of folds in the workers, all in one batch.

    One batch keeps both cores busy to the end: split by split, each split's last fold ran
    alone while the other core idled.

    Returns:
        The call that waits for the answers: one ``predict_folds`` frame per set of folds.

    """
    prepared = prepared or [None] * len(fold_sets)
    jobs = []
    for folds, fold_params, ready in zip(fold_sets, params_sets, prepared, strict=True):
        sides = ready or [Shared((frame.iloc[train], frame.iloc[test])) for train, test in folds]
        how = None if ready else prepare
        jobs += [(side, params, how) for side, params in zip(sides, fold_params, strict=True)]
    # One single-threaded fit per core beats one fit over all cores on data this small
    # (CatBoost's threads have too little work per tree to keep the cores busy).
    pending = side_by_side.submit(
        _fit_predict, [(recipe, fold, params, seed, how) for fold, params, how in jobs]
    )

    def answers() -> list[pd.DataFrame]:
        fitted = pending()
        out, start = [], 0
        for folds in fold_sets:
            pred = np.full(len(frame), np.nan)
            prior = np.full(len(frame), np.nan)
            extra = {name: np.full(len(frame), np.nan) for name in FOLD_COLUMNS}
            mine = fitted[start : start + len(folds)]
            for (_, test), (answer, baseline, columns) in zip(folds, mine, strict=True):
                pred[test] = answer
                prior[test] = baseline
                for name, values in columns.items():
                    extra[name][test] = values
            out.append(predictions_frame(recipe.target, frame, pred, prior, extra))
            start += len(folds)
        return out

    return answers


def _prepared(prepare: Prepare | None, train: pd.DataFrame, test: pd.DataFrame) -> PreparedFold:
    return (train, test) if prepare is None else prepare(train, test)


# What a fold answers beside the model and the prior, per test row: ``SCALED_METHOD``'s answer and
# the analog inputs the model had (blank for a recipe that does not lean on analogs).
FOLD_COLUMNS = ("scaled", *ANALOG_FEATURES)


def _fit_predict(
    recipe: Recipe,
    fold: Shared[PreparedFold],
    params: dict[str, Any] | None,
    seed: int,
    prepare: Prepare | None,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The model's answers on the fold's test rows, the prior's and ``FOLD_COLUMNS``, in SI units.

    The fold's sides, rewritten by ``prepare``, and their featurised rows are kept with it for
    the next fit on the same fold (the next trial's). The test rows' analogs come from the
    fold's training rows alone.
    """
    target = recipe.target
    train, test = fold.derived("sides", lambda sides: _prepared(prepare, *sides))
    evidence = fold.derived("evidence", lambda _: Evidence.of(target, train))
    fit_pools = fold.derived("fit", lambda _: models.training_pools(recipe, train))
    found = fold.derived("analogs", lambda _: evidence.find(test).columns())
    # the model's inputs: the analogs where its answer leans on them (``Recipe.analogs``)
    inputs = found if recipe.analogs else find_in(None, test).columns()
    test_pools = fold.derived("test", lambda _: models.Pools(target, test.assign(**inputs)))
    model = models.fit(recipe, train, params, seed, 1, fit_pools, evidence)  # 1: threads
    _, prior_column = PRIOR_COLUMN[target]
    prior = test[prior_column].to_numpy(dtype=float)
    answer = models.predict_si(target, model, test, test_pools)
    residual = np.nan_to_num(found[RESIDUAL])  # no analog: the prior alone
    scaled = capped(target, test, prior * np.exp(residual))
    return answer, prior, {"scaled": scaled, **inputs}


def baseline_predictions(target: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The target's no-learning baseline, in the same shape as ``out_of_fold``."""
    _, baseline = BASELINES[target]
    return predictions_frame(target, frame, baseline(frame))


# The model scored on the rows the nearest-measured baseline answers, so the two compare.
MODEL_ON_NEAREST_ROWS = "catboost (nearest's rows)"


def nearest_predictions(
    target: str,
    frame: pd.DataFrame,
    split: str,
    folds: list[tuple[np.ndarray, np.ndarray]],
) -> pd.DataFrame:
    """The nearest-measured baseline out of fold: each fold answered from its training rows only.

    ``folds`` are the split's (the model's own). CV and LOGO ask the nearest measured GPU (by
    bandwidth; offline ITL scaled by the bandwidth ratio, ``NEAREST_ITL_EXPONENT``), LOLO the
    nearest measured LLM (by parameters); rows with no neighbour under the same workload stay
    NaN (``baselines.nearest_measured``). LOSO asks the closest measurement of the other
    sources (``baselines.nearest_elsewhere``).
    """
    neighbour = NEAREST_BY_SPLIT[split]
    if neighbour == "elsewhere":
        pred = np.full(len(frame), np.nan)
        for train, test in folds:
            pred[test] = nearest_elsewhere(
                frame.iloc[train], frame.iloc[test], MEASURED_COLUMN[target]
            )
        return predictions_frame(target, frame, pred)
    exponent = np.zeros(len(frame))
    if target == "itl":
        scenarios = frame["scenario"].to_numpy()
        exponent = np.array([NEAREST_ITL_EXPONENT.get((neighbour, s), 0.0) for s in scenarios])
    pred = np.full(len(frame), np.nan)
    for train, test in folds:
        pred[test] = nearest_measured(
            frame.iloc[train],
            frame.iloc[test],
            MEASURED_COLUMN[target],
            neighbour,
            exponent=exponent[test],
        )
    return predictions_frame(target, frame, pred)


def score_beside_nearest(
    model: pd.DataFrame, nearest: pd.DataFrame, target: str, split: str
) -> list[dict[str, Any]]:
    """The nearest-measured baseline's records and the model's on the same (answered) rows."""
    answered = nearest["pred"].notna().to_numpy()
    return score(nearest[answered], NEAREST_METHOD, target, split) + score(
        model[answered], MODEL_ON_NEAREST_ROWS, target, split
    )


# The inner objective of a nested evaluation: the same kind of held-out group as the outer split.
INNER_SPLIT = {"CV": "CV", "LOGO": "LOGO", "LOLO": LLM_BLOCKS, "LOSO": "LOSO"}


def nested_out_of_fold(
    recipe: Recipe,
    frame: pd.DataFrame,
    split: str,
    tune: Tuner,
    *,
    seed: int = 0,
    tuning_split: str | None = None,
    on_study_done: Callable[[], None] | None = None,
    prepare: Prepare | None = None,
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Out-of-fold predictions from models whose hyperparameters never saw the held-out group.

    ``tune(rows, split)`` returns the hyperparameters it chose on ``rows`` alone, for an
    objective of ``split`` MdAPE (``wattgpu.lifecycle.tuning.tuner`` runs an Optuna study).
    Each study's objective is ``tuning_split``, by default the kind of generalisation the outer
    split measures (``INNER_SPLIT``: unseen GPUs for LOGO, unseen LLMs for LOLO, unseen
    sources for LOSO). CV, LOGO and LOSO: every outer fold is tuned on its training rows only.
    LOLO has one fold per LLM architecture (dozens), and a study per fold would cost dozens: the
    architectures are cut into the recipe's ``lolo_tuning_blocks`` blocks; a study runs on the
    rows of the other blocks, and each LLM of the block is then predicted by a model fitted on
    every row but its architecture's with those parameters. So no held-out row, GPU, LLM or
    source ever influences the hyperparameters of the model that predicts it.

    ``prepare(train, test)``, when given, rewrites both sides of every study's rows and every
    outer fold from the training side alone (``wattgpu.modeling.physical.prior.refit_prior``
    refits the analytical prior so).

    Returns:
        The predictions (``predictions_frame``) and, per study, the held-out groups and the
        chosen parameters.

    """
    folds = list(split_indices(frame, split, seed=seed, folds=recipe.folds))
    chosen: list[dict[str, Any]] = []
    fold_params: list[dict[str, Any] | None] = [None] * len(folds)
    studies = _studies(frame, split, folds, seed, recipe.lolo_tuning_blocks)
    for number, (tune_rows, held_blocks) in enumerate(studies):
        rows = frame.iloc[tune_rows]
        if prepare is not None:
            rows, _ = prepare(rows, rows.iloc[:0])
        inner = _inner_split(rows, tuning_split or INNER_SPLIT[split])
        params = tune(rows, inner)
        held = _assign_params(frame, split, folds, fold_params, number, held_blocks, params)
        chosen.append({"split": split, "held_out": held, "tuned_on": inner, "params": params})
        if on_study_done is not None:
            on_study_done()
    oof = predict_folds(recipe, frame, folds, fold_params, seed=seed, prepare=prepare)
    return oof, chosen


def studies_needed(recipe: Recipe, frame: pd.DataFrame, split: str) -> int:
    """How many studies ``nested_out_of_fold`` runs for ``split`` (for a progress bar)."""
    if split == "LOLO":
        return min(recipe.lolo_tuning_blocks, len(np.unique(split_groups(frame, "LOLO"))))
    return len(list(split_indices(frame, split, folds=recipe.folds)))


def _studies(
    frame: pd.DataFrame,
    split: str,
    folds: list[tuple[np.ndarray, np.ndarray]],
    seed: int,
    lolo_blocks: int,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Per study, the rows it tunes on and (LOLO only) the architectures it holds out."""
    if split != "LOLO":
        return [(train, None) for train, _ in folds]
    # here, not at import: rendering a stored table (`wattgpu evaluate`) needs no fold
    from sklearn.model_selection import GroupKFold

    groups = split_groups(frame, "LOLO")
    blocks = GroupKFold(
        n_splits=min(lolo_blocks, len(np.unique(groups))), shuffle=True, random_state=seed
    )
    return [(rows, np.unique(groups[held])) for rows, held in blocks.split(frame, groups=groups)]


def _inner_split(rows: pd.DataFrame, inner: str) -> str:
    """``inner``, or CV when ``rows`` hold fewer than two of the groups it would hold out."""
    return inner if inner == "CV" or can_split(rows, inner) else "CV"


def _assign_params(
    frame: pd.DataFrame,
    split: str,
    folds: list[tuple[np.ndarray, np.ndarray]],
    fold_params: list[dict[str, Any] | None],
    number: int,
    held_blocks: np.ndarray | None,
    params: dict[str, Any],
) -> list[str]:
    """Give study ``number``'s params to the outer folds it tuned for; return what they hold out.

    What they hold out: GPUs, LLMs, the source family, or the CV fold's number.
    """
    if held_blocks is None:
        fold_params[number] = params
        test = folds[number][1]
        if split == "LOGO":
            return sorted(set(frame["gpu"].iloc[test].astype(str)))
        if split == "LOSO":
            return sorted(set(source_family(frame.iloc[test])))
        return [f"CV fold {number + 1}"]
    groups = split_groups(frame, "LOLO")
    held = np.isin(groups, held_blocks)
    for index, (_, test) in enumerate(folds):
        if held[test[0]]:
            fold_params[index] = params
    return sorted(set(frame["model"].astype(str).to_numpy()[held]))


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


# The folds behind each split of the evaluation table. LOLO holds LLMs out in blocks of
# architectures: one fold per architecture (bench/accuracy.py's LOLO) costs dozens of fits.
TABLE_FOLDS = {"CV": "CV", "LOGO": "LOGO", "LOLO": LLM_BLOCKS, "LOSO": "LOSO"}


def evaluate(
    recipe: Recipe,
    frame: pd.DataFrame,
    params: dict[str, Any] | None = None,
    splits: tuple[str, ...] = SPLITS,
    seed: int = 0,
    progress: Any = None,
    known: dict[str, pd.DataFrame] | None = None,
    prepare: Prepare | None = None,
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The evaluation table of the CatBoost model and the baselines on every split and scenario.

    Beside the model: the analytical prior alone (``PRIOR_METHOD``), the prior scaled by the
    row's measured analogs (``SCALED_METHOD``), its target's no-learning baseline, and the
    nearest-measured baseline with the model scored again on the rows that
    baseline answers (``score_beside_nearest``). A split the rows cannot form (LOSO on a target
    one source measured) is left out.

    Args:
        recipe: the target's recipe (its members, settings and folds).
        frame: rows with features and the measured target.
        params: the tuned hyperparameters.
        splits: the table's splits (``TABLE_FOLDS`` says which folds each one uses).
        seed: the folds' and CatBoost's seed.
        progress: optional callable run after each split (e.g. a progress bar's ``update``).
        known: out-of-fold predictions already made with ``params`` on a split's folds (the
            tuning study's best trial, on LOGO), with the same ``prepare``: used as they are
            instead of fitted again.
        prepare: rewrites each fold's rows from its training side before the fit
            (``prior.refit_prior``: the prior's constants and engine floors fitted in the fold).

    Returns:
        The table (``TABLE_COLUMNS``) and the model's out-of-fold predictions per split.

    """
    target = recipe.target
    method, _ = BASELINES[target]
    baseline = baseline_predictions(target, frame)
    records: list[dict[str, Any]] = []
    folds_of = {
        split: list(split_indices(frame, TABLE_FOLDS[split], seed=seed, folds=recipe.folds))
        for split in splits
        if can_split(frame, TABLE_FOLDS[split])
    }
    given = {s: known[s] for s in folds_of if s in (known or {})}
    to_fit = [s for s in folds_of if s not in given]
    fitted = submit_fold_sets(
        recipe,
        frame,
        [folds_of[s] for s in to_fit],
        [[params] * len(folds_of[s]) for s in to_fit],
        seed=seed,
        prepare=prepare,
    )
    # the baselines need no fit: answered here while the workers fit the model's folds
    nearest = {s: nearest_predictions(target, frame, s, folds) for s, folds in folds_of.items()}
    given.update(zip(to_fit, fitted(), strict=True))
    oof = {s: given[s] for s in folds_of}  # in the table's order of splits
    for split in splits:
        if split not in folds_of:
            if progress is not None:
                progress()
            continue
        records += score(oof[split], "catboost", target, split)
        if target == "itl":
            records += score_by_statistic(oof[split], split)
        if "prior" in oof[split].columns:
            records += score(
                oof[split].assign(pred=oof[split]["prior"]), PRIOR_METHOD, target, split
            )
        if "scaled" in oof[split].columns:
            records += score(
                oof[split].assign(pred=oof[split]["scaled"]), SCALED_METHOD, target, split
            )
        records += score(baseline, method, target, split)
        records += score_beside_nearest(oof[split], nearest[split], target, split)
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


def intervals_markdown(table: pd.DataFrame) -> str:
    """Render interval figures (``interval_check.interval_cells``, or per split) as Markdown.

    Coverage and width in %; leading ``target``/``split`` columns, the held-out group and the
    kind the rows were served as, when present, are kept.
    """
    keys = [c for c in ("target", "split") if c in table.columns]
    groups = [c for c in ("gpu", "source", "group", "fold") if c in table.columns]
    served = "novelty" in table.columns
    header = [
        *keys,
        *(["held out"] if groups else []),
        "scenario",
        "rows",
        "coverage %",
        "median width %",
        *(["served as"] if served else []),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        cells = [str(row[key]) for key in keys]
        if groups:
            cells.append(next((str(row[c]) for c in groups if _named(row[c])), ""))
        cells += [str(row["scenario"]), str(int(row["n_rows"]))]
        for value in (row["interval_coverage"], row["interval_width"]):
            cells.append("–" if pd.isna(value) else f"{100 * value:.1f}")
        if served:
            cells.append(str(row["novelty"]) + _unchecked(row["validated"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _unchecked(validated: float) -> str:
    """What share of a cell's rows had factors never checked (blank: none)."""
    if validated >= 1.0:
        return ""
    return " (not validated)" if validated <= 0.0 else f" ({1 - validated:.0%} not validated)"


def _named(value: Any) -> bool:
    return isinstance(value, str) and value != ""
