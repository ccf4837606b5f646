"""How long `wattgpu recommend` takes to rank every catalogue GPU for one LLM.

The predictor is the registry's production pyfunc models, loaded once (their loading is timed
apart): from MLFLOW_TRACKING_URI when both models hold the alias there, otherwise trained quickly
(one Optuna trial per target) on generated rows in a temporary store, as the tests do.

    python bench/recommend_speed.py [--repeats 20] [--model meta-llama/Llama-3.1-8B-Instruct]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from benchinfo import machine

from wattgpu import recommendation as rec
from wattgpu.config import SHIPPED_DATA_DIR, Settings, load_settings
from wattgpu.data.catalog import Catalog
from wattgpu.errors import ModelNotFound

REPO = Path(__file__).resolve().parents[1]
TRAIN_GPUS = ["NVIDIA Tesla T4", "NVIDIA L4", "NVIDIA A100 SXM4 80GB", "NVIDIA H100 SXM5"]


def train_store(root: Path, catalog: Catalog) -> Settings:
    """Both targets tuned with one trial on generated rows of four GPUs, v1 in production."""
    from wattgpu.lifecycle import pipeline, registry, tracking
    from wattgpu.modeling.physical.synthetic import synthesize

    rows = synthesize(catalog, seed=0)
    data = root / "small.csv"
    rows[rows["gpu"].isin(TRAIN_GPUS)].to_csv(data, index=False)
    settings = Settings(
        SHIPPED_DATA_DIR, f"sqlite:///{root / 'mlflow.db'}", f"sqlite:///{root / 'optuna.db'}"
    )
    for target in ("power", "itl"):
        pipeline.tune(settings, target, data_paths=[data], trials=1, show_progress=False)
    tracking.configure(settings.tracking_uri)
    for target in ("power", "itl"):
        registry.promote(target, registry.register(target), "production")
    return settings


def timed(call, repeats: int) -> list[float]:
    call()  # warm-up: first-call imports and caches are not what a user waits for twice
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def summary(times: list[float]) -> str:
    ms = np.array(times) * 1000
    return (
        f"median {statistics.median(ms):.0f} ms, p90 {np.percentile(ms, 90):.0f} ms "
        f"(min {ms.min():.0f}, max {ms.max():.0f}; {len(ms)} repeats)"
    )


def load_predictor(
    alias: str, catalog: Catalog
) -> tuple[Settings, Any, str, tempfile.TemporaryDirectory | None, float]:
    """The registry's models under ``alias``, or a small one trained in a temporary store.

    Returns:
        The settings, the predictor, where it came from, the temporary folder (or None) and
        the seconds loading the models took.

    """
    settings = load_settings()
    source = f"registry at {settings.tracking_uri}"
    folder = None
    start = time.perf_counter()
    try:
        if "MLFLOW_TRACKING_URI" not in os.environ:
            raise ModelNotFound("no MLFLOW_TRACKING_URI")
        predictor = rec.model_predictor(settings, alias)
    except ModelNotFound:
        folder = tempfile.TemporaryDirectory()
        print("training a small model in a temporary store (about a minute) ...", file=sys.stderr)
        settings = train_store(Path(folder.name), catalog)
        source = "a model trained on generated rows of 4 GPUs (1 trial) in a temporary store"
        start = time.perf_counter()
        predictor = rec.model_predictor(settings, alias)
    return settings, predictor, source, folder, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    parser.add_argument("--alias", default="production")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    settings, predictor, source, folder, load_s = load_predictor(args.alias, catalog)
    common = {"itl_slo_ms": 80, "settings": settings, "catalog": catalog, "predictor": predictor}
    hours = pd.DataFrame({"hour": range(24), "rate": np.linspace(0.1, 2.4, 24)})

    def constant() -> pd.DataFrame:
        return rec.recommend(args.model, requests_per_day=30000, **common)

    def profile() -> pd.DataFrame:
        return rec.recommend(args.model, load_profile=hours, **common)

    table = constant()
    considered, ranked = len(table), int(table["rank"].notna().sum())
    fitting = int(table["fits"].sum())
    print("# Ranking speed of `wattgpu recommend`")
    print(f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- python {platform.python_version()}, pandas {pd.__version__}")
    env = f"MLFLOW_TRACKING_URI={os.environ['MLFLOW_TRACKING_URI']} " if folder is None else ""
    print(f"- command: {env}python bench/recommend_speed.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"- predictor: {source}; loading both models took {load_s:.2f} s (once)")
    print(
        f"- {args.model}: {considered} GPUs considered, {fitting} fit, {ranked} meet ITL <= 80 ms"
    )
    print()
    print("| load | queries per target | time to rank |")
    print("|---|---|---|")
    print(f"| 30,000 requests/day | {fitting} | {summary(timed(constant, args.repeats))} |")
    print(
        f"| 24-hour profile, 24 rates | {fitting * 24} | {summary(timed(profile, args.repeats))} |"
    )
    if folder is not None:
        folder.cleanup()


if __name__ == "__main__":
    main()
