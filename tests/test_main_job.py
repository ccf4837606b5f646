"""The README's main job, as a new user runs it: a wheel, another directory, the shipped data.

The wheel is built from this checkout and installed into a new virtual environment (with
``--no-deps``; the dependencies come from the test environment through a ``.pth`` file, since
installing them again would only test PyPI). Every command runs from a directory that is not the
checkout, with the stores in a temporary ``WATTGPU_HOME``. The main job's leave-one-GPU-out
figures must match the ones the README and docs/accuracy.md print, within ``TOLERANCE``, and
both models must end in production.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO

from wattgpu.modeling.physical.targets import TARGETS

pytestmark = pytest.mark.slow

# The README's first command runs `wattgpu main` with its default trials: the same here.
TRIALS = 10
# MdAPE points. The job is seeded, so on one machine it repeats to the digit; another CPU's
# floating-point rounding can steer the sampler to a neighbouring trial.
TOLERANCE = 1.0
LOGO = "LOGO MdAPE %"


def run(command: list[str], cwd: Path, env: dict, timeout: int = 1800) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}: {done.stdout[-1500:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A virtual environment holding the wheel; a home for its stores; a foreign directory."""
    root = tmp_path_factory.mktemp("wheel")
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root), str(REPO)],
        root,
        dict(os.environ),
    )
    wheel = next(root.glob("wattgpu-*.whl"))
    venv = root / "venv"
    # no pip of its own (ensurepip took 19 s on a loaded machine): this pip installs into it
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root, dict(os.environ))
    site = next((venv / "lib").glob("python3*/site-packages"))
    # the test environment's packages, after the venv's own (so the wheel's wattgpu wins)
    (site / "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    run([*install, "-q", "--no-deps", str(wheel)], root, dict(os.environ))
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in (
            "MLFLOW_TRACKING_URI",
            "WATTGPU_OPTUNA_STORAGE",
            "WATTGPU_DATA_DIR",
            "WATTGPU_RECIPE",  # a user's main job: the full recipe
            "PYTHONPATH",
        )
    }
    env["WATTGPU_HOME"] = str(root / "home")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    return {"root": root, "bin": venv / "bin", "cwd": elsewhere, "env": env}


def wattgpu(installed: dict, *args: str, cwd: Path | None = None) -> str:
    command = [str(installed["bin"] / "wattgpu"), *args]
    return run(command, cwd or installed["cwd"], installed["env"])


def test_the_wheel_carries_the_data_and_the_suites(installed):
    where = run(
        [
            str(installed["bin"] / "python"),
            "-c",
            "import wattgpu.config as c; print(c.SHIPPED_DATA_DIR); print(c.EXPECTATIONS_DIR)",
        ],
        installed["cwd"],
        installed["env"],
    ).split()
    assert all("site-packages" in w for w in where), where
    assert str(REPO) not in " ".join(where)
    out = wattgpu(installed, "validate", "--docs-dir", str(installed["root"] / "docs"))
    assert "0 failed" in out, out[-2000:]


@pytest.fixture(scope="module")
def main_job(installed) -> dict:
    wattgpu(installed, "main", "--trials", str(TRIALS))
    return installed


# The table under this line in a document is the main job's, printed by `wattgpu evaluate`.
MARKER = "<!-- the main job's figures: tests/test_main_job.py checks them -->"


def printed_logo_figures(markdown: str) -> dict[tuple[str, str, str], float]:
    """(target, method, scenario) -> LOGO MdAPE of the Markdown table under ``MARKER``."""
    assert MARKER in markdown
    lines = markdown.split(MARKER, 1)[1].strip().splitlines()
    table = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    table = table[: next((i for i, line in enumerate(lines) if not line.startswith("|")), None)]
    header, rows = table[0], table[2:]
    figures = {}
    for cells in rows:
        row = dict(zip(header, cells, strict=True))
        if re.fullmatch(r"\d+(\.\d+)?", row[LOGO]):
            figures[(row["target"], row["method"], row["scenario"])] = float(row[LOGO])
    return figures


def test_the_marked_table_is_read_by_hand():
    text = f"""x
{MARKER}

| target | method | scenario | CV MdAPE % | {LOGO} |
|---|---|---|---|---|
| power | catboost | offline | 11.8 | 15.2 |
| itl | roofline | server | 3 | – |

| target | method | scenario | {LOGO} |
|---|---|---|---|
| power | catboost | server | 99 |
"""
    assert printed_logo_figures(text) == {("power", "catboost", "offline"): 15.2}


@pytest.fixture(scope="module")
def measured(main_job) -> dict[tuple[str, str, str], float]:
    """(target, method, scenario) -> LOGO MdAPE of the main job, as `wattgpu evaluate` prints it."""
    figures = {}
    for target in TARGETS:
        table = json.loads(wattgpu(main_job, "evaluate", "--target", target, "--format", "json"))
        for row in table:
            if row["split"] == "LOGO" and row["mdape"] is not None:
                figures[(row["target"], row["method"], row["scenario"])] = row["mdape"]
    return figures


@pytest.mark.parametrize("doc", ["README.md", "docs/accuracy.md"])
def test_the_main_job_repeats_the_printed_figures(measured, doc):
    printed = printed_logo_figures((REPO / doc).read_text(encoding="utf-8"))
    catboost = {key for key in printed if key[1] == "catboost"}
    assert {"power", "itl"} <= {target for target, _, _ in catboost}, (
        f"{doc} prints {sorted(printed)}"
    )
    far = {
        key: (printed[key], round(measured.get(key, float("nan")), 2))
        for key in printed
        if not abs(printed[key] - measured.get(key, float("inf"))) <= TOLERANCE
    }
    assert not far, f"{doc}: printed vs measured LOGO MdAPE beyond ±{TOLERANCE}: {far}"


def test_both_models_end_in_production_and_answer_from_a_third_directory(main_job):
    versions = json.loads(wattgpu(main_job, "models", "--format", "json"))
    production = {v["model"] for v in versions if "production" in str(v["aliases"]).split(",")}
    assert production == {f"wattgpu-{t}" for t in TARGETS}, versions
    third = main_job["root"] / "third"
    third.mkdir()
    out = wattgpu(
        main_job,
        *("predict", "--gpu", "NVIDIA L4", "--model", "meta-llama/Llama-3.1-8B-Instruct"),
        *("--scenario", "offline", "--output", str(third / "answer.csv")),
        cwd=third,
    )
    answer = (third / "answer.csv").read_text().splitlines()
    assert len(answer) == 2 and "power_prediction_w" in answer[0], out
    assert sorted(p.name for p in third.iterdir()) == ["answer.csv"]  # no store left behind
