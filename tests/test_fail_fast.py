"""A tuning job with a wrong setting fails before any work, in one line, and logs nothing.

``pipeline.prepare`` reaches the tracking store and opens the Optuna storage before a run is
opened, the data validated or a model trained.
"""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.lifecycle import pipeline, tuning


@pytest.fixture
def no_work(monkeypatch):
    """Make validation and the study fail loudly: a job that fails fast never reaches them."""
    calls = []

    def forbidden(name):
        def call(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"{name} ran")

        return call

    monkeypatch.setattr(pipeline, "validate", forbidden("validate"))
    monkeypatch.setattr(tuning, "run_study", forbidden("run_study"))
    return calls


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free once closed: nothing listens there


def _tune(tmp_path, monkeypatch, tracking_uri: str, storage: str):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(SHIPPED_DATA_DIR))
    args = ["tune", "--target", "power", "--trials", "1", "--storage", storage]
    return CliRunner().invoke(cli, args)


@pytest.mark.parametrize(
    "storage",
    [
        "postgresql+psycopg2://nobody@127.0.0.1:{port}/none",
        "sqlite:///{tmp}/no/such/folder/studies.db",
    ],
    ids=["unreachable-postgresql", "sqlite-in-a-missing-folder"],
)
def test_a_bad_storage_fails_in_one_line_and_leaves_no_run(tmp_path, monkeypatch, no_work, storage):
    storage = storage.format(port=_closed_port(), tmp=tmp_path)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = _tune(tmp_path, monkeypatch, store, storage)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: cannot open Optuna storage {storage!r}")
    assert no_work == []
    assert not (tmp_path / "mlflow.db").exists()  # no run, not even a FAILED one
    assert not (tmp_path / "no").exists()


def test_an_unreachable_tracking_server_fails_before_any_work(tmp_path, monkeypatch, no_work):
    # No retries from MLflow's own client: were the store reached through it, the job would
    # still fail at once, but after opening the storage, and the checks below would tell.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"http://127.0.0.1:{_closed_port()}"
    studies = tmp_path / "studies.db"
    result = _tune(tmp_path, monkeypatch, uri, f"sqlite:///{studies}")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: cannot reach the MLflow tracking server {uri!r}")
    assert lines[0].endswith("Connection refused")
    assert no_work == []  # no validation, no study
    assert not studies.exists()  # the storage was not even opened
    assert "validation" not in result.output.lower()
