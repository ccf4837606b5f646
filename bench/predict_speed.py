"""How long `wattgpu predict` takes for one answer, and where the time goes; and `recommend`.

Each run is a fresh process, as a user's command is. Figures, median of ``--repeats`` runs:
the whole command (``wattgpu predict --gpu ... --model ... --scenario server --rate 2``, wall and
CPU time), and the same work timed by phase in a child process: the imports of the CLI and the
client, loading the production models of every target (power, ITL, TTFT), and answering the
query with each. Then the whole of ``wattgpu recommend --model ... --requests-per-day 30000
--itl-slo-ms 80`` (every catalogue GPU ranked), wall and CPU time: a user's cold command;
``bench/recommend_speed.py`` times the ranking alone, its models loaded once. Needs a trained
store: ``MLFLOW_TRACKING_URI`` or ``WATTGPU_HOME``, as the command reads them (``wattgpu main``
makes one).

    python bench/predict_speed.py [--repeats 5] [--gpu H100] [--model LLM]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from benchinfo import machine

# The phases, run in a child process: what `wattgpu predict` does, timed apart. A client without
# ``load_model`` (before issue 61) loads each model as the command then did, through MLflow.
PHASES = r"""
import json, sys, time
started = time.perf_counter()
from wattgpu.cli import cli
from wattgpu.lifecycle import client
imported = time.perf_counter()
import pandas as pd
from wattgpu.config import load_settings
from wattgpu.modeling.physical.targets import TARGETS

settings = load_settings()
gpu, llm = sys.argv[1], sys.argv[2]
query = pd.DataFrame([{"gpu": gpu, "model": llm, "scenario": "server", "request_rate_rps": 2.0}])
models = {}
for target in TARGETS:
    if hasattr(client, "load_model"):
        models[target] = client.load_model(settings, target, "production")
    else:
        from wattgpu.lifecycle import registry, tracking
        tracking.configure(settings.tracking_uri, must_exist=True)
        models[target] = registry.load(target, "production", check_requirements=False)
loaded = time.perf_counter()
for model in models.values():
    client.ask_loaded_model(model, query)
answered = time.perf_counter()
print(json.dumps({
    "import": imported - started,
    "load models": loaded - imported,
    "answer": answered - loaded,
    "mlflow imported": "mlflow" in sys.modules,
}))
"""


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one run of ``command``, and its standard output."""
    cpu, started = children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return wall, children_cpu() - cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gpu", default="H100")
    parser.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    args = parser.parse_args()
    wattgpu = shutil.which("wattgpu") or sys.exit("no `wattgpu` on PATH")
    query = ["--gpu", args.gpu, "--model", args.model, "--scenario", "server", "--rate", "2"]
    command = [wattgpu, "predict", *query]

    print("# `wattgpu predict`, one query, every target\n")
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(f"store: {os.environ.get('MLFLOW_TRACKING_URI') or os.environ.get('WATTGPU_HOME')}")
    print(f"command: {' '.join(['python', *sys.argv])}")
    print(f"timed: {' '.join(['wattgpu', 'predict', *query])}; median of {args.repeats} runs")
    ranking = ["--model", args.model, "--requests-per-day", "30000", "--itl-slo-ms", "80"]
    print(f"and: {' '.join(['wattgpu', 'recommend', *ranking])}\n")

    timed(command)  # once untimed: the file cache, and the alias cache of the store
    runs = [timed(command) for _ in range(args.repeats)]
    recommend = [wattgpu, "recommend", *ranking]
    timed(recommend)  # once untimed, as above
    rankings = [timed(recommend) for _ in range(args.repeats)]
    phases = []
    for _ in range(args.repeats):
        _, _, out = timed([sys.executable, "-c", PHASES, args.gpu, args.model])
        phases.append(json.loads(out.strip().splitlines()[-1]))

    print("| what | median s | min s | max s |")
    print("|---|---|---|---|")
    for name, values in (
        ("whole command, wall", [wall for wall, _, _ in runs]),
        ("whole command, CPU", [cpu for _, cpu, _ in runs]),
        *((f"phase: {p}", [run[p] for run in phases]) for p in ("import", "load models", "answer")),
        ("recommend, whole command, wall", [wall for wall, _, _ in rankings]),
        ("recommend, whole command, CPU", [cpu for _, cpu, _ in rankings]),
    ):
        middle = statistics.median(values)
        print(f"| {name} | {middle:.3f} | {min(values):.3f} | {max(values):.3f} |")
    print(f"\nMLflow imported by the phases: {phases[0]['mlflow imported']}")


if __name__ == "__main__":
    main()
