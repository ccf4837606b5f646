"""The tuning job: validate -> features -> Optuna study -> evaluation -> logged model.

The CLI and the MLproject entry points call these functions; they hold no logic of their own.
"""

from __future__ import annotations

import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from wattgpu import __version__
from wattgpu.config import Settings
from wattgpu.data import validation
from wattgpu.data.catalog import Catalog
from wattgpu.data.measurements import data_hash, expand_paths, read_measurements, resolve_names
from wattgpu.errors import DataError, StudyComplete, ValidationFailed
from wattgpu.lifecycle import plots, pyfunc, tracking, tuning, workers
from wattgpu.modeling import models
from wattgpu.modeling.card import ModelCard
from wattgpu.modeling.domain import training_domain
from wattgpu.modeling.evaluation import evaluate, to_markdown
from wattgpu.modeling.features import FEATURE_COLUMNS, build_features
from wattgpu.modeling.splits import SPLITS
from wattgpu.modeling.targets import check_target, rows_with_target
from wattgpu.modeling.uncertainty import (
    COVERAGE,
    difficulty_without,
    fit_interval,
    held_out_intervals,
    interval_figures,
)


@dataclass(frozen=True)
class TrainingData:
    """Everything a job reads from disk, loaded once."""

    catalog: Catalog
    files: list[Path]
    measurements: pd.DataFrame
    data_hash: str


@dataclass(frozen=True)
class TuneResult:
    """What a tuning job produced."""

    run_id: str
    table: pd.DataFrame
    best_params: dict[str, Any]
    best_value: float
    n_rows: int


def load_data(settings: Settings, data_paths: list[Path] | None) -> TrainingData:
    """Read the catalogues and the measurement files (default: the shipped ones)."""
    catalog = Catalog.load(settings.gpus_csv, settings.llms_csv)
    files = expand_paths(data_paths or [settings.measurements_dir])
    measurements = read_measurements(files)
    digest = data_hash([settings.gpus_csv, settings.llms_csv, *files])
    return TrainingData(catalog, files, measurements, digest)


def validate(
    settings: Settings, data: TrainingData, docs_dir: Path | None
) -> tuple[bool, str, list[Any]]:
    """Run the three Great Expectations suites; return (success, full report, reports)."""
    reports = validation.validate_all(
        settings.gpus_csv, settings.llms_csv, data.files, docs_dir=docs_dir
    )
    report = validation.format_reports(reports, verbose=True)
    return all(r.success for r in reports), report, reports


def training_rows(target: str, data: TrainingData) -> pd.DataFrame:
    """Rows with resolved names, catalogue specs, physics features and a measured target."""
    resolved, unresolved = resolve_names(data.measurements, data.catalog)
    if not unresolved.empty:
        first = unresolved.iloc[0]
        raise DataError(
            f"{len(unresolved)} measurement row(s) name a GPU or LLM missing from the catalogue, "
            f"e.g. gpu={first['gpu']!r} model={first['model']!r} in {first['data_file']}"
        )
    rows = rows_with_target(target, build_features(resolved, data.catalog))
    if rows["gpu"].nunique() < 2 or rows["model"].nunique() < 2:
        raise DataError(
            f"target {target}: need rows from at least 2 GPUs and 2 LLMs to evaluate; "
            f"got {rows['gpu'].nunique()} GPU(s), {rows['model'].nunique()} LLM(s)"
        )
    return rows


def _metrics_from_table(table: pd.DataFrame) -> dict[str, float]:
    metrics = {}
    for record in table.to_dict("records"):
        prefix = "" if record["method"] == "catboost" else "baseline_"
        for name in ("mdape", "pearson_r", "gpu_tau", "llm_tau"):
            metrics[f"{prefix}{record['split']}_{record['scenario']}_{name}"] = record[name]
    return metrics


def _redact(url: str) -> str:
    """Hide a password in a database URL before logging it."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
    return url


def _sweep_and_check(
    target: str,
    storage: str,
    study_name: str,
    trials: int,
    seed: int,
    notify: Callable[[str], None],
) -> None:
    """Sweep what killed jobs of this study left running; refuse when the study is complete."""
    study = tuning.open_study(storage, study_name, seed)
    failed = tuning.fail_dead_trials(study, workers.is_dead)
    for run_id in tracking.kill_dead_runs(target, study_name, workers.is_dead):
        notify(f"run {run_id} of a killed {target} tuning job marked KILLED")
    if failed:
        numbers = ", ".join(str(n) for n in failed)
        notify(
            f"trial(s) {numbers} of study {study_name!r}, left running by a killed job, marked FAIL"
        )
    done = tuning.completed_trials(study)
    if done >= trials:
        raise StudyComplete(
            f"study {study_name!r} already holds {done} complete trial(s), --trials is {trials}: "
            f"nothing to tune and no run logged (raise --trials to tune further)"
        )


def tune(
    settings: Settings,
    target: str,
    *,
    data_paths: list[Path] | None = None,
    trials: int = 10,
    timeout: float | None = None,
    storage: str | None = None,
    study_name: str | None = None,
    seed: int = 0,
    launcher_run_id: str | None = None,
    show_progress: bool = True,
    notify: Callable[[str], None] | None = None,
) -> TuneResult:
    """Validate the data, tune CatBoost with Optuna on LOGO MdAPE, evaluate, log it all.

    First, what a killed job of the same study left running is swept (``notify`` hears of it):
    its parent run is marked KILLED and its unfinished trials FAIL.

    Raises:
        StudyComplete: the study already holds ``trials`` complete trials; nothing is logged.
        ValidationFailed: the data broke an expectation; the run is logged as FAILED with the
            report, and no model is logged.

    """
    check_target(target)
    data = load_data(settings, data_paths)
    storage = storage or settings.optuna_storage
    study_name = study_name or f"wattgpu-{target}-{data.data_hash[:10]}"
    tracking.configure(settings.tracking_uri)
    _sweep_and_check(target, storage, study_name, trials, seed, notify or (lambda _line: None))
    worker = workers.identity()
    tags = {
        "wattgpu.kind": "tuning",
        "wattgpu.target": target,
        "wattgpu.data_hash": data.data_hash,
        "wattgpu.study": study_name,
        "wattgpu.worker": worker,
    }
    if launcher_run_id:
        tags["wattgpu.launcher_run_id"] = launcher_run_id
    with tracking.parent_run(target, f"tune-{target}", tags) as run_id:
        tracking.log_params(
            {
                "target": target,
                "trials": trials,
                "timeout": timeout,
                "seed": seed,
                "study_name": study_name,
                "storage": _redact(storage),
                "data_files": ",".join(str(f) for f in data.files),
                "data_hash": data.data_hash,
                "objective": "LOGO MdAPE (%)",
                "features": ",".join(FEATURE_COLUMNS),
            }
        )
        tracking.log_metrics(
            {
                "rows_measurements": len(data.measurements),
                "rows_gpus": len(data.catalog.gpus),
                "rows_llms": len(data.catalog.llms),
            }
        )
        with tempfile.TemporaryDirectory() as docs:
            ok, report, reports = validate(settings, data, Path(docs))
            tracking.log_text(report, "validation/report.txt")
            tracking.log_directory(Path(docs), "validation/data_docs")
        tracking.set_tags({"wattgpu.validation": "passed" if ok else "failed"})
        if not ok:
            try:
                validation.raise_on_failure(reports)
            except ValidationFailed as exc:
                raise ValidationFailed(
                    f"{exc}; nothing was trained (report logged to run {run_id}; "
                    f"`wattgpu validate` shows every failure)"
                ) from None

        rows = training_rows(target, data)
        tracking.log_metrics(
            {
                "rows_train": len(rows),
                "gpus_train": rows["gpu"].nunique(),
                "llms_train": rows["model"].nunique(),
            }
        )

        bar = tqdm(total=trials, desc=f"tune {target}", unit="trial", disable=not show_progress)
        study = tuning.run_study(
            target,
            rows,
            trials=trials,
            timeout=timeout,
            storage=storage,
            study_name=study_name,
            seed=seed,
            log_trial=tracking.log_trial,
            on_trial_done=lambda: bar.update(1),
            worker=worker,
        )
        bar.close()
        params = tuning.best_params(study)
        tracking.log_params({f"best_{k}": v for k, v in params.items()})
        tracking.log_metrics(
            {
                "best_LOGO_mdape": study.best_value,
                "trials_completed": tuning.completed_trials(study),
            }
        )

        eval_bar = tqdm(
            total=len(SPLITS), desc=f"evaluate {target}", unit="split", disable=not show_progress
        )
        table, oof = evaluate(target, rows, params, seed=seed, progress=lambda: eval_bar.update(1))
        eval_bar.close()
        tracking.log_frame(table, tracking.EVALUATION_CSV)
        tracking.log_text(to_markdown(table), "evaluation/evaluation.md")
        tracking.log_metrics(_metrics_from_table(table))
        for split, predictions in oof.items():
            tracking.log_frame(predictions, f"evaluation/oof_{split}.csv")

        model = models.fit(target, rows, params, seed=seed)
        importance = model.feature_importance()
        for artifact, fig in (
            (
                "plots/predicted_vs_measured_LOGO.png",
                plots.predicted_vs_measured(oof["LOGO"], target, "LOGO"),
            ),
            ("plots/gpu_ranking_LOGO.png", plots.gpu_ranking(oof["LOGO"], target)),
            (
                "plots/feature_importance.png",
                plots.feature_importance(list(importance.index), importance.to_numpy()),
            ),
        ):
            tracking.log_figure(fig, artifact)
            plots.close(fig)
        logo = table[(table["split"] == "LOGO") & (table["method"] == "catboost")]
        without = difficulty_without(target)
        gpus = rows["gpu"].to_numpy()
        bounds = fit_interval(target, rows, oof["LOGO"], without, gpus, seed=seed)
        held_out = interval_figures(
            oof["LOGO"]["true"],
            oof["LOGO"]["pred"],
            *held_out_intervals(target, rows, oof["LOGO"], without, gpus, seed=seed),
        )
        card = ModelCard(
            target=target,
            domain=training_domain(rows),
            params=params,
            data_hash=data.data_hash,
            logo_mdape=float(study.best_value),
            logo_mdape_by_scenario=dict(
                zip(logo["scenario"], logo["mdape"].astype(float), strict=True)
            ),
            interval_coverage_nominal=COVERAGE,
            interval_coverage_held_out_gpu=held_out["interval_coverage"],
            interval_width_held_out_gpu=held_out["interval_width"],
            wattgpu_version=__version__,
        )
        tracking.log_metrics({f"{k}_held_out_gpu": v for k, v in held_out.items()})
        tracking.log_dict(card.to_dict(), "model_metadata.json")
        uri = pyfunc.log_pyfunc(model, bounds, data.catalog, card)
        tracking.set_tags({"wattgpu.model_uri": uri})
        tracking.set_tags({"wattgpu.machine": platform.platform()})
    if launcher_run_id:
        tracking.tag_run(launcher_run_id, {f"wattgpu.{target}_run_id": run_id})
    return TuneResult(run_id, table, params, float(study.best_value), len(rows))
