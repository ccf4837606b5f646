"""The tuning job in steps, from ``prepare`` to ``package``.

``tune`` runs them in order for one target; ``main_job`` loads and validates the data once, then
tunes, evaluates, registers and (a first version) promotes every target. ``prepare`` does
everything a wrong setting can break before any run is opened or any work is done: it reaches
the tracking store, reads the data, opens the Optuna storage and sweeps what killed jobs of the
study left running. The other steps run inside the job's MLflow parent run, so that the
validation report, the trials, the evaluation and the model are all logged there. The CLI and
the MLproject entry points call these functions; they hold no logic of their own.
"""

from __future__ import annotations

import math
import platform
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from wattgpu import __version__
from wattgpu.config import CLOSED_FORM, DEFAULT_RECIPE, Settings
from wattgpu.data.catalog import Catalog
from wattgpu.data.measurements import (
    PROVENANCE_COLUMNS,
    data_hash,
    expand_paths,
    read_measurements,
    resolve_names,
)
from wattgpu.data.verdict import Verdict, check_files
from wattgpu.errors import ConfigError, DataError, StudyComplete, ValidationFailed
from wattgpu.lifecycle import (
    gate,
    plots,
    promotion_lock,
    pyfunc,
    registry,
    tracking,
    tuning,
    workers,
)
from wattgpu.modeling.answering.card import ModelCard
from wattgpu.modeling.answering.domain import training_domain
from wattgpu.modeling.answering.tail_ratios import RATIO_TARGETS, fit_tail_ratios
from wattgpu.modeling.learning import models, side_by_side
from wattgpu.modeling.learning.baselines import NEAREST_METHOD
from wattgpu.modeling.learning.evaluation import (
    MODEL_ON_NEAREST_ROWS,
    PRIOR_METHOD,
    TABLE_FOLDS,
    PreparedSplit,
    evaluate,
    prepare_split,
    to_markdown,
)
from wattgpu.modeling.learning.interval_check import IntervalCheck, check_intervals, fold_numbers
from wattgpu.modeling.learning.recipe import Recipe, recipe_of
from wattgpu.modeling.learning.splits import SPLITS, split_indices
from wattgpu.modeling.learning.uncertainty import (
    COVERAGE,
    IntervalModel,
    fit_interval,
    kind_residuals,
    not_validated_notes,
    with_held_out_analogs,
)
from wattgpu.modeling.physical.features import FEATURE_COLUMNS, build_features
from wattgpu.modeling.physical.targets import (
    OPTIONAL_TARGETS,
    SOURCE_COLUMN,
    TARGETS,
    check_target,
    rows_with_target,
)
from wattgpu.modeling.serving.jitter import fit_jitter
from wattgpu.modeling.serving.prior import fit_simulated_prior, refit_for

# The main job's targets, on threads of their own, log their models one at a time: MLflow's
# models-from-code sets the model being logged in a process-wide variable.
_PACKAGING = threading.Lock()
# How long the main job's own thread waits at a time, so that it hears a Ctrl-C at once.
HEARING_S = 0.2


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


@dataclass(frozen=True)
class Validation:
    """The Great Expectations result of a job's data, kept to be logged to every run of it."""

    verdict: Verdict
    docs: Path


@dataclass(frozen=True)
class Job:
    """A prepared tuning job: its recipe and data, where its study lives, and the open study."""

    target: str
    recipe: Recipe
    data: TrainingData
    storage: str
    study_name: str
    study: Any  # an optuna.Study (lifecycle.tuning is the only module that imports Optuna)
    worker: str


@dataclass(frozen=True)
class Groundwork:
    """What a target's job can make before its data is known to be valid: nothing is logged.

    Attributes:
        rows: the target's training rows (``training_rows``).
        folds: the study's folds of them, each with its prior refitted on its training side.
        simulated_prior: a simulated prior's terms, fitted on every row (``rows`` are on it);
            empty on the closed-form prior.

    """

    rows: pd.DataFrame
    folds: PreparedSplit
    simulated_prior: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Assessment:
    """How the tuned hyperparameters fare on data they were not fitted on.

    Attributes:
        table: the evaluation table (``evaluation.TABLE_COLUMNS``) of every split and scenario.
        oof: the out-of-fold predictions per split.
        intervals: the intervals' coverage and width on every split's held-out groups, bounded
            as the served model bounds such rows (``interval_check.check_intervals``).

    """

    table: pd.DataFrame
    oof: dict[str, pd.DataFrame]
    intervals: IntervalCheck


def load_data(settings: Settings, data_paths: list[Path] | None) -> TrainingData:
    """Read the catalogues and the measurement files (default: the shipped ones)."""
    catalog = Catalog.load(settings.gpus_csv, settings.llms_csv)
    files = expand_paths(data_paths or [settings.measurements_dir])
    measurements = read_measurements(files)
    digest = data_hash([settings.gpus_csv, settings.llms_csv, *files])
    return TrainingData(catalog, files, measurements, digest)


def validate(settings: Settings, data: TrainingData, docs_dir: Path) -> Validation:
    """Run the three Great Expectations suites here; their Data Docs go to ``docs_dir``."""
    return Validation(check_files(*_checked_files(settings, data), docs_dir), docs_dir)


def validate_aside(
    settings: Settings, data: TrainingData, docs_dir: Path
) -> Callable[[], Validation]:
    """``validate`` started on a worker process; the call that waits for its answer.

    A job opens its stores meanwhile: Great Expectations takes seconds to import and to run, on
    a core that would idle until the first fit. This process never imports it.
    """
    answer = side_by_side.aside(check_files, *_checked_files(settings, data), docs_dir)
    return lambda: Validation(answer(), docs_dir)


def _checked_files(settings: Settings, data: TrainingData) -> tuple[Path, Path, tuple[Path, ...]]:
    """What ``check_files`` validates: the two catalogues and the measurement files."""
    return settings.gpus_csv, settings.llms_csv, tuple(data.files)


def measures(data: TrainingData, target: str) -> bool:
    """Whether the measurements hold at least one positive value of ``target``."""
    values = pd.to_numeric(data.measurements[SOURCE_COLUMN[check_target(target)]], errors="coerce")
    return bool((values > 0).any())


def training_rows(target: str, data: TrainingData) -> pd.DataFrame:
    """Rows with resolved names, catalogue specs, physics features and a measured target.

    Without the ``PROVENANCE_COLUMNS``, which no model step reads.
    """
    resolved, unresolved = resolve_names(data.measurements, data.catalog)
    if not unresolved.empty:
        first = unresolved.iloc[0]
        raise DataError(
            f"{len(unresolved)} measurement row(s) name a GPU or LLM missing from the catalogue, "
            f"e.g. gpu={first['gpu']!r} model={first['model']!r} in {first['data_file']}"
        )
    rows = rows_with_target(target, build_features(resolved, data.catalog))
    rows = rows.drop(columns=[c for c in PROVENANCE_COLUMNS if c in rows.columns])
    if rows["gpu"].nunique() < 2 or rows["model"].nunique() < 2:
        raise DataError(
            f"target {target}: need rows from at least 2 GPUs and 2 LLMs to evaluate; "
            f"got {rows['gpu'].nunique()} GPU(s), {rows['model'].nunique()} LLM(s)"
        )
    return rows


def lay_groundwork(job: Job, seed: int) -> Groundwork:
    """The target's training rows and its study's folds, each with its prior refitted.

    Pure (nothing is logged or stored), so the main job lays it while the data is validated:
    the refits run on a worker that would otherwise wait.

    Raises:
        DataError: as ``training_rows``.

    """
    rows = training_rows(job.target, job.data)
    refit = refit_for(job.target, job.recipe.prior)
    folds = prepare_split(job.recipe, rows, tuning.OBJECTIVE_SPLIT, seed, refit)
    if job.recipe.prior == CLOSED_FORM:
        return Groundwork(rows, folds)
    rows, terms = fit_simulated_prior(rows)  # the served model's, on every row
    return Groundwork(rows, folds, terms.to_dict())


def tune(
    settings: Settings,
    target: str,
    *,
    recipe: str | None = None,
    prior: str | None = None,
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

    ``recipe`` defaults to the settings' (``full`` unless ``WATTGPU_RECIPE`` says). First, what
    a killed job of the same study left running is swept (``notify`` hears of it): its parent
    run is marked KILLED and its unfinished trials FAIL.

    Raises:
        ConfigError: an unknown recipe, the tracking store or the Optuna storage cannot be
            reached, or ``trials`` is below 1; nothing was run or logged.
        StudyComplete: the study already holds ``trials`` complete trials and the tracking
            store a finished run of it; nothing is logged.
        ValidationFailed: the data broke an expectation; the run is logged as FAILED with the
            report, and no model is logged.

    """
    job = prepare(
        settings,
        target,
        recipe=recipe or settings.recipe,
        prior=prior,
        data=None,
        data_paths=data_paths,
        storage=storage,
        study_name=study_name,
        trials=trials,
        seed=seed,
        notify=notify or (lambda _line: None),
    )
    side_by_side.warm_up()  # the workers start while the data is validated
    with tempfile.TemporaryDirectory() as docs:
        validation = validate(settings, job.data, Path(docs))
        return run_job(
            job,
            validation,
            trials=trials,
            timeout=timeout,
            seed=seed,
            launcher_run_id=launcher_run_id,
            show_progress=show_progress,
        )


def run_job(
    job: Job,
    validation: Validation,
    *,
    trials: int,
    timeout: float | None,
    seed: int,
    launcher_run_id: str | None,
    show_progress: bool,
    groundwork: Callable[[], Groundwork] | None = None,
    verbose: bool = True,
) -> TuneResult:
    """Run a prepared job in its parent run: log, check the data, search, evaluate, package.

    ``groundwork``, when given, waits for the job's ``lay_groundwork`` (started while the data
    was validated); it is asked for only once the data passed. ``show_progress``: the study's
    progress bar (on a terminal); ``verbose`` adds the evaluation's, and the bars stay when done.
    """
    target = job.target
    with tracking.parent_run(target, f"tune-{target}", job_tags(job, launcher_run_id)) as run_id:
        log_job(job, trials=trials, timeout=timeout, seed=seed)
        check_validation(validation, run_id)
        ready = groundwork() if groundwork else lay_groundwork(job, seed)
        rows = ready.rows
        log_rows(rows)
        best = tuning.BestPredictions()
        study = search(
            job,
            rows,
            trials=trials,
            timeout=timeout,
            seed=seed,
            progress=show_progress,
            best=best,
            ready=ready.folds,
            leave=verbose,
        )
        params = tuning.best_params(study)
        served = fit_served(job.recipe, rows, params, seed)  # on a worker, beside the assessment
        known = best.of(study.best_trial.number)
        table, oof = evaluate_tuned(
            job.recipe,
            rows,
            params,
            seed=seed,
            progress=show_progress and verbose,
            known=None if known is None else {"LOGO": known},
        )
        bounds = fit_bounds(job.recipe, rows, oof, seed)  # on a worker, beside the checks
        assessment = check_held_out(job.recipe, rows, table, oof, seed=seed)
        log_assessment(target, assessment)
        package(
            job, rows, params, assessment,
            served=served, bounds=bounds, simulated_prior=ready.simulated_prior,
        )  # fmt: skip
    if launcher_run_id:
        tracking.tag_run(launcher_run_id, {f"wattgpu.{target}_run_id": run_id})
    return TuneResult(run_id, assessment.table, params, float(study.best_value), len(rows))


def summary(target: str, result: TuneResult) -> str:
    """A finished job in words: its best LOGO MdAPE and run, then its evaluation table."""
    return f"\n{tuned_line(target, result)}\n{to_markdown(result.table)}"


def tuned_line(target: str, result: TuneResult) -> str:
    """``power: best LOGO MdAPE 20.00 % on 1666 rows; run ID``: the study's outcome."""
    return (
        f"{target}: best LOGO MdAPE {result.best_value:.2f} % on {result.n_rows} rows; "
        f"run {result.run_id}"
    )


def evaluated_line(target: str, result: TuneResult) -> str:
    """The tuned model's LOGO MdAPE per scenario, and where the whole table is."""
    table = result.table
    logo = table[(table["split"] == "LOGO") & (table["method"] == "catboost")]
    figures = ", ".join(f"{row.mdape:.1f} % {row.scenario}" for row in logo.itertuples())
    return f"{target}: evaluated, LOGO MdAPE {figures} (wattgpu evaluate --target {target})"


def main_job(
    settings: Settings,
    *,
    recipe: str | None = None,
    prior: str | None = None,
    data_paths: list[Path] | None = None,
    trials: int = 10,
    timeout: float | None = None,
    storage: str | None = None,
    study_name: str | None = None,
    seed: int = 0,
    register: bool = True,
    launcher_run_id: str | None = None,
    show_progress: bool = True,
    notify: Callable[[str], None] | None = None,
    verbose: bool = False,
) -> dict[str, TuneResult]:
    """The main job: validate the data once, then tune, evaluate, register every target.

    ``recipe`` defaults to the settings' (``full`` unless ``WATTGPU_RECIPE`` says); ``prior``:
    what the targets are relative to. The targets run side by side as ``tune`` runs each, on
    threads sharing the workers, each laying its groundwork while the data is validated. A
    target's new version is registered (alias ``challenger``) and, when the target has no
    production version yet, promoted to production. TTFT (``OPTIONAL_TARGETS``) is skipped when
    the data holds no measured value of it, a target whose study is complete too. ``notify``
    hears each step in one line (``verbose``: and each target's evaluation table); a progress
    bar per target's study shows on a terminal (``verbose``: the evaluation's too, and stay).

    Returns:
        The result of each target that was tuned.

    Raises:
        ConfigError: an unknown recipe or prior, an unreachable store or storage (nothing run).
        ValidationFailed: the data broke an expectation (each target's run is logged as
            FAILED with the report; nothing was trained).
        Exception: a target's error, once all have ended (``side_by_side_targets``).

    """
    say = _between_bars(notify or (lambda _line: None))
    recipe = recipe or settings.recipe
    recipe_of(TARGETS[0], recipe, prior)  # an unknown recipe or prior fails before any read
    promotion_lock.configure(settings.promotion_lease_s)
    side_by_side.warm_up()  # the workers start while the data is read
    data = load_data(settings, data_paths)

    def run_target(job: Job) -> TuneResult:
        result = run_job(
            job,
            validation,
            trials=trials,
            timeout=timeout,
            seed=seed,
            launcher_run_id=launcher_run_id,
            show_progress=show_progress,
            groundwork=groundwork[job.target].result,
            verbose=verbose,
        )
        _finish(job.target, result, register=register, verbose=verbose, say=say)
        return result

    with tempfile.TemporaryDirectory() as docs:
        validated = validate_aside(settings, data, Path(docs))  # while the stores are opened
        jobs = {}
        for target in TARGETS:
            if target in OPTIONAL_TARGETS and not measures(data, target):
                say(f"skipped {target}: the data holds no measured {SOURCE_COLUMN[target]}")
                continue
            name = f"{study_name}-{target}" if study_name else None
            with _skipped_when_complete(say):
                jobs[target] = prepare(
                    settings, target, recipe=recipe, prior=prior, data=data, data_paths=data_paths,
                    storage=storage, study_name=name, trials=trials, seed=seed, notify=say,
                )  # fmt: skip
        if not jobs:
            return {}
        with ThreadPoolExecutor(len(jobs), thread_name_prefix="wattgpu-groundwork") as early:
            groundwork = {t: early.submit(lay_groundwork, job, seed) for t, job in jobs.items()}
            validation = validated()
            say(f"validated: {validation.verdict.failures.splitlines()[-1]}")
            return side_by_side_targets(jobs, run_target)


def _finish(
    target: str, result: TuneResult, *, register: bool, verbose: bool, say: Callable[[str], None]
) -> None:
    """Say how a target's job went, then register its model (and promote a first version).

    A job stopped by Ctrl-C meanwhile registers nothing.
    """
    side_by_side.refuse_when_stopped()
    say(tuned_line(target, result))
    say(evaluated_line(target, result))
    if verbose:
        say(to_markdown(result.table))
    if register:
        version, promotion = registry.register_candidate(target, result.run_id)
        say(f"{target}: registered {registry.model_name(target)} v{version} (alias challenger)")
        kept = f"{target}: production unchanged (v{version} stays a challenger)"
        say(f"{target}: {promotion.line()}" if promotion is not None else kept)


def _between_bars(notify: Callable[[str], None]) -> Callable[[str], None]:
    """``notify``, clearing the progress bars for the line and drawing them again after it."""

    def say(line: str) -> None:
        with tqdm.external_write_mode():
            notify(line)

    return say


@contextmanager
def _skipped_when_complete(say: Callable[[str], None]) -> Iterator[None]:
    """A target whose study is complete is skipped, in one line: not an error."""
    try:
        yield
    except StudyComplete as done:
        say(str(done))


def side_by_side_targets(
    jobs: dict[str, Job], run_target: Callable[[Job], TuneResult]
) -> dict[str, TuneResult]:
    """``run_target`` of each job, on a thread of its own; each target's result.

    The threads share the worker processes: one target's steps on this process (scoring,
    logging, packaging) overlap another's fits, and no core idles while a trial waits for its
    last fold. On Ctrl-C the workers stop, and the other targets end at their next batch.

    Raises:
        Exception: the first target's error, in the jobs' order, once every target has ended.

    """
    with ThreadPoolExecutor(len(jobs), thread_name_prefix="wattgpu-target") as threads:
        running = {target: threads.submit(run_target, job) for target, job in jobs.items()}
        try:
            left = set(running.values())
            while left:
                # in short waits: Python runs a Ctrl-C's handler only when this thread runs its
                # own code, and a wait with no end could keep it from running until every
                # target had finished, registered and promoted
                left = wait(left, timeout=HEARING_S).not_done
        except KeyboardInterrupt:
            side_by_side.stop()
            raise
    return {target: future.result() for target, future in running.items()}


def prepare(
    settings: Settings,
    target: str,
    *,
    recipe: str,
    prior: str | None = None,
    data: TrainingData | None,
    data_paths: list[Path] | None,
    storage: str | None,
    study_name: str | None,
    trials: int,
    seed: int,
    notify: Callable[[str], None],
) -> Job:
    """Check what a job needs and open its study, before any run is opened or work is done.

    In order: the arguments, the tracking server (one that does not answer fails at once), the
    data files (unless ``data`` is already loaded), the Optuna storage; then the tracking store
    is opened to sweep what killed jobs of the study left running. Until the storage is open,
    nothing is written anywhere. A study's default name carries the recipe unless it is the
    full one (a fast study's trials come from another search space).

    A study that already holds ``trials`` finished trials is complete: with a finished run of
    it in the tracking store, there is nothing to do; without one (a new tracking store beside
    an old study), the job runs no trial and fits, evaluates and logs the best one's parameters.

    Raises:
        ConfigError: a bad target, recipe or trial count, an unreachable store or storage.
        StudyComplete: the study already holds ``trials`` complete trials, and the tracking
            store a finished run of it.

    """
    chosen = recipe_of(target, recipe, prior)
    if trials < 1:
        raise ConfigError(f"trials must be at least 1; got {trials}")
    tracking.configure(settings.tracking_uri)
    tracking.check_reachable(target)
    data = data or load_data(settings, data_paths)
    storage = storage or settings.optuna_storage
    kind = "" if recipe == DEFAULT_RECIPE else f"{recipe}-"
    # a study on another prior than the closed form's: its trials answer other targets
    kind += "" if chosen.prior == CLOSED_FORM else f"{chosen.prior}-"
    study_name = study_name or f"wattgpu-{target}-{kind}{data.data_hash[:10]}"
    settings.make_home_for(storage)  # whichever store variables are set, the defaults' folder
    study = tuning.open_study(storage, study_name, chosen, seed)
    _sweep(target, study, study_name, notify)
    done = tuning.finished_trials(study)
    if done >= trials and tracking.study_run(target, study_name) is not None:
        raise StudyComplete(
            f"study {study_name!r} already holds {done} finished trial(s), --trials is {trials}: "
            f"nothing to tune and no run logged (raise --trials to tune further)"
        )
    if done >= trials:  # a new tracking store beside a finished study: its model, logged here
        notify(
            f"study {study_name!r} is complete ({done} finished trial(s)) but "
            f"{tracking.store_name()} holds no finished run of it: fitting its best trial's "
            "parameters, evaluating and logging them as a run"
        )
    return Job(target, chosen, data, storage, study_name, study, workers.identity())


def _sweep(target: str, study: Any, study_name: str, notify: Callable[[str], None]) -> None:
    """Mark KILLED the runs, and FAIL the trials, that killed jobs of this study left running."""
    failed = tuning.fail_dead_trials(study, workers.is_dead)
    for run_id in tracking.kill_dead_runs(target, study_name, workers.is_dead):
        notify(f"run {run_id} of a killed {target} tuning job marked KILLED")
    if failed:
        numbers = ", ".join(str(n) for n in failed)
        notify(
            f"trial(s) {numbers} of study {study_name!r}, left running by a killed job, marked FAIL"
        )


def job_tags(job: Job, launcher_run_id: str | None) -> dict[str, str]:
    """The parent run's tags: what it is, on which data and study, and which worker runs it."""
    tags = {
        "wattgpu.kind": "tuning",
        "wattgpu.target": job.target,
        "wattgpu.data_hash": job.data.data_hash,
        "wattgpu.study": job.study_name,
        "wattgpu.worker": job.worker,
    }
    if launcher_run_id:
        tags["wattgpu.launcher_run_id"] = launcher_run_id
    return tags


def log_job(job: Job, *, trials: int, timeout: float | None, seed: int) -> None:
    """Log the job's settings and the size of its data to the active run."""
    data = job.data
    tracking.log_params(
        {
            "target": job.target,
            "recipe": job.recipe.name,
            "trials": trials,
            "timeout": timeout,
            "seed": seed,
            "study_name": job.study_name,
            "storage": _redact(job.storage),
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


def check_validation(validation: Validation, run_id: str) -> None:
    """Log the data's validation to the active run.

    Raises:
        ValidationFailed: the data broke an expectation; nothing is trained.

    """
    verdict = validation.verdict
    tracking.log_text(verdict.report, "validation/report.txt")
    tracking.log_directory(validation.docs, "validation/data_docs")
    tracking.set_tags({"wattgpu.validation": "passed" if verdict.ok else "failed"})
    if not verdict.ok:
        raise ValidationFailed(
            f"{verdict.error}; nothing was trained (report logged to run {run_id}; "
            f"`wattgpu validate` shows every failure)"
        )


def log_rows(rows: pd.DataFrame) -> None:
    """Log the size of the training rows to the active run."""
    tracking.log_metrics(
        {
            "rows_train": len(rows),
            "gpus_train": rows["gpu"].nunique(),
            "llms_train": rows["model"].nunique(),
        }
    )


def search(
    job: Job,
    rows: pd.DataFrame,
    *,
    trials: int,
    timeout: float | None,
    seed: int,
    progress: bool,
    best: Any = None,
    ready: PreparedSplit | None = None,
    leave: bool = True,
) -> Any:
    """Run the Optuna study, each trial a nested run; log and return the study.

    ``best`` (a ``tuning.BestPredictions``), when given, keeps the best trial's predictions;
    ``ready``, when given, are the study's folds already prepared (``lay_groundwork``).
    ``progress``: a bar on a terminal (none in a log), which stays when done if ``leave``.
    """
    bar = tqdm(
        total=trials,
        desc=f"tune {job.target}",
        unit="trial",
        disable=None if progress else True,
        leave=leave,
    )
    study = tuning.run_study(
        job.study,
        job.recipe,
        rows,
        trials=trials,
        timeout=timeout,
        seed=seed,
        log_trial=tracking.log_trial,
        on_trial_done=lambda: bar.update(1),
        worker=job.worker,
        best=best,
        prepare=refit_for(job.target, job.recipe.prior),
        ready=ready,
    )
    bar.close()
    tracking.log_params({f"best_{k}": v for k, v in tuning.best_params(study).items()})
    tracking.log_metrics(
        {
            "best_LOGO_mdape": study.best_value,
            "trials_completed": tuning.completed_trials(study),
            "trials_pruned": tuning.finished_trials(study) - tuning.completed_trials(study),
        }
    )
    return study


def evaluate_tuned(
    recipe: Recipe,
    rows: pd.DataFrame,
    params: dict[str, Any],
    *,
    seed: int,
    progress: bool,
    known: dict[str, pd.DataFrame] | None = None,
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Evaluate ``params`` on every split: the table and the out-of-fold predictions per split.

    Nothing is logged. Every fold's analytical prior (constants and engine floors) is refitted
    on its training side (``serving.prior.refit_for``), as in the study. ``known``: out-of-fold
    predictions of ``params`` already made so (``evaluation.evaluate``).
    """
    bar = tqdm(
        total=len(SPLITS),
        desc=f"evaluate {recipe.target}",
        unit="split",
        disable=None if progress else True,
    )
    table, oof = evaluate(
        recipe,
        rows,
        params,
        seed=seed,
        progress=lambda: bar.update(1),
        known=known,
        prepare=refit_for(recipe.target, recipe.prior),
    )
    bar.close()
    return table, oof


def check_held_out(
    recipe: Recipe,
    rows: pd.DataFrame,
    table: pd.DataFrame,
    oof: dict[str, pd.DataFrame],
    *,
    seed: int,
) -> Assessment:
    """The evaluation, and the intervals checked on the recipe's held-out groups (no logging)."""
    folds = {
        split: fold_numbers(
            len(rows), list(split_indices(rows, TABLE_FOLDS[split], seed=seed, folds=recipe.folds))
        )
        for split in oof
        if split in recipe.interval_checks
    }
    return Assessment(table, oof, check_intervals(recipe, rows, oof, folds, seed=seed))


def log_assessment(target: str, assessment: Assessment) -> None:
    """Log the evaluation table, its metrics, the out-of-fold predictions and their plots."""
    table, oof = assessment.table, assessment.oof
    tracking.log_frame(table, tracking.EVALUATION_CSV)
    tracking.log_text(to_markdown(table), "evaluation/evaluation.md")
    tracking.log_metrics(_metrics_from_table(table))
    for split, predictions in oof.items():
        tracking.log_frame(predictions, f"evaluation/oof_{split}.csv")
    tracking.log_metrics(interval_metrics(assessment.intervals))
    tracking.log_frame(assessment.intervals.cells, tracking.INTERVAL_CELLS_CSV)
    tracking.log_figure(
        plots.predicted_vs_measured(oof["LOGO"], target, "LOGO"),
        "plots/predicted_vs_measured_LOGO.png",
    )
    tracking.log_figure(plots.gpu_ranking(oof["LOGO"], target), "plots/gpu_ranking_LOGO.png")


def fit_served(
    recipe: Recipe, rows: pd.DataFrame, params: dict[str, Any], seed: int
) -> Callable[[], models.Regressor]:
    """Start fitting the served model on every row, on a worker; the call that waits for it.

    One CatBoost thread, as every fit on a worker (the answers do not depend on the threads).
    """
    return side_by_side.aside(models.fit, recipe, rows, params, seed, 1)  # 1: threads


def fit_bounds(
    recipe: Recipe, rows: pd.DataFrame, oof: dict[str, pd.DataFrame], seed: int
) -> Callable[[], IntervalModel]:
    """Start fitting the served interval model on a worker, from the out-of-fold residuals."""
    rows = with_held_out_analogs(rows, oof)  # the difficulty model sees each row's analogs
    return side_by_side.aside(fit_interval, recipe, rows, kind_residuals(oof), COVERAGE, seed)


def package(
    job: Job,
    rows: pd.DataFrame,
    params: dict[str, Any],
    assessment: Assessment,
    *,
    served: Callable[[], models.Regressor],
    bounds: Callable[[], IntervalModel],
    simulated_prior: dict[str, Any] | None = None,
) -> str:
    """Log the served model and its intervals as a pyfunc; return its URI.

    ``served`` and ``bounds`` wait for their fits on every row, started on the workers while the
    model was assessed (``fit_served``, ``fit_bounds``). ``simulated_prior``: its terms, which
    the served model applies to each query, on that prior. A job stopped by Ctrl-C packages
    nothing.
    """
    side_by_side.refuse_when_stopped()
    model = served()
    importance = model.feature_importance()
    tracking.log_figure(
        plots.feature_importance(list(importance.index), importance.to_numpy()),
        "plots/feature_importance.png",
    )
    intervals = bounds()
    card = model_card(job, rows, params, assessment, intervals, simulated_prior or {})
    tracking.log_dict(card.to_dict(), "model_metadata.json")
    with _PACKAGING:
        uri = pyfunc.log_pyfunc(model, intervals, job.data.catalog, card)
    tracking.set_tags({"wattgpu.model_uri": uri})
    tracking.set_tags({"wattgpu.machine": platform.platform()})
    return uri


def model_card(
    job: Job,
    rows: pd.DataFrame,
    params: dict[str, Any],
    assessment: Assessment,
    bounds: IntervalModel,
    simulated_prior: dict[str, Any] | None = None,
) -> ModelCard:
    """What the served model carries about itself (``model_metadata.json`` and the pyfunc).

    Its ``logo_mdape`` is the registry's gate figure (``gate.logo_mdape``) of the same
    out-of-fold LOGO predictions, not the best trial of the search: one number, one name.
    """
    table = assessment.table
    logo = table[(table["split"] == "LOGO") & (table["method"] == "catboost")]
    logo_intervals = assessment.intervals.by_split.get("LOGO", {}).get("all", {})
    return ModelCard(
        target=job.target,
        domain=training_domain(rows),
        params=params,
        data_hash=job.data.data_hash,
        logo_mdape=gate.logo_mdape(assessment.oof["LOGO"]),
        logo_mdape_by_scenario=dict(
            zip(logo["scenario"], logo["mdape"].astype(float), strict=True)
        ),
        interval_coverage_nominal=COVERAGE,
        interval_coverage_held_out_gpu=logo_intervals.get("interval_coverage", math.nan),
        interval_width_held_out_gpu=logo_intervals.get("interval_width", math.nan),
        interval_held_out=assessment.intervals.by_split,
        interval_not_validated=tuple(not_validated_notes(bounds)),
        wattgpu_version=__version__,
        simulated_prior=simulated_prior or {},
        jitter=_fitted_jitter(rows),
        tail_ratios=_fitted_tail_ratios(rows, job.target),
    )


def _fitted_jitter(rows: pd.DataFrame) -> dict[str, Any]:
    """The step jitter of the training rows' one-user runs, as the card keeps it ({}: none)."""
    jitter = fit_jitter(rows)
    return {} if jitter is None else jitter.to_dict()


def _fitted_tail_ratios(rows: pd.DataFrame, target: str) -> dict[str, Any]:
    """The measured tail ratios of a target that answers from them, as the card keeps them."""
    if target not in RATIO_TARGETS:
        return {}
    ratios = fit_tail_ratios(rows, target)
    return {} if ratios is None else ratios.to_dict()


# The prefix of each method's metrics; any other method is the target's no-learning baseline.
METRIC_PREFIX = {
    "catboost": "",
    NEAREST_METHOD: "nearest_",
    MODEL_ON_NEAREST_ROWS: "nearest_rows_",
    "catboost (median-ITL rows)": "median_itl_rows_",
    "catboost (other-ITL rows)": "other_itl_rows_",
    PRIOR_METHOD: "prior_",
}


def _metrics_from_table(table: pd.DataFrame) -> dict[str, float]:
    metrics = {}
    for record in table.to_dict("records"):
        prefix = METRIC_PREFIX.get(record["method"], "baseline_")
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


def interval_metrics(check: IntervalCheck) -> dict[str, float]:
    """The held-out intervals' figures as run metrics (``interval_coverage_LOGO_server``, ...)."""
    return {
        f"{name}_{split}_{scenario}": value
        for split, by_scenario in check.by_split.items()
        for scenario, figures in by_scenario.items()
        for name, value in figures.items()
        if np.isfinite(value)
    }
