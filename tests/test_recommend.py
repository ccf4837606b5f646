"""`wattgpu recommend`: hand-computed rankings with an injected predictor, then the registry."""

from __future__ import annotations

import json
import subprocess
import sys

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import wattgpu
from wattgpu import recommendation as rec
from wattgpu.cli import cli
from wattgpu.cli_recommend import TABLE_COLUMNS
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.errors import QueryError, UnknownNameError

LLM_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLM_70B = "meta-llama/Llama-3.1-70B-Instruct"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Hand-set predictions for the small catalogue: power = a + b x rate (W), ITL constant (ms);
# intervals: power [0.9x, 1.1x], ITL [0.9x, 1.5x].
POWER = {"NVIDIA H100 SXM5": (200.0, 100.0), "NVIDIA L4": (40.0, 20.0)}
ITL = {"NVIDIA H100 SXM5": 10.0, "NVIDIA L4": 60.0}


def hand_predictor(queries: pd.DataFrame, target: str) -> pd.DataFrame:
    rate = queries.get("request_rate_rps", pd.Series(1.0, index=queries.index)).fillna(1.0)
    if target == "power":
        value = np.array(
            [POWER[g][0] + POWER[g][1] * r for g, r in zip(queries["gpu"], rate, strict=True)]
        )
        lower, upper = value * 0.9, value * 1.1
    else:
        value = np.array([ITL[g] for g in queries["gpu"]])
        lower, upper = value * 0.9, value * 1.5
    return pd.DataFrame(
        {"prediction": value, "lower": lower, "upper": upper, "warnings": ""}, index=queries.index
    )


def ask(small_catalog, **kwargs):
    return rec.recommend(LLM_8B, catalog=small_catalog, predictor=hand_predictor, **kwargs)


def by_gpu(table: pd.DataFrame) -> dict[str, dict]:
    return {row["gpu"]: row for row in table.to_dict("records")}


def test_constant_rate_arithmetic_and_ranking(small_catalog):
    # 43,200 requests a day = 0.5 req/s; 256 output tokens -> 128 tokens/s.
    table = ask(small_catalog, requests_per_day=43200, output_tokens=256)
    rows = by_gpu(table)
    l4, h100 = rows["NVIDIA L4"], rows["NVIDIA H100 SXM5"]
    assert l4["power_w"] == pytest.approx(50.0)  # 40 + 20 x 0.5
    assert l4["tokens_per_s"] == pytest.approx(128.0)
    assert l4["energy_j_per_token"] == pytest.approx(50.0 / 128.0)  # W / (tokens/s)
    assert l4["energy_kwh_per_day"] == pytest.approx(50.0 * 24 / 1000)  # 1.2 kWh
    assert h100["energy_kwh_per_day"] == pytest.approx(250.0 * 24 / 1000)  # 6.0 kWh
    # Little's law: 0.5 req/s x 256 tokens x 0.060 s = 7.68 -> 8 sequences in flight.
    assert l4["concurrent_seqs"] == 8 and h100["concurrent_seqs"] == 2  # 1.28 -> 2
    # KV per token 2 x 8 heads x 128 x 2 B x 32 layers = 131,072 B; x (512 + 256) tokens.
    assert l4["kv_cache_gb"] == pytest.approx(8 * 131072 * 768 / 1e9)
    # no SLO: both fit and are ranked, least energy first; the verdict repeats the table.
    assert list(table["gpu"]) == ["NVIDIA L4", "NVIDIA H100 SXM5"]
    assert list(table["rank"]) == [1, 2]
    assert table["meets_slo"].isna().all()
    assert rec.verdict(table) == "Best: NVIDIA L4 — 50 W, 0.391 J/token, 1.2 kWh/day, ITL 60 ms"


def test_ranking_is_consistent_with_the_printed_predictions(small_catalog):
    table = ask(small_catalog, rate=0.2, itl_slo_ms=100)
    ranked = table[table["rank"].notna()]
    assert ranked["energy_j_per_token"].is_monotonic_increasing
    assert ranked["power_w"].is_monotonic_increasing  # a server: same order as mean power
    assert np.allclose(ranked["energy_j_per_token"], ranked["power_w"] / ranked["tokens_per_s"])
    assert np.allclose(ranked["energy_kwh_per_day"], ranked["power_w"] * 24 / 1000)
    assert (ranked["power_lower_w"] <= ranked["power_w"]).all()
    assert (ranked["itl_ms"] <= ranked["itl_upper_ms"]).all()
    optional = (*rec.PRICE_COLUMNS, *rec.TTFT_COLUMNS)  # only with prices, with a TTFT SLO
    assert list(table.columns) == [c for c in rec.COLUMNS if c not in optional]


def test_load_profile_energy_by_hand(small_catalog):
    # 2 hours at 1 req/s, 22 hours at 0.5 req/s, 256 output tokens.
    profile = pd.DataFrame({"hour": range(24), "rate": [1.0] * 2 + [0.5] * 22})
    rows = by_gpu(ask(small_catalog, load_profile=profile, output_tokens=256, itl_slo_ms=80))
    # L4: 2 h x (40 + 20 x 1) W + 22 h x (40 + 20 x 0.5) W = 120 + 1,100 = 1,220 Wh = 1.22 kWh
    # H100: 2 h x 300 W + 22 h x 250 W = 600 + 5,500 = 6,100 Wh = 6.1 kWh
    assert rows["NVIDIA L4"]["energy_kwh_per_day"] == pytest.approx(1.22)
    assert rows["NVIDIA H100 SXM5"]["energy_kwh_per_day"] == pytest.approx(6.1)
    assert rows["NVIDIA L4"]["power_w"] == pytest.approx(1220 / 24)  # time-averaged
    # tokens a day: (2 x 3600 x 1 + 22 x 3600 x 0.5) x 256 = 46,800 x 256 = 11,980,800
    assert rows["NVIDIA L4"]["energy_j_per_token"] == pytest.approx(1220 * 3600 / 11_980_800)
    # the busiest hour sets the sequences in flight: 1 x 256 x 0.060 = 15.36 -> 16
    assert rows["NVIDIA L4"]["concurrent_seqs"] == 16


def test_idle_hours_count_power_but_not_latency(small_catalog):
    profile = pd.DataFrame({"hour": range(24), "rate": [0.0] * 12 + [1.0] * 12})
    rows = by_gpu(ask(small_catalog, load_profile=profile))
    # 12 h idle at the trickle rate 0.01 req/s (40.2 W) + 12 h x 60 W = 482.4 + 720 Wh
    assert rows["NVIDIA L4"]["energy_kwh_per_day"] == pytest.approx((482.4 + 720) / 1000)
    assert rows["NVIDIA L4"]["itl_ms"] == pytest.approx(60.0)


def test_slo_filter_exact(small_catalog):
    table = ask(small_catalog, rate=0.5, itl_slo_ms=50)
    rows = by_gpu(table)
    assert rows["NVIDIA H100 SXM5"]["rank"] == 1 and rows["NVIDIA H100 SXM5"]["meets_slo"]
    assert rows["NVIDIA H100 SXM5"]["meets_slo_upper"]  # 15 ms <= 50 ms
    assert pd.isna(rows["NVIDIA L4"]["rank"]) and not rows["NVIDIA L4"]["meets_slo"]
    assert rows["NVIDIA L4"]["reason"] == "ITL 60.0 ms > 50 ms"
    # exactly at the SLO meets it
    assert by_gpu(ask(small_catalog, rate=0.5, itl_slo_ms=60))["NVIDIA L4"]["rank"] == 1
    # 12 ms: the H100's 10 ms meets it, its interval's upper end (15 ms) does not
    loose = by_gpu(ask(small_catalog, rate=0.5, itl_slo_ms=12))["NVIDIA H100 SXM5"]
    assert loose["meets_slo"] and not loose["meets_slo_upper"] and loose["rank"] == 1
    strict = ask(small_catalog, rate=0.5, itl_slo_ms=12, strict=True)
    assert strict["rank"].isna().all()
    assert rec.verdict(strict, 12, strict=True) == (
        "no GPU meets ITL ≤ 12 ms at the upper end of its interval; "
        "closest: NVIDIA H100 SXM5 (15.0 ms)"
    )


def test_no_gpu_meets_names_the_closest(small_catalog):
    table = ask(small_catalog, rate=0.5, itl_slo_ms=5)
    assert table["rank"].isna().all() and len(table) == 2
    assert rec.verdict(table, 5) == "no GPU meets ITL ≤ 5 ms; closest: NVIDIA H100 SXM5 (10.0 ms)"


def test_too_small_gpus_are_excluded_with_their_reason(small_catalog):
    big = rec.recommend(
        LLM_70B, rate=0.5, itl_slo_ms=80, catalog=small_catalog, predictor=hand_predictor
    )
    rows = by_gpu(big)
    assert not rows["NVIDIA L4"]["fits"] and pd.isna(rows["NVIDIA L4"]["power_w"])
    assert rows["NVIDIA L4"]["reason"] == "weights 141.2 GB > 24 GB"
    assert rows["NVIDIA H100 SXM5"]["reason"] == "weights 141.2 GB > 80 GB"
    assert rec.verdict(big, 80).startswith("no GPU fits the model")
    # the weights fit an L4, the KV cache of 10 req/s does not:
    # 10 x 256 x 0.060 = 153.6 -> 154 sequences x 0.1007 GB = 15.5 GB;
    # usable: 16.06 GB + 90 % of the 7.94 GB left = 23.2 GB
    busy = by_gpu(ask(small_catalog, rate=10))["NVIDIA L4"]
    assert not busy["fits"] and pd.isna(busy["rank"])
    assert busy["reason"] == (
        "weights 16.1 GB + KV cache for 154 concurrent sequences 15.5 GB > 23.2 GB usable of 24 GB"
    )


def test_offline_uses_the_engine_batch(small_catalog):
    rows = by_gpu(ask(small_catalog, scenario="offline", requests_per_day=86400))
    l4 = rows["NVIDIA L4"]
    # KV cache room: 0.9 x 7.94 GB / 0.1007 GB per sequence = 70.99 -> a batch of 70
    assert l4["concurrent_seqs"] == 70
    assert l4["tokens_per_s"] == pytest.approx(70 / 0.060)
    assert l4["energy_j_per_token"] == pytest.approx(60.0 * 0.060 / 70)  # W x ITL / batch
    # 86,400 requests x 256 tokens / (1,166.7 tokens/s) = 5.27 h of batch work at 60 W
    hours = 86400 * 256 / (70 / 0.060) / 3600
    assert l4["busy_hours"] == pytest.approx(hours)
    assert l4["energy_kwh_per_day"] == pytest.approx(60.0 * hours / 1000)


def test_closed_loop_concurrency_is_the_whole_load(small_catalog):
    asked = []

    def predictor(queries, target):
        asked.append(queries)
        return hand_predictor(queries, target)

    table = rec.recommend(
        LLM_8B, concurrency=16, catalog=small_catalog, predictor=predictor, output_tokens=256
    )
    # one query per GPU and target, with the users and no rate
    assert all(list(q["concurrency"]) == [16.0] * len(q) for q in asked)
    assert all("request_rate_rps" not in q.columns for q in asked)
    l4 = by_gpu(table)["NVIDIA L4"]
    # the hand predictor reads a blank rate as 1: power 40 + 20 = 60 W; ITL 60 ms
    # 16 users decode one token each per 60 ms: 16 / 0.060 = 266.67 tokens/s, all day
    assert l4["concurrent_seqs"] == 16 and l4["busy_hours"] == 24
    assert l4["tokens_per_s"] == pytest.approx(16 / 0.060)
    assert l4["energy_j_per_token"] == pytest.approx(60.0 * 0.060 / 16)  # 0.225 J
    assert l4["energy_kwh_per_day"] == pytest.approx(60.0 * 24 / 1000)  # 1.44 kWh
    assert table.attrs["request"]["concurrency"] == 16


def test_the_client_and_engine_knobs_reach_every_query_or_are_refused_first(small_catalog):
    from wattgpu.errors import ConfigError

    asked = []

    def predictor(queries, target):
        asked.append(queries)
        return hand_predictor(queries, target).assign(client=queries["client"])

    setup = {"client": "llm-pilot", "max_num_seqs": 8, "chunked_prefill": "off"}
    table = rec.recommend(
        LLM_8B, concurrency=16, catalog=small_catalog, predictor=predictor, setup=setup
    )
    assert all(list(q["client"]) == ["llm-pilot"] * len(q) for q in asked)
    assert all(list(q["max_num_seqs"]) == [8.0] * len(q) for q in asked)
    assert all(list(q["chunked_prefill"]) == [0.0] * len(q) for q in asked)
    assert {k: table.attrs["request"][k] for k in setup} == {**setup, "chunked_prefill": 0.0}
    # refused before any prediction: a Poisson client for users, a knob out of its range
    with pytest.raises(QueryError, match=r"^client 'poisson' sends requests at a rate: give rate"):
        ask(small_catalog, concurrency=16, setup={"client": "poisson"})
    with pytest.raises(QueryError, match=r"^max_batched_tokens must be a whole number from 16 "):
        ask(small_catalog, rate=1.0, setup={"max_batched_tokens": 15})
    # a model that predates them would ignore them: refused, not answered as if it took them
    with pytest.raises(ConfigError, match="predates the client and engine knobs"):
        ask(small_catalog, rate=1.0, setup={"max_num_seqs": 4})


def test_ttft_slo_asks_the_ttft_model_and_leaves_out_slow_first_tokens(small_catalog):
    ttft = {"NVIDIA H100 SXM5": 30.0, "NVIDIA L4": 90.0}

    def predictor(queries, target):
        if target != "ttft":
            return hand_predictor(queries, target)
        value = np.array([ttft[g] for g in queries["gpu"]])
        return pd.DataFrame({"prediction": value, "lower": value, "upper": value, "warnings": ""})

    table = rec.recommend(
        LLM_8B, rate=0.5, ttft_slo_ms=50, catalog=small_catalog, predictor=predictor
    )
    rows = by_gpu(table)
    # the L4 uses less energy (50 W vs 250 W at 0.5 req/s) but its first token takes 90 ms
    assert rows["NVIDIA L4"]["reason"] == "TTFT 90 ms > 50 ms"
    assert rows["NVIDIA L4"]["meets_ttft_slo"] is False or not rows["NVIDIA L4"]["meets_ttft_slo"]
    assert rows["NVIDIA H100 SXM5"]["rank"] == 1 and rows["NVIDIA H100 SXM5"]["ttft_ms"] == 30
    # without a TTFT SLO the TTFT columns are not in the answer
    assert "ttft_ms" not in ask(small_catalog, rate=0.5).columns
    # the verdict names the TTFT limit: 250 W / (0.5 req/s x 256 tokens) = 1.95 J/token,
    # 250 W x 24 h = 6 kWh/day
    assert rec.verdict(table, None, False, 50) == (
        "Best: NVIDIA H100 SXM5 — 250 W, 1.95 J/token, 6 kWh/day, ITL 10 ms, TTFT 30 ms (≤ 50 ms)"
    )
    both = rec.recommend(
        LLM_8B,
        rate=0.5,
        itl_slo_ms=50,
        ttft_slo_ms=20,
        catalog=small_catalog,
        predictor=predictor,
    )
    # the L4 misses the ITL limit (60 ms); the H100 meets it but not the TTFT one (30 ms)
    assert rec.verdict(both, 50, False, 20) == (
        "no GPU meets ITL ≤ 50 ms and TTFT ≤ 20 ms; closest: NVIDIA H100 SXM5 (TTFT 30.0 ms)"
    )


def test_the_header_and_the_verdict_name_every_limit_ranked_under(small_catalog):
    from wattgpu.cli_recommend import _headline

    def predictor(queries, target):
        if target != "ttft":
            return hand_predictor(queries, target)
        return hand_predictor(queries, "itl").assign(prediction=30.0)

    table = rec.recommend(
        LLM_8B,
        concurrency=8,
        itl_slo_ms=80,
        ttft_slo_ms=500,
        strict=True,
        catalog=small_catalog,
        predictor=predictor,
    )
    assert _headline(table) == (
        f"{LLM_8B}, server with 8 concurrent users, 512 input / 256 output tokens, "
        "ITL ≤ 80 ms and TTFT ≤ 500 ms (strict: at the upper end of the ITL interval)"
    )
    # strict: the L4's ITL interval reaches 60 x 1.5 = 90 ms > 80 ms, so it is left out and
    # the H100 (10 ms, upper end 15 ms) is best
    best = rec.verdict(table, 80, True, 500)
    assert best.startswith("Best: NVIDIA H100 SXM5 — ")
    assert best.endswith(
        "ITL 10 ms (≤ 80 ms, and 15 ms at the upper end of its interval), TTFT 30 ms (≤ 500 ms)"
    )


def test_prices_add_cost_columns(small_catalog):
    table = ask(small_catalog, rate=0.5, prices={"L4": 0.8, "NVIDIA H100 80GB HBM3": 4.0})
    rows = by_gpu(table)
    # 0.5 req/s x 86,400 s x 256 = 11,059,200 tokens a day
    assert rows["NVIDIA L4"]["usd_per_day"] == pytest.approx(19.2)
    assert rows["NVIDIA L4"]["usd_per_1m_tokens"] == pytest.approx(19.2 / 11.0592)
    assert rows["NVIDIA H100 SXM5"]["usd_per_1m_tokens"] == pytest.approx(96 / 11.0592)
    assert rows["NVIDIA L4"]["cost_rank"] == 1 and rows["NVIDIA H100 SXM5"]["cost_rank"] == 2
    assert rec.verdict(table).endswith(", $1.74/1M tokens")


def test_gpus_resolve_through_aliases(small_catalog):
    table = ask(small_catalog, rate=0.5, gpus=["H100"])
    assert list(table["gpu"]) == ["NVIDIA H100 SXM5"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0}, "rate must be a finite number > 0; got 0"),
        ({"rate": -1.0}, "rate must be a finite number > 0; got -1"),
        ({"rate": float("nan")}, "rate must be a finite number > 0"),
        ({"requests_per_day": 0}, "requests_per_day must be a finite number > 0"),
        ({"rate": 1, "requests_per_day": 5}, "give one load, not rate and requests_per_day"),
        ({"rate": 1, "concurrency": 8}, "give one load, not rate and concurrency"),
        ({"concurrency": 2.5}, "concurrency must be a whole number from 1 to 65536"),
        ({"concurrency": 0}, "concurrency must be a finite number > 0; got 0"),
        ({"concurrency": 8, "scenario": "offline"}, "concurrency applies to a server only"),
        ({}, "a server needs a load"),
        ({"rate": 1, "itl_slo_ms": -3}, "itl_slo_ms must be a finite number > 0; got -3"),
        ({"rate": 1, "output_tokens": 0.5}, "output_tokens must be a whole number >= 1"),
        ({"rate": 1, "scenario": "batch"}, "scenario must be one of offline, server"),
        ({"rate": 1, "prices": {"L4": -1}}, "usd_per_hour must be a finite number >= 0"),
        ({"rate": 1, "prices": {"L5": 1}}, "prices: gpu 'L5' is not in the catalogue; closest"),
    ],
)
def test_bad_inputs_name_the_field(small_catalog, kwargs, message):
    with pytest.raises(QueryError) as caught:
        ask(small_catalog, **kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (pd.DataFrame({"hour": range(24)}), "load profile lacks column(s) rate"),
        (pd.DataFrame({"hour": range(1, 25), "rate": 1.0}), "hour must be a whole number 0-23"),
        (pd.DataFrame({"hour": [0.5, *range(1, 24)], "rate": 1.0}), "hour must be a whole"),
        (pd.DataFrame({"hour": [0, 0, *range(2, 24)], "rate": 1.0}), "hour must be unique"),
        (pd.DataFrame({"hour": range(23), "rate": 1.0}), "missing [23]"),
        (pd.DataFrame({"hour": range(24), "rate": [-1.0] + [1.0] * 23}), "rate must be a finite"),
        (pd.DataFrame({"hour": range(24), "rate": [np.inf] + [1.0] * 23}), "rate must be a finite"),
        (pd.DataFrame({"hour": range(24), "rate": 0.0}), "rate must be > 0 in at least one hour"),
    ],
)
def test_malformed_profiles(profile, message):
    with pytest.raises(QueryError, match="load profile") as caught:
        rec.check_profile(profile)
    assert message in str(caught.value)


def test_unknown_model_gives_close_matches(small_catalog):
    with pytest.raises(UnknownNameError, match="closest: meta-llama/Llama-3.1-8B-Instruct"):
        rec.recommend(
            "meta-llama/Llama-3.1-8B-Instrct",
            rate=1,
            catalog=small_catalog,
            predictor=hand_predictor,
        )


def test_package_level_call_and_cheap_import(small_catalog):
    table = wattgpu.recommend(LLM_8B, rate=0.5, catalog=small_catalog, predictor=hand_predictor)
    assert table["rank"].tolist() == [1, 2]
    probe = "import sys, wattgpu; print('pandas' in sys.modules, wattgpu.__version__)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "False"


# --- the command line, with a predictor computed from the real catalogue's specs ---------------


def spec_predictor(catalog):
    def predict(queries: pd.DataFrame, target: str) -> pd.DataFrame:
        specs = catalog.gpus.loc[queries["gpu"]]
        rate = queries.get("request_rate_rps", pd.Series(1.0, index=queries.index)).to_numpy()
        if target == "power":
            value = specs["tdp_w"].to_numpy(float) * (0.3 + 0.1 * rate)
        else:  # 16 GB read per token at the card's bandwidth, slowed by the load
            value = 16e3 / specs["memory_bandwidth_gb_s"].to_numpy(float) * (1 + 0.1 * rate)
        return pd.DataFrame(
            {"prediction": value, "lower": value * 0.9, "upper": value * 1.2, "warnings": ""}
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


TICKETS = ("--model", LLM_8B, "--requests-per-day", "30000", "--output-tokens", "256")


def test_cli_table_and_verdict(run):
    result = run(*TICKETS, "--itl-slo-ms", "80")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{LLM_8B}, server at 0.347 req/s on average (30,000 requests/day)")
    assert lines[1].split()[:2] == ["rank", "GPU"]
    best = lines[-1].removeprefix("Best: ").split(" — ")[0]
    assert lines[-1].startswith("Best: ") and lines[2].split()[0] == "1" and best in lines[2]
    assert "weights 16.1 GB > 16 GB" in result.output  # the T4 and the 16 GB V100s


def test_cli_json_carries_every_column_and_plot_is_a_png(run, tmp_path):
    chart = tmp_path / "chart.png"
    result = run(*TICKETS, "--itl-slo-ms", "80", "--format", "json", "--plot", str(chart))
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    shipped = pd.read_csv(SHIPPED_DATA_DIR / "gpus.csv")
    assert len(records) == len(shipped)  # every catalogue GPU is ranked
    optional = {*rec.PRICE_COLUMNS, *rec.TTFT_COLUMNS}
    shown = set(TABLE_COLUMNS) - optional
    assert shown <= set(records[0]) and set(rec.COLUMNS) - optional <= set(records[0])
    assert records[0]["rank"] == 1 and records[0]["meets_slo"] is True
    assert result.stderr.startswith(f"Best: {records[0]['gpu']} — ")
    assert chart.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(chart)
    assert image.ndim == 3 and image.shape[0] > 100
    csv = run(*TICKETS, "--format", "csv", "--price-file", str(write_prices(tmp_path)))
    frame = pd.read_csv(pd.io.common.StringIO(csv.stdout))
    shown = set(TABLE_COLUMNS) - set(rec.TTFT_COLUMNS)
    assert shown <= set(frame.columns) and frame["cost_rank"].notna().sum() == 2


def test_the_chart_names_each_point_beside_it_and_no_two_names_overlap(catalog):
    from matplotlib.text import Text

    from wattgpu.cli_recommend import _LABEL_RINGS, LABELLED_RANKS, chart

    table = rec.recommend(
        LLM_8B, requests_per_day=30000, itl_slo_ms=80, catalog=catalog,
        predictor=spec_predictor(catalog),
    )  # fmt: skip
    figure = chart(table, 80)
    ax = figure.axes[0]
    renderer = figure.canvas.get_renderer()
    names = [t for t in ax.texts if t.get_text()]
    shown = table[table["fits"] & table["power_w"].notna()]
    labelled = shown[(shown["rank"] <= LABELLED_RANKS) | shown["pareto"]]
    assert sorted(t.get_text() for t in names) == sorted(
        g.removeprefix("NVIDIA ") for g in labelled["gpu"]
    )
    for text in names:
        text.update_positions(renderer)
    boxes = [Text.get_window_extent(t, renderer) for t in names]  # the names, not their lines
    for i, one in enumerate(boxes):
        for other in boxes[i + 1 :]:
            assert not one.overlaps(other), (one, other)
    # each name within the farthest ring of its own point (in pixels), not somewhere else
    reach = max(_LABEL_RINGS) * figure.dpi / 72 + 1
    for text, box in zip(names, boxes, strict=True):
        x, y = ax.transData.transform(text.xy)
        dx = max(box.x0 - x, 0, x - box.x1)
        dy = max(box.y0 - y, 0, y - box.y1)
        assert max(dx, dy) <= reach, (text.get_text(), dx, dy)


def write_prices(tmp_path, rows=(("L4", 0.8), ("H100", 4.0))):
    path = tmp_path / "prices.csv"
    pd.DataFrame(rows, columns=["gpu", "usd_per_hour"]).to_csv(path, index=False)
    return path


def test_cli_no_gpu_meets_exits_3(run):
    result = run(*TICKETS, "--itl-slo-ms", "1")
    assert result.exit_code == 3
    assert (
        result.output.splitlines()[-1] == "no GPU meets ITL ≤ 1 ms; closest: NVIDIA B200 (2.1 ms)"
    )


def test_cli_help_documents_exit_codes(run):
    result = run("--help")
    assert result.exit_code == 0
    assert "3  no GPU meets the SLO" in result.output and "1  bad input" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", LLM_8B, "--rate", "0"), "--rate must be a finite number > 0; got 0"),
        (("--model", "llama-3.1-8b-instrct", "--rate", "1"), "closest: "),
        (("--model", LLM_8B, "--rate", "1", "--gpus", "H100,L5"), "--gpus 'L5' is not in"),
        (("--model", LLM_8B, "--rate", "1", "--requests-per-day", "9"), "give one load"),
        (("--model", LLM_8B, "--load-profile", "nope.csv"), "load profile not found: nope.csv"),
        (("--model", LLM_8B, "--load-profile", "{profile}"), "hour must be unique; got 3 twice"),
        (("--model", LLM_8B, "--rate", "1", "--price-file", "{prices}"), "gpu 'Z9' is not in"),
        (("--model", LLM_8B, "--rate", "1", "--price-file", "{negative}"), "usd_per_hour must"),
        (("--model", LLM_8B, "--rate", "1", "--price-file", "{nocolumn}"), "lacks column(s) usd"),
        (
            ("--model", LLM_8B, "--rate", "1", "--slo-percentile", "95"),
            "--slo-percentile must be one of 50, 90, 99; got 95",
        ),
        (
            ("--model", LLM_8B, "--rate", "1", "--itl-slo-ms", "80", "--slo-percentile", "99"),
            "the itl model gives no p99 (a model logged before its tails): rank at the median",
        ),
    ],
)
def test_cli_bad_inputs_are_one_line_exit_1(run, tmp_path, args, message):
    hours = [*range(24)]
    hours[4] = 3
    pd.DataFrame({"hour": hours, "rate": 1.0}).to_csv(tmp_path / "profile.csv", index=False)
    files = {
        "profile": tmp_path / "profile.csv",
        "prices": write_prices(tmp_path, (("L4", 1.0), ("Z9", 2.0))),
        "negative": write_prices(tmp_path / "..", (("L4", -1.0),)),
    }
    (tmp_path / "nocolumn.csv").write_text("gpu,price\nL4,1\n")
    files["nocolumn"] = tmp_path / "nocolumn.csv"
    args = [a.format(**files) for a in args]
    result = run(*args)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]


# --- on a registered model trained on small generated data --------------------------------------


@pytest.fixture(scope="module")
def store(store):
    """The session's registry (tests/conftest.py: both targets, v1 in production): its settings."""
    return store["settings"]


@pytest.mark.slow
def test_registry_ranking_matches_its_predictions(store, catalog):
    from wattgpu.lifecycle import client

    table = rec.recommend(
        LLM_8B, requests_per_day=30000, itl_slo_ms=80, settings=store, catalog=catalog
    )
    ranked = table[table["rank"].notna()]
    assert len(ranked) >= 10 and ranked["energy_j_per_token"].is_monotonic_increasing
    assert np.allclose(ranked["energy_j_per_token"], ranked["power_w"] / ranked["tokens_per_s"])
    # the numbers in the table are the registry models' answers for the same queries
    queries = pd.DataFrame(
        {
            "gpu": ranked["gpu"],
            "model": LLM_8B,
            "scenario": "server",
            "request_rate_rps": 30000 / 86400,
            "input_tokens": 512.0,
            "output_tokens": 256.0,
        }
    )
    answers = client.ask_models(store, queries, ("power", "itl"))
    assert np.allclose(ranked["power_w"], answers["power_prediction_w"])
    assert np.allclose(ranked["itl_ms"], answers["itl_prediction_ms"])
    big = by_gpu(rec.recommend(LLM_70B, rate=1, settings=store, catalog=catalog))
    assert big["NVIDIA L4"]["reason"] == "weights 141.1 GB > 24 GB"


@pytest.mark.slow
def test_registry_cli_json_plot_and_mlflow_run(store, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.tracking_uri)
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(SHIPPED_DATA_DIR))
    chart = tmp_path / "c.png"
    result = CliRunner().invoke(
        cli,
        ["recommend", *TICKETS, "--itl-slo-ms", "80", "--format", "json", "--plot", str(chart)]
        + ["--log"],
    )
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert records[0]["rank"] == 1 and chart.read_bytes()[:8] == PNG_SIGNATURE
    client = MlflowClient(store.tracking_uri)
    experiment = client.get_experiment_by_name("wattgpu-recommend")
    (run,) = client.search_runs([experiment.experiment_id])
    files = {a.path for a in client.list_artifacts(run.info.run_id, "recommendation")}
    assert files == {
        "recommendation/table.csv",
        "recommendation/chart.png",
        "recommendation/verdict.txt",
    }
    assert run.data.metrics["best_power_w"] == pytest.approx(records[0]["power_w"])
    hopeless = CliRunner().invoke(cli, ["recommend", *TICKETS, "--itl-slo-ms", "0.1"])
    assert hopeless.exit_code == 3 and "no GPU meets ITL ≤ 0.1 ms; closest: " in hopeless.output


def test_each_ranked_gpu_says_what_its_interval_is_calibrated_for(small_catalog):
    measured = {"NVIDIA H100 SXM5": "measured", "NVIDIA L4": "unseen GPU + unseen set-up"}

    def predictor(queries: pd.DataFrame, target: str) -> pd.DataFrame:
        return hand_predictor(queries, target).assign(novelty=queries["gpu"].map(measured))

    table = rec.recommend(
        LLM_8B, catalog=small_catalog, predictor=predictor, rate=0.2, itl_slo_ms=80
    )
    rows = by_gpu(table)
    assert rows["NVIDIA L4"]["itl_novelty"] == "unseen GPU + unseen set-up"
    assert rows["NVIDIA H100 SXM5"]["power_novelty"] == "measured"
    # the L4's 60 ms meets 80 ms, its upper end (90 ms) does not: the verdict says why so wide
    assert rec.verdict(table, itl_slo_ms=80).endswith(
        "up to 90 ms at the upper end of its interval, an interval for unseen GPU + unseen set-up)"
    )
    assert "ITL interval for" in rec_table_header(table)


def rec_table_header(table: pd.DataFrame) -> str:
    from wattgpu.cli_recommend import format_table

    return format_table(table).splitlines()[0]


def test_a_gpu_that_cannot_run_the_weight_format_is_left_out_with_the_reason():
    from wattgpu.data.catalog import Catalog

    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    asked = []

    def predictor(queries, target):
        asked.append(set(queries["gpu"]))
        value = np.full(len(queries), 100.0)  # 100 W, 100 ms: any number will do here
        return pd.DataFrame(
            {"prediction": value, "lower": value, "upper": value, "warnings": ""},
            index=queries.index,
        )

    # gpt-oss-20b ships in MXFP4: FP4 tensor cores from SM100, Marlin FP4 from SM80
    table = rec.recommend(
        "openai/gpt-oss-20b",
        scenario="offline",
        catalog=catalog,
        predictor=predictor,
        gpus=["NVIDIA Tesla V100 SXM2 32GB", "NVIDIA A100 SXM4 80GB"],
    )
    rows = by_gpu(table)
    assert rows["NVIDIA Tesla V100 SXM2 32GB"]["reason"] == (
        "no engine runs mxfp4 weights on compute capability 7.0"
    )
    assert rows["NVIDIA A100 SXM4 80GB"]["reason"] == ""
    # the V100 is never asked about
    assert all(gpus == {"NVIDIA A100 SXM4 80GB"} for gpus in asked)


# --- held at a percentile: the tails the models give beside their medians ----------------------

# Hand-set tails as multiples of the median: the H100's ITL spreads more than the L4's.
ITL_TAILS = {"NVIDIA H100 SXM5": (2.0, 5.0), "NVIDIA L4": (1.1, 1.5)}
TTFT = {"NVIDIA H100 SXM5": 30.0, "NVIDIA L4": 90.0}


def tail_predictor(queries: pd.DataFrame, target: str) -> pd.DataFrame:
    """``hand_predictor`` with p90 and p99 for ITL (``ITL_TAILS``) and TTFT (2x and 3x)."""
    if target == "power":
        return hand_predictor(queries, target)
    if target == "itl":
        answer = hand_predictor(queries, target)
        ratios = np.array([ITL_TAILS[g] for g in queries["gpu"]])
    else:
        value = np.array([TTFT[g] for g in queries["gpu"]])
        answer = pd.DataFrame({"prediction": value, "lower": value, "upper": value * 2})
        answer["warnings"] = ""
        ratios = np.tile([2.0, 3.0], (len(value), 1))
    answer["p90"] = answer["prediction"] * ratios[:, 0]
    answer["p99"] = answer["prediction"] * ratios[:, 1]
    answer["tails"] = "simulated"
    return answer


def at(percentile, small_catalog, **kwargs):
    return rec.recommend(
        LLM_8B,
        rate=0.5,
        catalog=small_catalog,
        predictor=tail_predictor,
        slo_percentile=percentile,
        **kwargs,
    )


def test_a_percentile_target_ranks_on_that_tail_and_can_change_the_winner(small_catalog):
    # ITL medians 10 (H100) and 60 ms (L4): both meet 70 ms and the L4 uses less energy
    median = at(50, small_catalog, itl_slo_ms=70)
    assert median.loc[median["rank"] == 1, "gpu"].tolist() == ["NVIDIA L4"]
    assert median.equals(
        ask(small_catalog, rate=0.5, itl_slo_ms=70).assign(
            itl_p90_ms=median["itl_p90_ms"], itl_p99_ms=median["itl_p99_ms"]
        )
    )  # at the median the tails change nothing but their own columns
    # p90: 10 x 2 = 20 and 60 x 1.1 = 66 ms, both within 70 ms: the L4 still
    p90 = by_gpu(at(90, small_catalog, itl_slo_ms=70))
    assert p90["NVIDIA L4"]["rank"] == 1 and p90["NVIDIA L4"]["itl_p90_ms"] == pytest.approx(66)
    # p99: 10 x 5 = 50 ms meets 70 ms, 60 x 1.5 = 90 ms does not: the H100 is best
    table = at(99, small_catalog, itl_slo_ms=70)
    rows = by_gpu(table)
    h100, l4 = rows["NVIDIA H100 SXM5"], rows["NVIDIA L4"]
    assert h100["rank"] == 1 and pd.isna(l4["rank"])
    assert l4["reason"] == "ITL p99 90.0 ms > 70 ms" and l4["meets_slo"] is False
    assert h100["itl_p99_ms"] == pytest.approx(50) and h100["itl_p90_ms"] == pytest.approx(20)
    # the median's interval reaches 10 x 1.5 = 15 ms; at p99 it reaches 15 x 5 = 75 ms > 70
    assert h100["meets_slo"] is True and h100["meets_slo_upper"] is False
    assert rec.verdict(table, 70, False, None, 99) == (
        "Best: NVIDIA H100 SXM5 — 250 W, 1.95 J/token, 6 kWh/day, "
        "ITL p99 50 ms (≤ 70 ms; up to 75 ms at the upper end of its interval)"
    )
    strict = at(99, small_catalog, itl_slo_ms=70, strict=True)
    assert by_gpu(strict)["NVIDIA H100 SXM5"]["reason"] == "ITL p99 up to 75.0 ms > 70 ms (strict)"
    assert rec.verdict(strict, 70, True, None, 99) == (
        "no GPU meets ITL p99 ≤ 70 ms at the upper end of its interval; "
        "closest: NVIDIA H100 SXM5 (ITL p99 75.0 ms)"
    )


def test_a_ttft_target_holds_at_the_same_percentile(small_catalog):
    # TTFT p99: 30 x 3 = 90 ms (H100) and 90 x 3 = 270 ms (L4), against 100 ms
    table = at(99, small_catalog, ttft_slo_ms=100)
    rows = by_gpu(table)
    assert rows["NVIDIA L4"]["reason"] == "TTFT p99 270 ms > 100 ms"
    assert rows["NVIDIA H100 SXM5"]["rank"] == 1
    assert rows["NVIDIA H100 SXM5"]["ttft_p99_ms"] == pytest.approx(90)
    assert rows["NVIDIA H100 SXM5"]["meets_ttft_slo"] is True
    assert rec.verdict(table, None, False, 100, 99).endswith(
        "ITL p99 50 ms, TTFT p99 90 ms (≤ 100 ms)"
    )
    # at the median both meet 100 ms (30 and 90 ms): the L4, which draws less
    assert by_gpu(at(50, small_catalog, ttft_slo_ms=100))["NVIDIA L4"]["rank"] == 1


def test_the_header_and_the_table_name_the_percentile_ranked_at(small_catalog):
    from wattgpu.cli_recommend import _headline, format_table

    table = at(90, small_catalog, itl_slo_ms=70, ttft_slo_ms=500)
    assert table.attrs["request"]["slo_percentile"] == 90
    assert _headline(table) == (
        f"{LLM_8B}, server at 0.5 req/s on average (43,200 requests/day), 512 input / 256 "
        "output tokens, ITL p90 ≤ 70 ms and TTFT p90 ≤ 500 ms (tails from the simulated "
        "serving loop)"
    )
    header = format_table(table).splitlines()[0]
    assert "ITL p90 ms" in header and "TTFT p90 ms" in header and "p99" not in header
    assert "p90" not in format_table(at(50, small_catalog, itl_slo_ms=70))


def test_a_percentile_is_50_90_or_99_and_a_tail_needs_a_model_that_gives_it(small_catalog):
    from wattgpu.errors import ConfigError

    for bad, shown in ((95, "95"), (99.5, "99.5"), ("p99", "'p99'"), (True, "True")):
        with pytest.raises(QueryError) as caught:
            ask(small_catalog, rate=0.5, slo_percentile=bad)
        assert str(caught.value) == f"slo_percentile must be one of 50, 90, 99; got {shown}"
    with pytest.raises(ConfigError) as caught:
        ask(small_catalog, rate=0.5, itl_slo_ms=70, slo_percentile=90)
    assert str(caught.value) == (
        "the itl model gives no p90 (a model logged before its tails): rank at the median "
        "(percentile 50), or use a model trained since"
    )
