"""Every documented setting does what the docs say; errors on outputs are one line, exit 1.

One real `wattgpu tune` process runs with every variable pointing into a temporary folder and
its working directory elsewhere: what it writes must land where the settings say, and nothing in
the working directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import mlflow
import optuna
import pytest
from click.testing import CliRunner

from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR, load_settings
from wattgpu.lifecycle import registry, tracking
from wattgpu.modeling.physical.synthetic import synthesize

pytestmark = pytest.mark.slow
# three GPUs: the job is about where things land; each GPU more is one LOGO fold more
GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5"]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, catalog) -> dict[str, Path | str]:
    """`wattgpu tune` (1 trial) run with the three settings only, then registered and promoted."""
    root = tmp_path_factory.mktemp("settings")
    data_dir = root / "data"
    (data_dir / "measurements").mkdir(parents=True)
    for name in ("gpus.csv", "llms.csv"):
        shutil.copy(SHIPPED_DATA_DIR / name, data_dir / name)
    rows = synthesize(catalog, seed=3)
    rows[rows["gpu"].isin(GPUS)].to_csv(data_dir / "measurements" / "small.csv", index=False)
    workdir = root / "work"
    workdir.mkdir()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'store' / 'mlflow.db'}",
        "WATTGPU_OPTUNA_STORAGE": f"sqlite:///{root / 'studies.db'}",
        "WATTGPU_DATA_DIR": str(data_dir),
    }
    (root / "store").mkdir()
    command = [sys.executable, "-m", "wattgpu", "tune", "--target", "power", "--trials", "1"]
    done = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    tracking.configure(env["MLFLOW_TRACKING_URI"])
    registry.promote("power", registry.register("power"), "production")
    return {"root": root, "workdir": workdir, "env": env, "data_dir": data_dir}


def test_tune_writes_where_the_settings_say_and_nothing_in_the_working_directory(tuned):
    root, env = tuned["root"], tuned["env"]
    assert list(tuned["workdir"].iterdir()) == []  # no ./mlflow.db, ./optuna.db, ./mlruns
    # WATTGPU_OPTUNA_STORAGE: the study lives there
    studies = optuna.get_all_study_summaries(env["WATTGPU_OPTUNA_STORAGE"])
    assert [s.n_trials for s in studies] == [1]
    # MLFLOW_TRACKING_URI: the run and its artifacts live beside that store
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(
        experiment_names=["wattgpu-power"], filter_string="tags.`wattgpu.kind` = 'tuning'"
    )
    assert list(runs["status"]) == ["FINISHED"]
    assert (root / "store" / "mlruns").is_dir()
    # WATTGPU_DATA_DIR: the measurements came from its measurements/ folder
    assert runs.iloc[0]["params.data_files"] == str(tuned["data_dir"] / "measurements/small.csv")


def test_optuna_storage_variable_is_the_default_storage(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WATTGPU_OPTUNA_STORAGE", "sqlite:////no/such/dir/studies.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(SHIPPED_DATA_DIR))
    result = CliRunner().invoke(cli, ["tune", "--target", "power", "--trials", "1"])
    assert result.exit_code == 1
    assert "cannot open Optuna storage 'sqlite:////no/such/dir/studies.db'" in result.output
    assert not (tmp_path / "optuna.db").exists()


def test_data_dir_variable_is_where_the_catalogues_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(tmp_path / "elsewhere"))
    result = CliRunner().invoke(cli, ["validate"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert str(tmp_path / "elsewhere") in result.output


def test_tracking_uri_variable_is_the_store_commands_read(tuned, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tuned["env"]["MLFLOW_TRACKING_URI"])
    listed = CliRunner().invoke(cli, ["models", "--target", "power"])
    assert listed.exit_code == 0 and "production" in listed.output
    assert load_settings().tracking_uri == tuned["env"]["MLFLOW_TRACKING_URI"]


QUERY = ["predict", "--gpu", "L4", "--model", "Qwen/Qwen2.5-7B-Instruct", "--scenario", "offline"]


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("missing/out.csv", "Error: Cannot save file into a non-existent directory: '{dir}'"),
        (".", "Error: cannot use {path}: Is a directory"),
    ],
)
def test_predict_output_errors_are_one_line(tuned, tmp_path, monkeypatch, output, expected):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tuned["env"]["MLFLOW_TRACKING_URI"])
    path = tmp_path / output
    result = CliRunner().invoke(cli, [*QUERY, "--target", "power", "--output", str(path)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [expected.format(dir=path.parent, path=path)], (
        result.output
    )


def test_synthesize_output_to_an_unwritable_path_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = subprocess.run(
        [sys.executable, "-m", "wattgpu", "--data-dir", str(SHIPPED_DATA_DIR), "data", "synthesize"]
        + ["--output", str(blocker / "out.csv")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: cannot create folder {blocker}: a file of that name is in the way"
    ]


def test_an_unreachable_tracking_server_is_one_line_not_an_empty_registry(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free: nothing listens there
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"}
    env["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    for command in (
        ["models"],
        ["promote", "--target", "power", "--version", "1", "--to", "staging"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "wattgpu", *command],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 1, done.stdout
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"Error: API request to http://127.0.0.1:{port}/api/"
        ), done.stderr
