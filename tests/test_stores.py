"""One home for the stores, the same from any directory; a missing store said in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from wattgpu.cli import cli
from wattgpu.config import MLFLOW_JOB_RUNNERS, load_settings

READERS = [
    ["models"],
    ["evaluate", "--target", "power"],
    ["promote", "--target", "power", "--version", "1", "--to", "production"],
    ["register", "--target", "itl"],
    ["serve", "--target", "power"],
    [
        "predict",
        "--gpu",
        "L4",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--scenario",
        "offline",
    ],
    [
        "recommend",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--requests-per-day",
        "1000",
        "--itl-slo-ms",
        "80",
    ],
]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    for variable in ("MLFLOW_TRACKING_URI", "WATTGPU_OPTUNA_STORAGE", "WATTGPU_DATA_DIR"):
        monkeypatch.delenv(variable, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("WATTGPU_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


def test_the_stores_default_to_the_home_whatever_the_working_directory(tmp_path, monkeypatch):
    settings = load_settings({"WATTGPU_HOME": str(tmp_path / "h")})
    assert settings.tracking_uri == f"sqlite:///{tmp_path}/h/mlflow.db"
    assert settings.optuna_storage == f"sqlite:///{tmp_path}/h/optuna.db"
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert load_settings({}).tracking_uri == f"sqlite:///{tmp_path}/user/.wattgpu/mlflow.db"
    # a variable still wins over the home
    assert load_settings({"MLFLOW_TRACKING_URI": "sqlite:///x.db"}).tracking_uri == "sqlite:///x.db"


def test_ui_prints_the_stores_as_variables(home):
    result = CliRunner().invoke(cli, ["ui", "--print-only", "true"])
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        f"MLFLOW_TRACKING_URI=sqlite:///{home}/mlflow.db",
        f"WATTGPU_OPTUNA_STORAGE=sqlite:///{home}/optuna.db",
    ]


@pytest.mark.parametrize(("given", "started_with"), [(None, "false"), ("true", "true")])
def test_ui_starts_mlflow_without_its_job_runners_unless_asked(
    home, monkeypatch, given, started_with
):
    # the process is replaced (os.execv), which a test cannot let happen: the call is recorded;
    # that MLflow's server then starts no runner is checked on a real one (test_postgres_workers)
    if given is None:
        monkeypatch.delenv(MLFLOW_JOB_RUNNERS, raising=False)
    else:
        monkeypatch.setenv(MLFLOW_JOB_RUNNERS, given)
    started = []

    def execv(path, argv):
        started.append((argv, os.environ.get(MLFLOW_JOB_RUNNERS)))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", execv)
    result = CliRunner().invoke(cli, ["ui", "--port", "5999"])
    assert result.exit_code == 0, result.output
    ((argv, runners),) = started
    assert argv[1:6] == ["-m", "mlflow", "ui", "--host", "127.0.0.1"]
    assert runners == started_with


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_a_reading_command_names_the_missing_store_and_leaves_nothing(home, tmp_path, args):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: no models yet: the store {home}/mlflow.db does not exist; run `wattgpu main` to "
        "train and register them, or point MLFLOW_TRACKING_URI or WATTGPU_HOME at the store that "
        "has them\n"
    )
    assert list(tmp_path.iterdir()) == []  # no home, no ./mlflow.db, no ./mlruns


@pytest.mark.slow
def test_tune_creates_the_default_optuna_store_where_only_mlflow_is_set(tmp_path, monkeypatch):
    """No home yet and only MLFLOW_TRACKING_URI set: the Optuna store's folder is made on use."""
    from wattgpu.config import SHIPPED_DATA_DIR
    from wattgpu.data.catalog import Catalog
    from wattgpu.modeling.physical.synthetic import synthesize

    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    rows = synthesize(catalog, seed=2)
    data = tmp_path / "small.csv"
    three = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5"]
    rows[rows["gpu"].isin(three)].to_csv(data, index=False)
    home = tmp_path / "user" / ".wattgpu-home"
    for variable in ("WATTGPU_OPTUNA_STORAGE", "WATTGPU_DATA_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("WATTGPU_HOME", str(home))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'elsewhere' / 'mlflow.db'}")
    args = ["tune", "--target", "power", "--trials", "1", "--data", str(data)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert (home / "optuna.db").is_file()
    assert (tmp_path / "elsewhere" / "mlflow.db").is_file()
    assert not (home / "mlflow.db").exists()  # MLflow's store is the one the variable names


def test_a_server_database_that_lost_the_creation_race_is_opened_again():
    from wattgpu.lifecycle import store_creation

    url = "postgresql+psycopg2://wattgpu@db.example/mlflow"
    calls = []

    def open_store() -> str:
        calls.append(1)
        if len(calls) == 1:  # what psycopg2 says when another job created the table first
            raise RuntimeError('(psycopg2.errors.DuplicateTable) relation "metrics" already exists')
        return "opened"

    assert store_creation.opened_once(url, open_store) == "opened"
    assert len(calls) == 2

    def refused() -> str:
        calls.append(1)
        raise RuntimeError('FATAL: password authentication failed for user "wattgpu"')

    with pytest.raises(RuntimeError, match="password authentication failed"):
        store_creation.opened_once(url, refused)
    assert len(calls) == 3  # not retried


def test_an_sqlite_store_is_opened_under_a_lock_beside_it_and_no_folder_is_made(tmp_path):
    from wattgpu.lifecycle import store_creation

    database = tmp_path / "optuna.db"
    seen = store_creation.opened_once(f"sqlite:///{database}", lambda: sorted(tmp_path.iterdir()))
    assert seen == [tmp_path / "optuna.db.lock"]
    # a folder that is not there stays a user's error (SQLite's, when it opens the file)
    missing = tmp_path / "no" / "such" / "optuna.db"
    assert store_creation.opened_once(f"sqlite:///{missing}", lambda: "opened") == "opened"
    assert not (tmp_path / "no").exists()


def test_the_promotion_lease_is_a_setting_and_a_bad_one_is_refused_in_one_line():
    from wattgpu.errors import ConfigError

    assert load_settings({}).promotion_lease_s == 30.0
    assert load_settings({"WATTGPU_PROMOTION_LEASE_S": "2.5"}).promotion_lease_s == 2.5
    for bad in ("soon", "0", "-3", "inf"):
        with pytest.raises(ConfigError) as refused:
            load_settings({"WATTGPU_PROMOTION_LEASE_S": bad})
        assert str(refused.value) == (
            f"WATTGPU_PROMOTION_LEASE_S must be a positive number of seconds; got {bad!r}"
        )
