"""Real MLflow (SQLite store in tmp), Optuna, CatBoost and GE — and the real `mlflow run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from conftest import REPO, TEST_RECIPE
from mlflow.tracking import MlflowClient

from wattgpu.config import SHIPPED_DATA_DIR, Settings
from wattgpu.errors import ValidationFailed
from wattgpu.lifecycle import pipeline
from wattgpu.modeling.physical.synthetic import synthesize

pytestmark = pytest.mark.slow

# Three GPUs (two LLMs measured on two of them, so a GPU ranking exists): every job here fits
# and evaluates one LOGO fold per GPU
# (a one-trial `wattgpu main`: 18.3 s on five GPUs, 14.1 s on three; 2026-12-06, shared 2-core)
GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA H100 SXM5"]


@pytest.fixture(scope="module")
def small_data(tmp_path_factory, catalog) -> Path:
    """Generated rows of three GPUs (about 160 rows): enough for LOGO, fast to fit."""
    # seed 2: its draw puts some LLMs on two or more of these GPUs, so a GPU ranking exists
    rows = synthesize(catalog, seed=2)
    path = tmp_path_factory.mktemp("data") / "small.csv"
    rows[rows["gpu"].isin(GPUS)].to_csv(path, index=False)
    return path


def experiment_runs(uri: str, name: str) -> pd.DataFrame:
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.get_experiment_by_name(name)
    assert experiment is not None, f"no experiment {name}"
    return mlflow.search_runs([experiment.experiment_id])


def test_mlflow_run_tune_entry_point(tmp_path, small_data):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "run",
        str(REPO),
        "-e",
        "tune",
        "--env-manager",
        "local",
        "-P",
        "target=power",
        "-P",
        "trials=1",  # the MLproject's default is 10: one nested run says the value arrived
        "-P",
        f"data={small_data}",
        "-P",
        f"storage=sqlite:///{tmp_path / 'optuna.db'}",
    ]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]

    runs = experiment_runs(uri, "wattgpu-power")
    parents = runs[runs["tags.wattgpu.kind"] == "tuning"]
    assert len(parents) == 1
    parent = parents.iloc[0]
    assert parent["status"] == "FINISHED"
    trials = runs[runs["tags.mlflow.parentRunId"] == parent["run_id"]]
    assert len(trials) == 1
    assert trials["metrics.LOGO_mdape"].notna().all()
    for metric in (
        "best_LOGO_mdape",
        "LOGO_offline_mdape",
        "LOLO_server_mdape",
        "CV_offline_gpu_tau",
        "baseline_LOGO_server_mdape",
    ):
        assert pd.notna(parent[f"metrics.{metric}"]), metric
    assert parent["params.data_hash"] and parent["tags.wattgpu.validation"] == "passed"

    client = MlflowClient(uri)
    artifacts = {
        a.path
        for folder in ("", "evaluation", "plots", "validation")
        for a in client.list_artifacts(parent["run_id"], folder)
    }
    for expected in (
        "evaluation/evaluation.csv",
        "evaluation/evaluation.md",
        "validation/report.txt",
        "plots/predicted_vs_measured_LOGO.png",
        "plots/gpu_ranking_LOGO.png",
        "plots/feature_importance.png",
    ):
        assert expected in artifacts
    table = pd.read_csv(
        mlflow.artifacts.download_artifacts(
            run_id=parent["run_id"],
            artifact_path="evaluation/evaluation.csv",
            dst_path=str(tmp_path),
        )
    )
    assert set(table["method"]) == {
        "catboost",
        "physics-prior",
        "scaled-nearest",
        "load-scaled-tdp",
        "nearest-measured",
        "catboost (nearest's rows)",
    }
    # one generated file is one source: no LOSO
    assert set(table["split"]) == {"CV", "LOGO", "LOLO"} and set(table["scenario"]) == {
        "offline",
        "server",
    }
    model = mlflow.pyfunc.load_model(parent["tags.wattgpu.model_uri"])
    query = {
        "gpu": "NVIDIA L4",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "scenario": "offline",
        "batch_size": 8.0,
    }
    answer = model.predict(pd.DataFrame([query]))
    assert answer.loc[0, "unit"] == "W" and 10 < answer.loc[0, "prediction"] <= 72 * 1.5
    # the run `mlflow run` opened points at ours
    launcher = runs_of_default(uri)
    assert parent["run_id"] in set(launcher["tags.wattgpu.power_run_id"].dropna())


def runs_of_default(uri: str) -> pd.DataFrame:
    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(search_all_experiments=True)


def test_study_resumes_from_its_storage(tmp_path, small_data):
    settings = Settings(
        SHIPPED_DATA_DIR,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        optuna_storage=f"sqlite:///{tmp_path / 'optuna.db'}",
        home=tmp_path,
        recipe=TEST_RECIPE,
    )
    first = pipeline.tune(settings, "itl", data_paths=[small_data], trials=1, show_progress=False)
    second = pipeline.tune(settings, "itl", data_paths=[small_data], trials=2, show_progress=False)
    runs = experiment_runs(settings.tracking_uri, "wattgpu-itl")
    # the second job found trial 0 in the study and ran only trial 1
    nested = runs[runs["tags.mlflow.parentRunId"] == second.run_id]
    assert list(nested["tags.optuna.trial"]) == ["1"]
    assert float(runs.set_index("run_id").loc[second.run_id, "metrics.trials_completed"]) == 2
    assert first.run_id != second.run_id
    assert second.best_value <= first.best_value


def test_a_finished_study_beside_a_new_tracking_store_still_gives_a_model(tmp_path, small_data):
    import optuna

    from wattgpu.errors import StudyComplete
    from wattgpu.lifecycle import registry, tracking

    def settings(store: str) -> Settings:
        return Settings(
            SHIPPED_DATA_DIR,
            tracking_uri=f"sqlite:///{tmp_path / store}",
            optuna_storage=f"sqlite:///{tmp_path / 'optuna.db'}",
            home=tmp_path,
            recipe=TEST_RECIPE,
        )

    job = {"data_paths": [small_data], "trials": 1, "show_progress": False}
    pipeline.tune(settings("old.db"), "power", **job)
    # a team's new tracking store; the study, in the default Optuna storage, is complete
    said = []
    new = settings("new.db")
    result = pipeline.tune(new, "power", **job, notify=said.append)
    assert len(said) == 1 and said[0].startswith("study 'wattgpu-power-fast-")
    assert said[0].endswith(
        f"is complete (1 finished trial(s)) but {tmp_path / 'new.db'} holds no finished run of "
        "it: fitting its best trial's parameters, evaluating and logging them as a run"
    )
    runs = experiment_runs(new.tracking_uri, "wattgpu-power")
    assert list(runs["run_id"]) == [result.run_id]  # one parent run, and no trial re-run
    assert list(runs["status"]) == ["FINISHED"]
    (study,) = optuna.get_all_study_summaries(new.optuna_storage)
    best = optuna.load_study(study_name=study.study_name, storage=new.optuna_storage).best_params
    assert result.best_params == best
    tracking.configure(new.tracking_uri)
    assert registry.register("power") == 1  # `wattgpu register` finds the run
    with pytest.raises(StudyComplete, match="nothing to tune and no run logged"):
        pipeline.tune(new, "power", **job)


@pytest.mark.parametrize("job", ["tune", "main"])
def test_failed_validation_stops_the_job_and_logs_the_report(tmp_path, small_data, job):
    bad = pd.read_csv(small_data)
    bad.loc[0, "mean_power_w"] = 5000.0  # far above any TDP
    path = tmp_path / "bad.csv"
    bad.to_csv(path, index=False)
    settings = Settings(
        SHIPPED_DATA_DIR,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        optuna_storage=f"sqlite:///{tmp_path / 'optuna.db'}",
        home=tmp_path,
        recipe=TEST_RECIPE,
    )
    with pytest.raises(ValidationFailed, match="power_over_tdp"):
        if job == "tune":
            pipeline.tune(settings, "power", data_paths=[path], trials=1, show_progress=False)
        else:  # the main job validates on a worker process
            pipeline.main_job(settings, data_paths=[path], trials=1, show_progress=False)
    runs = experiment_runs(settings.tracking_uri, "wattgpu-power")
    assert list(runs["status"]) == ["FAILED"]
    run_id = runs.iloc[0]["run_id"]
    client = MlflowClient(settings.tracking_uri)
    paths = {a.path for a in client.list_artifacts(run_id, "validation")}
    assert paths == {"validation/report.txt", "validation/data_docs"}
    report = Path(client.download_artifacts(run_id, "validation/report.txt")).read_text()
    assert "FAIL  measurements" in report and "power_over_tdp" in report
    assert (Path(client.download_artifacts(run_id, "validation/data_docs")) / "index.html").exists()
    assert not MlflowClient(settings.tracking_uri).list_artifacts(run_id, "model")


def _wattgpu(*args: str, cwd: Path, uri: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("WATTGPU_DATA_DIR", None)
    command = [sys.executable, "-m", "wattgpu", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=cwd)


def test_main_job_ends_with_models_a_user_can_query(tmp_path, small_data):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    job = ("main", "--trials", "1", "--storage", storage, "--data", str(small_data))
    first = _wattgpu(*job, cwd=tmp_path, uri=uri)
    assert first.returncode == 0, first.stderr[-3000:]
    # one line per step and target on a fresh store, and nothing of MLflow's own: no log line,
    # no progress bar (none in a log), no "already exists" for a model the job created
    assert first.stderr == ""
    lines = first.stdout.splitlines()
    expected = [
        r"validated: 6 tables, \d+ rows, (\d+) expectations: \1 passed, 0 failed; all passed"
    ]
    figures = {"power": "offline, server", "itl": "offline, server", "ttft": "server"}
    for target, scenarios in figures.items():
        figure = ", ".join(rf"\d+\.\d % {scenario}" for scenario in scenarios.split(", "))
        expected += [
            rf"{target}: best LOGO MdAPE \d+\.\d\d % on \d+ rows; run [0-9a-f]{{32}}",
            rf"{target}: evaluated, LOGO MdAPE {figure} \(wattgpu evaluate --target {target}\)",
            rf"{target}: registered wattgpu-{target} v1 \(alias challenger\)",
            rf"{target}: wattgpu-{target} v1 -> production \(LOGO MdAPE \d+\.\d\d %; "
            r"first version, no production to compare with\)",
        ]
    matched = [[p for p in expected if re.fullmatch(p, line)] for line in lines]
    assert sorted(sum(matched, [])) == sorted(expected), first.stdout
    assert len(lines) <= 15
    decision = MlflowClient(uri).get_model_version("wattgpu-power", "1").tags
    assert decision["wattgpu.promotion.production"].startswith("accepted production at ")
    assert "no production version to compare with" in decision["wattgpu.promotion.production"]

    # from another working directory, with nothing promoted by hand, both models answer
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    query = ("--gpu", "NVIDIA L4", "--model", "meta-llama/Llama-3.1-8B-Instruct")
    answer = _wattgpu("predict", *query, "--scenario", "offline", cwd=elsewhere, uri=uri)
    assert answer.returncode == 0, answer.stderr[-2000:]
    assert answer.stdout.startswith("NVIDIA L4 · meta-llama/Llama-3.1-8B-Instruct · offline")
    lines = answer.stdout.splitlines()
    assert {line.split(" ")[0] for line in lines} >= {"power", "itl"}, answer.stdout
    # the intervals' coverage and width on each held-out GPU (and fold, LLM block), bounded as
    # served, as a table and as JSON
    intervals = _wattgpu(
        "evaluate", "--target", "itl", "--intervals", "true", cwd=elsewhere, uri=uri
    )
    assert intervals.returncode == 0, intervals.stderr[-2000:]
    header = "| split | held out | scenario | rows | coverage % | median width % | served as |"
    assert header in intervals.stdout
    as_json = _wattgpu(
        "evaluate",
        "--target",
        "itl",
        "--intervals",
        "true",
        "--format",
        "json",
        cwd=elsewhere,
        uri=uri,
    )
    cells = json.loads(as_json.stdout)
    held_out = pd.read_csv(small_data)
    by_gpu = [c for c in cells if c["split"] == "LOGO"]
    assert {c["gpu"] for c in by_gpu} == set(held_out.loc[held_out["itl_s"].notna(), "gpu"])
    assert {c["novelty"] for c in by_gpu} <= {"unseen GPU", "unseen set-up", "unseen LLM"}
    assert {"CV", "LOGO", "LOLO"} <= {c["split"] for c in cells}
    assert all(0.0 <= c["interval_coverage"] <= 1.0 and c["n_rows"] > 0 for c in cells)

    # a later version arrives as a challenger: production stays where it was
    second = _wattgpu(*job, "--study", "again", "--verbose", cwd=tmp_path, uri=uri)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "-> production" not in second.stdout
    assert "power: production unchanged (v2 stays a challenger)" in second.stdout
    assert "| power | catboost | offline |" in second.stdout  # --verbose: the tables too
    client = MlflowClient(uri)
    for target in ("power", "itl"):
        assert (
            str(client.get_model_version_by_alias(f"wattgpu-{target}", "production").version) == "1"
        )
        assert (
            str(client.get_model_version_by_alias(f"wattgpu-{target}", "challenger").version) == "2"
        )
