"""Shared fixtures: small in-memory catalogues with round, hand-checkable numbers."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR, Settings
from wattgpu.data.catalog import Catalog
from wattgpu.modeling.physical.physics import PhysicalConstants

# Items over 60 s are listed at the end of every run (tests/slow_items.py).
pytest_plugins = ["slow_items"]

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("WATTGPU_REFERENCE_DIR", REPO.parent / "shared" / "reference"))


# Tests train with the fast recipe (few iterations, grouped folds): the same code as the full
# one, at a fraction of its cost. tests/test_main_job.py runs the full recipe, as a user does.
TEST_RECIPE = "fast"

# The files that take longest, first (docs/operations.md, "The test suite"). Each worker takes a
# whole file at a time (`--dist loadfile`, in the files' order here): the long ones start at
# once, side by side, and the short ones fill in at the end, where a long one would leave the
# other worker idle. A file missing here only runs later; a stale order costs minutes, no test.
LONGEST_FIRST = (
    "test_main_job.py",
    "test_promotion_fencing.py",
    "test_postgres_workers.py",
    "test_end_to_end.py",
    "test_served_virtualenv.py",
    "test_killed_tuning.py",
    "test_registry.py",
    # each trains a store of its own in its worker, then serves it
    "test_ttft_serving.py",
    "test_serving.py",
    "test_recommend.py",
    "test_validation.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``LONGEST_FIRST``'s files before the others, each file's tests in their own order."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session", autouse=True)
def wattgpu_home(tmp_path_factory) -> Iterator[Path]:
    """Every test's default stores live in a temporary home, never in the user's ~/.wattgpu,
    and every job trains with ``TEST_RECIPE``.

    Subprocesses inherit both through the environment.
    """
    home = tmp_path_factory.mktemp("wattgpu-home")
    before = {name: os.environ.get(name) for name in ("WATTGPU_HOME", "WATTGPU_RECIPE")}
    os.environ["WATTGPU_HOME"] = str(home)
    os.environ["WATTGPU_RECIPE"] = TEST_RECIPE
    yield home
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# No overheads and the kernels' efficiencies as they are: the step is the plain roofline.
PLAIN = PhysicalConstants(
    memory_efficiency=1.0,
    compute_efficiency=1.0,
    step_overhead_s=0.0,
    seq_overhead_s=0.0,
    idle_fraction=0.1,
    memory_power_weight=1.0,
    compute_power_weight=1.0,
    server_power_factor=1.0,
)


def gpu_row(name: str, **overrides: object) -> dict:
    row = {
        "gpu": name,
        "aliases": "",
        "vendor": "NVIDIA",
        "architecture": "Hopper",
        "release_year": 2023,
        "form_factor": "SXM",
        "memory_gb": 80.0,
        "memory_type": "HBM3",
        "memory_bandwidth_gb_s": 3350.0,
        "fp16_tensor_tflops": 989.4,
        "fp32_tflops": 67.0,
        "tdp_w": 700.0,
        "base_clock_mhz": 1590.0,
        "boost_clock_mhz": 1980.0,
        "sm_count": 132,
        "l2_cache_mb": 50.0,
        "transistors_m": 80000.0,
        "process_nm": 4,
        "compute_capability": 9.0,
        "fp8_tensor_tflops": 1978.9,
        "int8_tensor_tops": 1978.9,
    }
    row.update(overrides)
    return row


def llm_row(name: str, **overrides: object) -> dict:
    # meta-llama/Llama-3.1-8B-Instruct, from its config.json and model card.
    row = {
        "model": name,
        "aliases": "",
        "family": "llama",
        "arch": "decoder",
        "params_b": 8.03,
        "active_params_b": 8.03,
        "num_layers": 32,
        "num_kv_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_kv_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "dtype": "bfloat16",
    }
    row.update(overrides)
    return row


@pytest.fixture
def small_catalog() -> Catalog:
    gpus = pd.DataFrame(
        [
            gpu_row("NVIDIA H100 SXM5", aliases="NVIDIA H100 80GB HBM3|H100"),
            gpu_row(
                "NVIDIA L4",
                aliases="L4",
                architecture="Ada Lovelace",
                form_factor="PCIe",
                memory_gb=24.0,
                memory_type="GDDR6",
                memory_bandwidth_gb_s=300.0,
                fp16_tensor_tflops=121.0,
                compute_capability=8.9,
                fp8_tensor_tflops=242.5,
                int8_tensor_tops=242.5,
                tdp_w=72.0,
                base_clock_mhz=795.0,
                boost_clock_mhz=2040.0,
            ),
        ]
    )
    llms = pd.DataFrame(
        [
            llm_row(
                "meta-llama/Llama-3.1-8B-Instruct", aliases="meta-llama/Meta-Llama-3.1-8B-Instruct"
            ),
            llm_row(
                "meta-llama/Llama-3.1-70B-Instruct",
                params_b=70.6,
                active_params_b=70.6,
                num_layers=80,
                num_kv_layers=80,
                hidden_size=8192,
                num_attention_heads=64,
                intermediate_size=28672,
            ),
        ]
    )
    return Catalog.from_frames(gpus, llms)


@pytest.fixture(scope="session")
def reference() -> Path:
    """The real reference measurements; missing is a failure in CI, a skip elsewhere."""
    if not (REFERENCE / "mlenergy" / "measurements.csv").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI: the reference measurements are missing at {REFERENCE}")
        pytest.skip(f"reference measurements not found at {REFERENCE}")
    return REFERENCE


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")


@pytest.fixture
def invoke(tmp_path, monkeypatch):
    """Run `wattgpu data ...` through the real group, in a folder of its own with its catalogues."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name in ("gpus.csv", "llms.csv"):
        shutil.copy(SHIPPED_DATA_DIR / name, data_dir / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(data_dir))

    def run(*args: str):
        result = CliRunner().invoke(cli, ["data", *args], catch_exceptions=False)
        assert "Traceback" not in result.output
        return result

    return run


def free_port() -> int:
    """A TCP port nobody listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(command: list[str], env: dict, log_path: Path, url: str, wait_s: float = 180):  # noqa: ANN201
    """Start a model server subprocess and wait until ``url``/ping answers; return the process."""
    import subprocess
    import time

    import httpx

    with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.time() + wait_s
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/ping", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.5)
        if process.poll() is not None:
            break
    stop_server(process)
    pytest.fail(f"model server did not start: {log_path.read_text()[-2000:]}")


def stop_server(process) -> None:  # noqa: ANN001
    """Stop a server started by ``start_server`` (its whole process group)."""
    import signal

    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


@contextmanager
def serving(store: dict, command: Callable[[int], list[str]], log_name: str) -> Iterator[str]:
    """Run ``command(port)`` against ``store``'s registry as a server; yield its URL."""
    port = free_port()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": store["settings"].tracking_uri,
        # `mlflow models serve` and `wattgpu serve` exec uvicorn by name
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    url = f"http://127.0.0.1:{port}"
    process = start_server(command(port), env, store["root"] / log_name, url)
    try:
        yield url
    finally:
        stop_server(process)


@pytest.fixture(scope="session")
def store(tmp_path_factory, catalog):
    """Both targets tuned briefly on generated rows of six GPUs, registered, v1 in production.

    Tuned once per suite: under xdist the first worker to ask tunes a template store, and each
    worker gets its own copy of the template's databases (tests register and promote in
    theirs); the runs' artifacts stay in the template, read in place. ``artifacts`` is the
    folder that holds them.
    """
    root = tmp_path_factory.mktemp("store")
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return {**tuned_store(root, catalog, STORE_TARGETS), "artifacts": root}
    template = tmp_path_factory.getbasetemp().parent / "store-template"
    made = template.parent / "store-template.json"
    with (template.parent / "store-template.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for the template
        if not made.exists():
            shutil.rmtree(template, ignore_errors=True)  # what a failed attempt left
            template.mkdir()
            runs = tuned_store(template, catalog, STORE_TARGETS)["runs"]
            made.write_text(json.dumps(runs))
    for name in ("mlflow.db", "optuna.db"):
        with closing(sqlite3.connect(template / name)) as source:
            with closing(sqlite3.connect(root / name)) as copy:
                source.backup(copy)
    shutil.copy(template / "small.csv", root / "small.csv")
    settings = store_settings(root)
    from wattgpu.lifecycle import tracking

    tracking.configure(settings.tracking_uri)
    return {
        "root": root,
        "settings": settings,
        "runs": json.loads(made.read_text()),
        "artifacts": template,
    }


STORE_TARGETS = ("power", "itl")


def store_settings(root: Path) -> Settings:
    """The settings of a store made by ``tuned_store`` in ``root``."""
    return Settings(
        SHIPPED_DATA_DIR,
        tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
        optuna_storage=f"sqlite:///{root / 'optuna.db'}",
        recipe=TEST_RECIPE,
    )


def tuned_store(root: Path, catalog: Catalog, targets: tuple[str, ...]) -> dict:
    """``targets`` tuned (one trial) on generated rows of ``SERVED_GPUS`` in a store in ``root``,
    registered, and v1 promoted to production; returns the root, the settings and the runs."""
    from wattgpu.lifecycle import pipeline, registry, tracking
    from wattgpu.modeling.physical.synthetic import synthesize

    rows = synthesize(catalog, seed=2)
    data = root / "small.csv"
    rows[rows["gpu"].isin(SERVED_GPUS)].to_csv(data, index=False)
    settings = store_settings(root)
    runs = {
        t: pipeline.tune(settings, t, data_paths=[data], trials=1, show_progress=False).run_id
        for t in targets
    }
    tracking.configure(settings.tracking_uri)
    for target in targets:
        assert registry.register(target) == 1
        registry.promote(target, 1, "production")
    return {"root": root, "settings": settings, "runs": runs}


SERVED_GPUS = [
    "NVIDIA Tesla T4",
    "NVIDIA L4",
    "NVIDIA A100 SXM4 80GB",
    "NVIDIA H100 SXM5",
    "NVIDIA A10G",
    "NVIDIA H100 PCIe",
]
