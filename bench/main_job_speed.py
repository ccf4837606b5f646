"""How long the main job takes, end to end, as a user runs it.

    python bench/main_job_speed.py [--recipe full] [--trials 10] [--repeat 1]

Runs ``wattgpu main`` (a fresh process, as the README's first command does) in a new temporary
``WATTGPU_HOME`` on the shipped data, ``--repeat`` times, and prints the wall time of each run,
the CPU time its process tree used, and each target's LOGO MdAPE, with the date, the machine
and the command. Run it on an idle machine: other work on the cores lengthens the wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from benchinfo import machine

PROMOTED = re.compile(r"wattgpu-(\w+) v\d+ -> production \(LOGO MdAPE ([\d.]+) %")


def run_once(recipe: str, trials: int) -> tuple[float, float, dict[str, float]]:
    """One main job in a fresh home: (wall s, CPU s of the process tree, LOGO MdAPE by target)."""
    with tempfile.TemporaryDirectory() as home:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("MLFLOW_TRACKING_URI", "WATTGPU_OPTUNA_STORAGE", "WATTGPU_RECIPE")
        }
        env["WATTGPU_HOME"] = home
        command = [sys.executable, "-m", "wattgpu", "main", "--recipe", recipe]
        command += ["--trials", str(trials)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=home, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"wattgpu main failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
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
    print("| run | wall s | CPU s | LOGO MdAPE % (power / itl / ttft) |")
    print("|---|---|---|---|")
    for number in range(1, args.repeat + 1):
        wall, cpu, logo = run_once(args.recipe, args.trials)
        figures = " / ".join(f"{logo.get(t, float('nan')):.2f}" for t in ("power", "itl", "ttft"))
        print(f"| {number} | {wall:.1f} | {cpu:.1f} | {figures} |", flush=True)


if __name__ == "__main__":
    main()
