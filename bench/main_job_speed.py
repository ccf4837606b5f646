"""How long the main job takes, end to end, as a user runs it.

    python bench/main_job_speed.py [--recipe full] [--trials 10] [--repeat 1]

Runs ``wattgpu main`` (a fresh process, as the README's first command does) in a new temporary
``WATTGPU_HOME`` on the shipped data, ``--repeat`` times, and prints the wall time of each run,
the CPU time the machine spent meanwhile (on an idle machine, the job's and its workers'), each
target's LOGO MdAPE, and before each run the time of one reference CatBoost fit (the same fit
every time: a virtual machine's speed drifts by a third within an hour, so compare runs through
it), with the date, the machine and the command. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from benchinfo import machine

PROMOTED = re.compile(r"wattgpu-(\w+) v\d+ -> production \(LOGO MdAPE ([\d.]+) %")


def busy_cpu_s() -> float:
    """The CPU seconds every core has spent busy since boot (Linux ``/proc/stat``)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def reference_fit_s() -> float:
    """Seconds of one fixed single-threaded CatBoost fit (6,000 x 34, 200 trees, depth 6)."""
    from catboost import CatBoostRegressor

    rng = np.random.default_rng(0)
    x = rng.normal(size=(6000, 34)).astype(np.float32)
    y = x[:, 0] + rng.normal(size=6000)
    model = CatBoostRegressor(
        iterations=200,
        depth=6,
        border_count=64,
        thread_count=1,
        verbose=False,
        allow_writing_files=False,
    )
    start = time.perf_counter()
    model.fit(x, y)
    return time.perf_counter() - start


def run_once(recipe: str, trials: int) -> tuple[float, float, dict[str, float]]:
    """One main job in a fresh home: (wall s, busy CPU s of the machine, LOGO MdAPE by target)."""
    with tempfile.TemporaryDirectory() as home:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("MLFLOW_TRACKING_URI", "WATTGPU_OPTUNA_STORAGE", "WATTGPU_RECIPE")
        }
        env["WATTGPU_HOME"] = home
        command = [sys.executable, "-m", "wattgpu", "main", "--recipe", recipe]
        command += ["--trials", str(trials)]
        before = busy_cpu_s()
        start = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=home, capture_output=True, text=True)
        wall = time.perf_counter() - start
        cpu = busy_cpu_s() - before
    if done.returncode != 0:
        sys.exit(f"wattgpu main failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    logo = {target: float(value) for target, value in PROMOTED.findall(done.stdout)}
    return wall, cpu, logo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", choices=("full", "fast"), default="full")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"# wattgpu main, {args.recipe} recipe, {args.trials} trials")
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"command: python bench/main_job_speed.py {' '.join(sys.argv[1:])}".rstrip())
    print("| run | reference fit s | wall s | machine CPU s | LOGO MdAPE % (power / itl / ttft) |")
    print("|---|---|---|---|---|")
    for number in range(1, args.repeat + 1):
        reference = reference_fit_s()
        wall, cpu, logo = run_once(args.recipe, args.trials)
        figures = " / ".join(f"{logo.get(t, float('nan')):.2f}" for t in ("power", "itl", "ttft"))
        print(f"| {number} | {reference:.2f} | {wall:.1f} | {cpu:.1f} | {figures} |", flush=True)


if __name__ == "__main__":
    main()
