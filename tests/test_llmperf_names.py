"""bench/llmperf_names.py on small SQLite files shaped as the public llmperf benchmark's.

The benchmark itself is not needed: the files are written here, with the table and columns its
results use (``benchmark_runs``: ``timestamp``, ``model``, ``gpu_info``) and names as it writes
them. Expected answers by hand.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


def _bench():
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(
        "bench_llmperf_names", REPO / "bench" / "llmperf_names.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


MODEL = "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"


def write_db(path: Path, runs: list[tuple[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE benchmark_runs (id INTEGER PRIMARY KEY, timestamp TEXT, model TEXT, "
            "gpu_info TEXT, num_concurrent_requests INTEGER)"
        )
        connection.executemany(
            "INSERT INTO benchmark_runs (timestamp, model, gpu_info, num_concurrent_requests) "
            "VALUES (?, ?, ?, 64)",
            [(stamp, MODEL, gpu) for stamp, gpu in runs],
        )
    connection.close()


@pytest.fixture
def benchmark(tmp_path) -> Path:
    root = tmp_path / "llmperf"
    write_db(
        root / "results.db",
        [
            ("2025-01-05T19:57:33", "(runpod) RTX A6000 Ada"),
            ("2025-01-05T19:58:29", "RTX A5000 (P)"),
            ("2025-01-05T19:59:03", "MI300X"),  # AMD: not counted
            ("2025-01-05T20:00:00", "RTX A5000 + RTX 3090"),  # two GPUs: refused
            ("2025-01-05T20:01:00", "NVIDIA GeForce RTX 3080"),  # 10 or 12 GB: refused
        ],
    )
    # a combined file repeats a run under another label: one run, the first file's label
    write_db(
        root / "results" / "combined.db",
        [("2025-01-05T19:57:33", "(runpod) RTX A6000 ADA (P)"), ("2025-01-06T10:00:00", "L40")],
    )
    (root / "results" / "empty.db").write_bytes(b"")  # no benchmark table: skipped
    return root


def test_labels_are_dropped_from_the_gpu_name():
    bench = _bench()
    assert bench.gpu_name("(runpod) RTX A6000 ADA (P)") == "RTX A6000 ADA"
    assert bench.gpu_name("RTX 3090 (P)") == "RTX 3090"
    assert bench.gpu_name("RTX A5000 + RTX 3090") == "RTX A5000 + RTX 3090"


def test_runs_are_counted_once_and_refusals_named(benchmark, catalog):
    bench = _bench()
    runs = bench.read_runs(benchmark)
    assert len(runs) == 5  # 7 rows: one repeated, one AMD
    table = bench.resolved(runs, catalog)
    answers = dict(zip(table["gpu"], table["resolves_to"], strict=True))
    assert answers["RTX A6000 Ada"] == "NVIDIA RTX 6000 Ada Generation"
    assert answers["RTX A5000"] == "NVIDIA RTX A5000"
    assert answers["L40"] == "NVIDIA L40"
    refused = table[table["resolves_to"].isna()]
    assert sorted(refused["gpu"]) == ["NVIDIA GeForce RTX 3080", "RTX A5000 + RTX 3090"]
    (why,) = refused.loc[refused["gpu"] == "NVIDIA GeForce RTX 3080", "problem"]
    assert "NVIDIA GeForce RTX 3080 10GB, NVIDIA GeForce RTX 3080 12GB" in why


def test_a_git_directory_is_read_as_its_checkout(benchmark, catalog):
    git = ["git", "-C", str(benchmark), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "results"], check=True)
    bench = _bench()
    from_git = bench.read_runs(benchmark / ".git")
    from_folder = bench.read_runs(benchmark)
    assert from_git.drop(columns="file").equals(from_folder.drop(columns="file"))
