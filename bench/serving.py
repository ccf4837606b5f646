"""Latency and throughput of the served model: the real `mlflow models serve` over HTTP.

    python bench/serving.py [--model-uri models:/wattgpu-power@production] [--requests 300]

Without --model-uri it trains a small power model on generated rows in a temporary MLflow store
(one Optuna trial), registers and promotes it, and serves that: the figures measure the server
and the pyfunc (checks, features, CatBoost, interval, warnings), not the model's accuracy.
Prints: single-row latency p50/p99 (sequential, and with 8 concurrent clients) and rows/s for
1,000-row batches (sequential, and with 8 concurrent clients).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from benchinfo import machine

REPO = Path(__file__).resolve().parents[1]
QUERY = {
    "gpu": "NVIDIA H100 PCIe",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "scenario": "server",
    "request_rate_rps": 0.5,
}
CLIENTS = 8


def build_model(root: Path) -> tuple[str, str]:
    """Train, register and promote a small power model; return (tracking URI, model URI)."""
    from wattgpu.config import SHIPPED_DATA_DIR, Settings
    from wattgpu.data.catalog import Catalog
    from wattgpu.lifecycle import pipeline, registry, tracking
    from wattgpu.modeling.simulate import simulate

    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    rows = simulate(catalog, seed=3)
    data = root / "rows.csv"
    rows[rows["gpu"].isin(rows["gpu"].unique()[:8])].to_csv(data, index=False)
    settings = Settings(
        SHIPPED_DATA_DIR, f"sqlite:///{root / 'mlflow.db'}", f"sqlite:///{root / 'optuna.db'}"
    )
    pipeline.tune(settings, "power", data_paths=[data], trials=1, show_progress=False)
    tracking.configure(settings.tracking_uri)
    version = registry.register("power")
    registry.promote("power", version, "production")
    return settings.tracking_uri, "models:/wattgpu-power@production"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(tracking_uri: str, model_uri: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "models",
        "serve",
        "-m",
        model_uri,
        "--env-manager",
        "local",
        "-p",
        str(port),
        "-h",
        "127.0.0.1",
    ]
    process = subprocess.Popen(
        command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    while time.perf_counter() - started < 120:
        try:
            if httpx.get(f"{url}/ping", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
        if process.poll() is not None:
            break
    raise SystemExit(f"server did not start:\n{log.read_text()[-2000:]}")


def timed_post(client: httpx.Client, url: str, body: str) -> float:
    started = time.perf_counter()
    response = client.post(
        f"{url}/invocations", content=body, headers={"Content-Type": "application/json"}
    )
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"HTTP {response.status_code}: {response.text[:500]}")
    return elapsed


def latencies(url: str, body: str, requests: int, clients: int) -> list[float]:
    per_client = max(1, requests // clients)

    def run(_: int) -> list[float]:
        with httpx.Client(timeout=120) as client:
            return [timed_post(client, url, body) for _ in range(per_client)]

    with ThreadPoolExecutor(clients) as pool:
        return [t for chunk in pool.map(run, range(clients)) for t in chunk]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model-uri",
        default=None,
        help="serve this registered model (MLFLOW_TRACKING_URI must point at its store)",
    )
    parser.add_argument(
        "--requests", type=int, default=300, help="single-row requests per measurement"
    )
    parser.add_argument("--batches", type=int, default=16, help="1,000-row batches per measurement")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        if args.model_uri:
            tracking_uri, model_uri = (
                os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"),
                args.model_uri,
            )
        else:
            tracking_uri, model_uri = build_model(root)
        process, url = start_server(tracking_uri, model_uri, root / "server.log")
        try:
            one = json.dumps({"dataframe_records": [QUERY]})
            rng = np.random.default_rng(0)
            gpus = [
                "NVIDIA H100 PCIe",
                "NVIDIA L4",
                "NVIDIA A100 SXM4 80GB",
                "NVIDIA A10G",
                "NVIDIA L40S",
            ]
            batch = [
                {
                    **QUERY,
                    "gpu": gpus[i % len(gpus)],
                    "request_rate_rps": float(rng.uniform(0.1, 4)),
                }
                for i in range(1000)
            ]
            thousand = json.dumps({"dataframe_records": batch})
            with httpx.Client(timeout=120) as client:
                for _ in range(20):
                    timed_post(client, url, one)  # warm-up
                timed_post(client, url, thousand)
            rows = []
            loads = (
                ("single row", one, args.requests, 1),
                ("1,000-row batch", thousand, args.batches, 1000),
            )
            for kind, body, requests, rows_per_request in loads:
                for clients, how in ((1, "sequential"), (CLIENTS, f"{CLIENTS} clients")):
                    values = latencies(url, body, requests, clients)
                    if rows_per_request == 1 and clients == 1:
                        sequential = values
                    wall = sum(values) / clients
                    p50, p99 = np.percentile(values, [50, 99]) * 1e3
                    rows.append(
                        (
                            f"{kind}, {how}",
                            len(values),
                            p50,
                            p99,
                            rows_per_request * len(values) / wall,
                        )
                    )
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)

    print("# Serving benchmark (mlflow models serve, one worker, --env-manager local)\n")
    print(f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}")
    print(f"- machine: {machine()}")
    print(f"- command: python bench/serving.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"- model: {model_uri}\n")
    print("| load | requests | p50 latency ms | p99 latency ms | throughput |")
    print("|---|---|---|---|---|")
    for label, count, p50, p99, rate in rows:
        unit = "rows/s" if "batch" in label else "req/s"
        print(f"| {label} | {count} | {p50:.1f} | {p99:.1f} | {rate:,.0f} {unit} |")
    print(f"\n(mean single-row latency, sequential: {statistics.mean(sequential) * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
