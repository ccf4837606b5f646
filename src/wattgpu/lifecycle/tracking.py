"""MLflow tracking: experiments, parent and nested runs, artifacts (one of two MLflow importers)."""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient
from mlflow.utils.credentials import get_default_host_creds
from mlflow.utils.rest_utils import http_request

from wattgpu.errors import ConfigError, ModelNotFound
from wattgpu.lifecycle import store_creation
from wattgpu.lifecycle.workers import HEARTBEAT_S
from wattgpu.modeling.physical.targets import TARGETS

EXPERIMENTS = {target: f"wattgpu-{target}" for target in TARGETS}
EVALUATION_CSV = "evaluation/evaluation.csv"
# Interval coverage and width on each held-out GPU and scenario (leave-one-GPU-out).
INTERVAL_CELLS_CSV = "evaluation/intervals_held_out.csv"
HEARTBEAT_TAG = "wattgpu.heartbeat"


def configure(tracking_uri: str, *, must_exist: bool = False) -> None:
    """Point MLflow at ``tracking_uri`` and keep it from writing telemetry under ``~/.config``.

    Args:
        tracking_uri: the store.
        must_exist: the command only reads (predict, models, promote, ...): an SQLite store that
            is not there is an error naming the file and what to run, rather than an empty
            database left behind. Otherwise the store's folder is created.

    Raises:
        ModelNotFound: ``must_exist`` and the SQLite file does not exist.

    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    database = sqlite_file(tracking_uri)
    if database is not None and must_exist and not database.is_file():
        raise ModelNotFound(
            f"no models yet: the store {database} does not exist; run `wattgpu main` to train "
            "and register them, or point MLFLOW_TRACKING_URI or WATTGPU_HOME at the store "
            "that has them"
        )
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(tracking_uri)


def sqlite_file(uri: str) -> Path | None:
    """The database file of an ``sqlite:///`` URI (``None`` for any other store)."""
    return store_creation.sqlite_file(uri)


_OPENED: set[str] = set()


def open_store() -> None:
    """Open the tracking and registry stores once per process, creating their tables if needed.

    MLflow creates its tables when a store is first opened, and two jobs doing that at once on
    a fresh database make one fail (``table ... already exists``): the opening is serialised
    (``store_creation.opened_once``). Both stores share one database; a tracking server creates
    its own tables, so nothing is done for one.
    """
    uri = mlflow.get_tracking_uri()
    if uri in _OPENED or not (sqlite_file(uri) or store_creation.is_server_database(uri)):
        return

    def touch() -> None:
        mlflow.search_experiments(max_results=1)
        MlflowClient().search_registered_models(max_results=1)

    store_creation.opened_once(uri, touch)
    _OPENED.add(uri)


def store_name() -> str:
    """Where MLflow looks now, for messages: the SQLite file, else the URI."""
    uri = mlflow.get_tracking_uri()
    database = sqlite_file(uri)
    return str(database) if database is not None else uri


# How long a tracking server may take to answer the first request of a job.
PROBE_TIMEOUT_S = 10.0


def check_reachable(target: str) -> None:
    """Fail at once when the tracking server does not answer (a store that is no server: no-op).

    The server is asked once, without the retries that MLflow's own client makes for minutes
    when nothing answers; any answer, even an error status, shows it is there. Nothing is
    written: a store is opened (and an SQLite one created) by the job's first real request.

    Raises:
        ConfigError: the server does not answer.

    """
    uri = mlflow.get_tracking_uri()
    if not uri.startswith(("http://", "https://")):
        return
    try:
        http_request(
            get_default_host_creds(uri),
            "/api/2.0/mlflow/experiments/get-by-name",
            "GET",
            max_retries=0,
            timeout=PROBE_TIMEOUT_S,
            raise_on_status=False,
            params={"experiment_name": EXPERIMENTS[target]},
        )
    except mlflow.exceptions.MlflowException as exc:
        raise ConfigError(
            f"cannot reach the MLflow tracking server {uri!r} (is it running? "
            f"MLFLOW_TRACKING_URI says where it is): {_reason(exc.message)}"
        ) from None


def _reason(message: str) -> str:
    """The last cause of a network error (e.g. "[Errno 111] Connection refused"), on one line."""
    found = re.findall(r"\[Errno -?\d+\] [^'\")]+", message)
    return found[-1] if found else message.splitlines()[0]


def experiment_id(target: str) -> str:
    """The id of the target's experiment, created on first use."""
    return _experiment_id(EXPERIMENTS[target])


def _experiment_id(name: str) -> str:
    """The id of experiment ``name``, created on first use (safe when workers race to create it)."""
    try:
        open_store()
        found = mlflow.get_experiment_by_name(name)
        if found:
            return found.experiment_id
        try:
            return mlflow.create_experiment(name, _artifact_root())
        except mlflow.exceptions.MlflowException:
            # another worker created it between our look-up and our create
            found = mlflow.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id
    except mlflow.exceptions.MlflowException as exc:
        raise ConfigError(
            f"cannot open the MLflow tracking store {mlflow.get_tracking_uri()!r}: {exc.message}"
        ) from None


def _artifact_root() -> str | None:
    """For an SQLite store, artifacts go to ``mlruns/`` beside the database file.

    MLflow's own default is ``./mlruns`` of whatever directory the experiment happened to be
    created from; tying it to the database keeps a store and its artifacts together.
    """
    database = sqlite_file(mlflow.get_tracking_uri())
    return None if database is None else (database.parent / "mlruns").as_uri()


@contextmanager
def parent_run(target: str, run_name: str, tags: dict[str, str]) -> Iterator[str]:
    """Start the job's parent run in the target's experiment; yields its run id.

    The run ends FAILED when the block raises, FINISHED otherwise.
    """
    with mlflow.start_run(experiment_id=experiment_id(target), run_name=run_name, tags=tags) as run:
        with _heartbeat(run.info.run_id):
            yield run.info.run_id


@contextmanager
def _heartbeat(run_id: str) -> Iterator[None]:
    """Stamp ``HEARTBEAT_TAG`` (Unix time) on the run every ``HEARTBEAT_S`` while the block runs.

    A job on another machine tells this run's worker dead from a stale beat (``kill_dead_runs``).
    """
    client = MlflowClient()
    stop = threading.Event()

    def beat() -> None:
        while True:
            try:
                client.set_tag(run_id, HEARTBEAT_TAG, f"{time.time():.0f}")
            except Exception:  # noqa: BLE001 - a missed beat is retried; the job must go on
                pass
            if stop.wait(HEARTBEAT_S):
                return

    thread = threading.Thread(target=beat, name="wattgpu-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def kill_dead_runs(
    target: str, study_name: str, is_dead: Callable[[str, float | None], bool]
) -> list[str]:
    """Mark KILLED the runs of ``study_name`` still RUNNING whose worker is dead; return their ids.

    A killed job cannot end its own run; the next job of the same study does it, for the
    parent run and for any of its trial runs left open. ``is_dead(worker, last_beat)`` judges
    the run's tags ``wattgpu.worker`` and ``HEARTBEAT_TAG``.
    """
    experiment = experiment_id(target)
    running = "attributes.status = 'RUNNING'"
    parents = mlflow.search_runs(
        experiment_ids=[experiment],
        filter_string=f"tags.`wattgpu.study` = '{study_name}' and {running}",
        output_format="list",
    )
    client = MlflowClient()
    killed = []
    for run in parents:
        worker = run.data.tags.get("wattgpu.worker", "")
        beat = run.data.tags.get(HEARTBEAT_TAG)
        if not is_dead(worker, float(beat) if beat else None):
            continue
        children = mlflow.search_runs(
            experiment_ids=[experiment],
            filter_string=f"tags.`mlflow.parentRunId` = '{run.info.run_id}' and {running}",
            output_format="list",
        )
        for child in children:
            client.set_terminated(child.info.run_id, "KILLED")
        client.set_tag(run.info.run_id, "wattgpu.killed", f"its worker {worker} was found dead")
        client.set_terminated(run.info.run_id, "KILLED")
        killed.append(run.info.run_id)
    return killed


def log_trial(number: int, params: dict[str, Any], metrics: dict[str, float]) -> None:
    """Log one Optuna trial as a run nested in the active parent run."""
    # The parent's experiment, explicitly: under `mlflow run`, MLFLOW_EXPERIMENT_ID would win.
    parent = mlflow.active_run()
    experiment = parent.info.experiment_id if parent else None
    with mlflow.start_run(run_name=f"trial-{number:03d}", nested=True, experiment_id=experiment):
        mlflow.log_params(params)
        mlflow.log_metrics({k: v for k, v in metrics.items() if pd.notna(v)})
        mlflow.set_tag("optuna.trial", str(number))


def log_params(params: dict[str, Any]) -> None:
    """Log parameters of the active run (values cut to MLflow's length limit)."""
    mlflow.log_params({k: str(v)[:6000] for k, v in params.items()})


def log_metrics(metrics: dict[str, float]) -> None:
    """Log the finite metrics of the active run."""
    mlflow.log_metrics({k: float(v) for k, v in metrics.items() if pd.notna(v)})


def set_tags(tags: dict[str, str]) -> None:
    """Tag the active run."""
    mlflow.set_tags(tags)


def log_text(text: str, artifact_file: str) -> None:
    """Store text as an artifact of the active run."""
    mlflow.log_text(text, artifact_file)


def log_frame(frame: pd.DataFrame, artifact_file: str) -> None:
    """Store a DataFrame as a CSV artifact of the active run."""
    mlflow.log_text(frame.to_csv(index=False), artifact_file)


def log_dict(data: dict[str, Any], artifact_file: str) -> None:
    """Store a dict as a JSON artifact of the active run."""
    mlflow.log_dict(data, artifact_file)


def log_figure(figure: Any, artifact_file: str) -> None:
    """Store a matplotlib figure as an image artifact of the active run."""
    mlflow.log_figure(figure, artifact_file)


def log_directory(path: Path, artifact_path: str) -> None:
    """Store a folder (e.g. Data Docs) as artifacts of the active run."""
    mlflow.log_artifacts(str(path), artifact_path)


def tag_run(run_id: str, tags: dict[str, str]) -> None:
    """Tag a run that is not the active one (e.g. the run ``mlflow run`` opened for us)."""
    client = MlflowClient()
    for key, value in tags.items():
        client.set_tag(run_id, key, value)


def latest_parent_run(target: str) -> str:
    """The id of the newest finished parent (tuning) run of ``target``."""
    runs = mlflow.search_runs(
        experiment_ids=[experiment_id(target)],
        filter_string="tags.`wattgpu.kind` = 'tuning' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
        output_format="list",
    )
    if not runs:
        raise ModelNotFound(
            f"no finished tuning run for target {target!r} in {store_name()}; "
            f"run `wattgpu main` or `wattgpu tune --target {target}` first"
        )
    return runs[0].info.run_id


def study_run(target: str, study_name: str) -> str | None:
    """The id of the newest finished parent run of the Optuna study ``study_name``, or None."""
    runs = mlflow.search_runs(
        experiment_ids=[experiment_id(target)],
        filter_string=(
            "tags.`wattgpu.kind` = 'tuning' and attributes.status = 'FINISHED' and "
            f"tags.`wattgpu.study` = '{study_name}'"
        ),
        order_by=["attributes.start_time DESC"],
        max_results=1,
        output_format="list",
    )
    return runs[0].info.run_id if runs else None


def get_run(run_id: str) -> Any:
    """The run with ``run_id``, or ``ModelNotFound``."""
    try:
        return MlflowClient().get_run(run_id)
    except mlflow.exceptions.MlflowException:
        raise ModelNotFound(
            f"run {run_id!r} does not exist in {mlflow.get_tracking_uri()}"
        ) from None


def load_evaluation(run_id: str) -> pd.DataFrame:
    """The evaluation table logged by a tuning run."""
    return load_frame(run_id, EVALUATION_CSV)


def load_frame(run_id: str, artifact_file: str) -> pd.DataFrame:
    """A CSV artifact of a run (e.g. the evaluation table), or ``ModelNotFound`` naming it."""
    get_run(run_id)
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = mlflow.artifacts.download_artifacts(
                run_id=run_id, artifact_path=artifact_file, dst_path=folder
            )
        except (mlflow.exceptions.MlflowException, OSError):
            raise ModelNotFound(f"run {run_id!r} has no {artifact_file}") from None
        return pd.read_csv(path)


RECOMMEND_EXPERIMENT = "wattgpu-recommend"


@contextmanager
def recommendation_run(run_name: str, tags: dict[str, str]) -> Iterator[str]:
    """Start a run in experiment ``wattgpu-recommend`` (created on first use); yields its id."""
    experiment = _experiment_id(RECOMMEND_EXPERIMENT)
    with mlflow.start_run(experiment_id=experiment, run_name=run_name, tags=tags) as run:
        yield run.info.run_id
