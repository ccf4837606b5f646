"""`wattgpu predict` and `wattgpu recommend` read the registered models' folders without MLflow,
and answer the same.

MLflow's import alone is 1-1.5 s of a one-query command. Where the store's alias is known
(``alias_cache``) and the version's folder holds one of our models, ``client.load_model`` reads
it as ``lifecycle.served.ServedModel``, the object the MLflow pyfunc itself holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from wattgpu.errors import ModelNotFound
from wattgpu.lifecycle import served
from wattgpu.lifecycle.client import ask_loaded_model, load_model

QUERIES = pd.DataFrame(
    [
        {"gpu": "NVIDIA L4", "model": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "offline"},
        {
            "gpu": "NVIDIA H100 PCIe",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "scenario": "server",
            "request_rate_rps": 2.0,
        },
        {
            "gpu": "NVIDIA A10G",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "scenario": "server",
            "concurrency": 16.0,
        },
    ]
)
# Runs one command in a fresh interpreter and says whether MLflow was imported.
WITHOUT_MLFLOW = """
import sys
from wattgpu.cli import cli
cli(sys.argv[1:], standalone_mode=False)
print("mlflow imported:", "mlflow" in sys.modules)
"""
LLM = "meta-llama/Llama-3.1-8B-Instruct"
# predict asks both models once; recommend ranks three GPUs with both models
COMMANDS = {
    "predict": ["predict", "--gpu", "NVIDIA L4", "--model", LLM, "--scenario", "offline"],
    "recommend": [
        "recommend", "--model", LLM, "--requests-per-day", "30000", "--itl-slo-ms", "80",
        "--gpus", "NVIDIA L4,NVIDIA A10G,NVIDIA H100 PCIe",
    ],
}  # fmt: skip


def settled(store: dict) -> None:
    """The store's database last written 10 s ago, so that the alias cache may keep answers."""
    database = Path(store["root"]) / "mlflow.db"
    then = time.time() - 10
    os.utime(database, (then, then))


@pytest.mark.slow
def test_a_registered_model_is_read_without_mlflow_and_answers_as_mlflow_does(store):
    from wattgpu.lifecycle import registry, tracking

    settings = store["settings"]
    settled(store)
    tracking.configure(settings.tracking_uri, must_exist=True)
    for target in ("power", "itl"):
        through_mlflow = registry.load(target, "production", check_requirements=False)
        read = load_model(settings, target, "production")  # the alias is cached now
        assert isinstance(read, served.ServedModel)
        pd.testing.assert_frame_equal(
            ask_loaded_model(read, QUERIES),
            ask_loaded_model(through_mlflow, QUERIES),
            check_exact=True,
        )
    # the ITL model (the last read) without tails, as recommend's capacity search asks at its
    # medians: the same answer, no p90 or p99
    full = ask_loaded_model(read, QUERIES)
    bare = ask_loaded_model(read, QUERIES, with_tails=False)
    assert list(bare.columns) == list(full.columns)
    assert full["p90"].notna().all() and full["p99"].notna().all()
    assert bare["p90"].isna().all() and bare["p99"].isna().all() and set(bare["tails"]) == {""}
    unchanged = [c for c in full.columns if c not in ("p90", "p99", "tails")]
    pd.testing.assert_frame_equal(bare[unchanged], full[unchanged], check_exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_does_not_import_mlflow_once_the_aliases_are_known(store, command):
    from wattgpu.lifecycle import registry, tracking

    settings = store["settings"]
    settled(store)
    tracking.configure(settings.tracking_uri, must_exist=True)
    for target in ("power", "itl", "ttft"):
        try:
            registry.load(target, "production", check_requirements=False)
        except ModelNotFound:  # no TTFT model in this store: its absence is cached too
            pass
    env = os.environ | {"MLFLOW_TRACKING_URI": settings.tracking_uri}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MLFLOW, *COMMANDS[command]],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "NVIDIA L4" in done.stdout and "mlflow imported: False" in done.stdout


def test_a_folder_that_is_not_one_of_ours_is_left_to_mlflow(tmp_path):
    assert served.read_folder(tmp_path) is None  # no MLmodel
    (tmp_path / "MLmodel").write_text(
        "flavors:\n  python_function:\n    loader_module: mlflow.sklearn\n"
    )
    assert served.read_folder(tmp_path) is None
    (tmp_path / "MLmodel").write_text(
        "flavors:\n  python_function:\n"
        "    loader_module: mlflow.pyfunc.loaders.code_model\n"
        "    model_code_path: /x/served_model.py\n"
        "    artifacts:\n      metadata:\n        path: artifacts/metadata.json\n"
    )
    assert served.read_folder(tmp_path) is None  # an artifact is missing
