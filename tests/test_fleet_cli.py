"""`wattgpu recommend --fleet` on the shipped catalogue, a predictor made of the GPUs' specs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from wattgpu import recommendation as rec
from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR

LLM_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLM_70B = "meta-llama/Llama-3.1-70B-Instruct"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The team: a 70B at 40 req/s under ITL 50 ms and TTFT 1 s at p99.
TEAM = ["--model", LLM_70B, "--rate", "40", "--itl-slo-ms", "50", "--ttft-slo-ms", "1000"]
TEAM += ["--slo-percentile", "99"]
TICKETS = ["--model", LLM_8B, "--requests-per-day", "30000", "--output-tokens", "256"]
ITEM_3 = (
    "tp",
    "replicas",
    "gpus",
    "mean_gpus",
    "gpu_hours_per_day",
    "capacity_rps",
    "binding_slo",
    "power_w",
    "fleet_power_w",
    "energy_kwh_per_day",
    "energy_j_per_token",
)


def spec_predictor(catalog):
    """Weights read per token at the GPUs' bandwidth, slowed by the load; power from the TDP.

    ITL ms = 2 B x params / (tp x bandwidth) x (1 + rate / (10 x tp)); TTFT = 200 ms x (1 +
    rate / 20); p90 = 1.2 x, p99 = 1.5 x the median; power per GPU = TDP x (0.3 + 0.02 x rate).
    """
    params = catalog.llms["params_b"]

    def predict(queries: pd.DataFrame, target: str) -> pd.DataFrame:
        bandwidth = catalog.gpus.loc[queries["gpu"], "memory_bandwidth_gb_s"].to_numpy(float)
        tdp = catalog.gpus.loc[queries["gpu"], "tdp_w"].to_numpy(float)
        tp = queries["num_gpus"].to_numpy(float) if "num_gpus" in queries else 1.0
        rate = queries.get("request_rate_rps", pd.Series(1.0, index=queries.index)).to_numpy()
        if target == "power":
            value = tdp * (0.3 + 0.02 * rate)
        elif target == "ttft":
            value = 200.0 * (1 + rate / 20.0)
        else:
            weights = 2e3 * params.loc[queries["model"]].to_numpy(float)
            value = weights / (tp * bandwidth) * (1 + rate / (10.0 * tp))
        return pd.DataFrame(
            {
                "gpu": queries["gpu"].to_numpy(),
                "prediction": value,
                "lower": value * 0.9,
                "upper": value * 1.2,
                "p90": value * 1.2,
                "p99": value * 1.5,
                "warnings": "",
            }
        )

    return predict


@pytest.fixture
def run(tmp_path, monkeypatch, catalog):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(SHIPPED_DATA_DIR))
    monkeypatch.setattr(rec, "model_predictor", lambda *a, **k: spec_predictor(catalog))

    def invoke(*args):
        result = CliRunner().invoke(cli, ["recommend", *args], catch_exceptions=False)
        assert "Traceback" not in result.output
        return result

    return invoke


def test_the_team_that_got_no_answer_gets_fleets(run, catalog):
    result = run(*TEAM, "--fleet", "--format", "json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert len(records) == len(catalog.gpus)  # every GPU: a fleet, or why none
    best = records[0]
    assert best["rank"] == 1 and set(ITEM_3) <= set(best)
    assert best["gpus"] == best["replicas"] * best["tp"]
    # the verdict names the fleet: replicas x TP x GPU, all day (a flat load), mean GPUs, kWh
    gpu, tp, replicas = best["gpu"], best["tp"], best["replicas"]
    name = f"{replicas} × {tp} × {gpu} (TP {tp})" if tp > 1 else f"{replicas} × {gpu}"
    assert result.stderr.startswith(f"Best: {name} all day, {best['mean_gpus']:.3g} GPUs on ")
    assert "under ITL p99 ≤ 50 ms and TTFT p99 ≤ 1000 ms" in result.stderr


def test_one_gpu_that_holds_the_load_reads_as_today(run):
    single = run(*TICKETS, "--itl-slo-ms", "80", "--format", "json")
    fleets = run(*TICKETS, "--itl-slo-ms", "80", "--fleet", "--format", "json")
    assert single.exit_code == fleets.exit_code == 0
    today, fleet = json.loads(single.stdout)[0], json.loads(fleets.stdout)[0]
    assert fleet["gpu"] == today["gpu"] and (fleet["replicas"], fleet["tp"]) == (1, 1)
    # one GPU all day: the same energy as today's row (its power at 0.347 req/s, 24 h)
    assert fleet["energy_kwh_per_day"] == pytest.approx(today["energy_kwh_per_day"])
    assert fleet["energy_j_per_token"] == pytest.approx(today["energy_j_per_token"])


def test_an_evening_peak_and_the_two_scaling_policies(run, tmp_path):
    # 200 req/s from 17:00 to 21:59, 5 req/s otherwise; an 8B under ITL 50 ms
    profile = tmp_path / "evening.csv"
    rates = np.where((np.arange(24) >= 17) & (np.arange(24) < 22), 200.0, 5.0)
    pd.DataFrame({"hour": range(24), "rate": rates}).to_csv(profile, index=False)
    args = ["--model", LLM_8B, "--load-profile", str(profile), "--itl-slo-ms", "50"]
    static = run(*args, "--fleet", "--format", "json")
    hourly = run(*args, "--scaling", "hourly", "--format", "json")
    assert static.exit_code == hourly.exit_code == 0, static.output
    s = {r["gpu"]: r for r in json.loads(static.stdout)}
    h = {r["gpu"]: r for r in json.loads(hourly.stdout)}
    best = json.loads(static.stdout)[0]
    assert best["gpus"] > best["mean_gpus"] and best["peak_hour"] == 17
    assert static.stderr.startswith(f"Best: {best['replicas']} ×")
    assert "at the 17:00 peak" in static.stderr
    # the same fleet (one replica holds the 5 req/s off-peak) rents the peak's GPUs all day
    # (static), or 5 hours of the peak's and 19 of one replica's (hourly), for less energy
    same = h[best["gpu"]]
    assert same["tp"] == best["tp"] and same["gpus"] == best["gpus"]
    assert best["gpu_hours_per_day"] == 24 * best["gpus"]
    assert same["gpu_hours_per_day"] == 5 * best["gpus"] + 19 * best["tp"]
    assert same["energy_kwh_per_day"] < s[best["gpu"]]["energy_kwh_per_day"]
    assert same["mean_gpus"] == pytest.approx(same["gpu_hours_per_day"] / 24)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp", "1,3"], "Error: --tp must be powers of two: 1, 2, 4, 8, 16, 32, 64; got '3'"),
        (["--tp", "128"], "Error: --tp must be powers of two: 1, 2, 4, 8, 16, 32, 64; got '128'"),
        (["--max-gpus", "0"], "Error: --max-gpus must be a whole number from 1; got 0"),
        (["--scaling", "daily"], "Error: --scaling must be one of static, hourly; got 'daily'"),
        (
            ["--rank-by", "cost"],
            "Error: --rank-by cost needs prices: give --price-file",
        ),
        (
            ["--fleet", "--scenario", "offline"],
            "Error: fleets serve a server's load; got --scenario offline",
        ),
    ],
)
def test_fleet_options_are_refused_in_one_line(run, args, message):
    result = run(*TICKETS, *args)
    assert result.exit_code == 1
    assert result.output.strip() == message


def test_no_gpu_holds_the_model_at_the_sizes_allowed_names_the_smallest_that_would(run):
    result = run(*TEAM, "--gpus", "H100,L4", "--tp", "1")
    assert result.exit_code == 3
    # 70.6B x 2 B = 141.1 GB: two 80 GB H100s hold it; L4s (24 GB) need eight
    assert result.output.splitlines()[-1] == (
        "no GPU holds the model at TP 1: the smallest size that would is TP 2 "
        "(2 x NVIDIA H100 SXM5); allow it with --tp"
    )


def test_the_table_and_the_days_chart(run, tmp_path):
    chart = tmp_path / "day.png"
    result = run(*TEAM, "--gpus", "H100,H200,L4", "--fleet", "--plot", str(chart))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].endswith(
        "; fleets of TP 1, 2, 4, 8, up to 64 GPUs, static scaling, ranked by energy"
    )
    assert lines[1].split()[:5] == ["rank", "GPU", "TP", "replicas", "GPUs"]
    assert lines[2].split()[0] == "1" and lines[-1].startswith("Best: ")
    assert chart.read_bytes()[:8] == PNG_SIGNATURE


def test_a_fleet_answer_is_logged_as_a_run(run, tmp_path):
    from mlflow.tracking import MlflowClient

    result = run(*TEAM, "--gpus", "H100,H200", "--fleet", "--format", "json", "--log")
    assert result.exit_code == 0, result.output
    best = json.loads(result.stdout)[0]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("wattgpu-recommend")
    (logged,) = client.search_runs([experiment.experiment_id])
    files = {a.path for a in client.list_artifacts(logged.info.run_id, "recommendation")}
    assert files == {
        "recommendation/table.csv",
        "recommendation/chart.png",
        "recommendation/verdict.txt",
    }
    assert logged.data.metrics["best_gpus"] == best["gpus"]
    assert logged.data.metrics["best_energy_kwh_per_day"] == pytest.approx(
        best["energy_kwh_per_day"]
    )


def test_a_load_no_one_gpu_holds_is_answered_with_fleets_without_asking(run):
    # the team's plain command: no GPU holds a 70B and the KV cache of 40 req/s, so the answer
    # is the fleets --fleet gives, and the verdict says why (exit 0, not 3)
    plain = run(*TEAM, "--format", "json")
    fleets = run(*TEAM, "--fleet", "--format", "json")
    assert plain.exit_code == fleets.exit_code == 0, plain.output
    assert json.loads(plain.stdout) == json.loads(fleets.stdout)
    assert plain.stderr == (
        "no one GPU holds the weights and this load's KV cache, so fleets (--fleet): "
        + fleets.stderr
    )
    # offline, fleets do not apply: no GPU, exit 3 as before
    offline = run("--model", LLM_70B, "--scenario", "offline", "--gpus", "H100,L4")
    assert offline.exit_code == 3 and "no GPU fits the model" in offline.output
