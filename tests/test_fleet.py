"""Fleets by the hour (`recommendation.fleet`, `.fleets`): replicas, GPU-hours, kWh by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu.errors import QueryError
from wattgpu.recommendation.fleet import fleet_day, per_replica_rates, replicas_by_hour
from wattgpu.recommendation.fleets import checked_fleet, size_fleets

LLM_70B = "meta-llama/Llama-3.1-70B-Instruct"
WORKLOAD = {"scenario": "server", "input_tokens": 512.0, "output_tokens": 64.0}
# The evening peak: 100 req/s at 18:00 and 19:00, 10 req/s the other 22 hours.
EVENING = pd.DataFrame({"hour": range(24), "rate": [10.0] * 18 + [100.0] * 2 + [10.0] * 4})


def test_a_two_hour_day_by_hand():
    # 30 then 5 req/s; a replica of 2 GPUs holds 12 req/s: ceil(30 / 12) = 3, ceil(5 / 12) = 1
    rates = np.array([30.0, 5.0])
    replicas = replicas_by_hour(rates, np.array([12.0]))
    assert replicas.tolist() == [[3.0, 1.0]]
    shares = per_replica_rates(rates, replicas, 0.01)
    assert shares.tolist() == [[10.0, 5.0]]
    busy = 100.0 + 10.0 * shares  # W per GPU: 200 at 10 req/s, 150 at 5
    tp, idle = np.array([2.0]), np.array([100.0])
    static = fleet_day(rates, replicas, tp, busy, idle, 100.0, "static", np.array([2.0]))
    hourly = fleet_day(rates, replicas, tp, busy, idle, 100.0, "hourly", np.array([2.0]))
    s, h = static.iloc[0], hourly.iloc[0]
    # static: 3 x 2 x 200 = 1,200 Wh; then 1 x 2 x 150 + 2 idle x 2 x 100 = 700 Wh
    assert s["energy_kwh_per_day"] == pytest.approx(1.9)
    assert h["energy_kwh_per_day"] == pytest.approx(1.5)  # 1,200 + 300 Wh: none idles
    assert (s["replicas"], s["gpus"], s["peak_hour"]) == (3, 6, 0)
    assert s["mean_gpus"] == h["mean_gpus"] == pytest.approx(4.0)  # (6 + 2) / 2, either way
    assert s["gpu_hours_per_day"] == 12 and h["gpu_hours_per_day"] == 8  # 6 + 6; 6 + 2
    assert s["fleet_power_w"] == pytest.approx(950.0)  # 1,900 Wh / 2 h
    assert s["power_w"] == pytest.approx(1900 / 12) and h["power_w"] == pytest.approx(1500 / 8)
    # tokens: (30 + 5) x 3,600 x 100 = 12.6 M; 1.9 kWh = 6.84 MJ
    assert s["energy_j_per_token"] == pytest.approx(6.84e6 / 12.6e6)
    assert s["usd_per_day"] == 24.0 and h["usd_per_day"] == 16.0  # $2 a GPU-hour
    assert s["usd_per_1m_tokens"] == pytest.approx(24.0 / 12.6)


def test_replicas_by_hour_edges():
    # exactly at capacity needs no more; an hour without requests keeps one replica up;
    # no capacity, no fleet
    found = replicas_by_hour(np.array([20.0, 0.0, 20.1]), np.array([10.0, 0.0]))
    assert found[0].tolist() == [2.0, 1.0, 3.0]
    assert np.isnan(found[1]).all()


def stub(queries: pd.DataFrame, target: str) -> pd.DataFrame:
    """ITL = 10 + 2 x rate / tp ms; TTFT 100 ms; power per GPU = 100 + 2 x rate W."""
    rate = queries["request_rate_rps"].to_numpy(float)
    tp = queries["num_gpus"].to_numpy(float)
    value = {"itl": 10.0 + 2.0 * rate / tp, "power": 100.0 + 2.0 * rate}.get(target)
    value = np.full(len(queries), 100.0) if value is None else value
    return pd.DataFrame(
        {"gpu": queries["gpu"].to_numpy(), "prediction": value, "lower": value, "upper": value}
    ).assign(warnings="")


def fleets(small_catalog, **kwargs):
    kwargs = {"load": EVENING, "slos": {"itl": 30.0}, "workload": WORKLOAD, **kwargs}
    return size_fleets(LLM_70B, small_catalog, stub, **kwargs)


def test_a_70b_at_the_evening_peak_by_hand(small_catalog):
    table = fleets(small_catalog, prices={"NVIDIA H100 SXM5": 2.0, "NVIDIA L4": 1.0})
    found = table.attrs["candidates"].set_index(["gpu", "tp"])
    # 70.6B x 2 B = 141.2 GB: H100s hold it from 2, L4s from 8. ITL 10 + 2 r / t meets 30 ms
    # up to r = 10 t: capacity 20, 40, 80 req/s at t = 2, 4, 8.
    h100 = found.loc["NVIDIA H100 SXM5"]
    assert h100.loc[2:8, "capacity"].tolist() == pytest.approx([20.0, 40.0, 80.0])
    assert np.isnan(h100.loc[1, "capacity"]) and not h100.loc[1, "holds"]
    # peak 100 req/s: 5, 3, 2 replicas; 10 req/s: 1 replica each
    assert h100.loc[2:8, "replicas"].tolist() == [5, 3, 2]
    assert h100.loc[2:8, "gpus"].tolist() == [10, 12, 16]
    # mean GPUs: (2 x 10 + 22 x 2) / 24 = 2.667; (2 x 12 + 22 x 4) / 24 = 4.667
    assert h100.loc[2:4, "mean_gpus"].tolist() == pytest.approx([64 / 24, 112 / 24])
    # t = 2, static: 2 h x 5 x 2 GPUs x (100 + 2 x 20) W = 2,800 Wh; 22 h x (1 x 2 x 120 W
    # running + 4 idle x 2 x 100.02 W at the trickle) = 22,883.52 Wh; 25.68 kWh
    assert h100.loc[2, "energy_kwh_per_day"] == pytest.approx(25.68352)
    # t = 4: 2 h x 3 x 4 x (100 + 2 x 33.3) = 4,000 Wh; 22 h x (480 + 2 x 4 x 100.02) W
    assert h100.loc[4, "energy_kwh_per_day"] == pytest.approx(4.0 + 22 * 1280.16 / 1000)
    # the H100 keeps t = 2 (least energy); 96.768 M tokens a day: (2 x 100 + 22 x 10) x 3,600
    # x 64. The L4 serves only at t = 8: 2 x 8 GPUs at the peak.
    assert table["gpu"].tolist() == ["NVIDIA H100 SXM5", "NVIDIA L4"]
    best, l4 = table.iloc[0], table.iloc[1]
    assert (best["rank"], best["tp"], best["replicas"], best["gpus"]) == (1, 2, 5, 10)
    assert best["energy_j_per_token"] == pytest.approx(25683.52 * 3600 / 96.768e6)
    assert best["gpu_hours_per_day"] == 240 and best["usd_per_day"] == 480  # 10 GPUs all day
    assert best["peak_hour"] == 18 and best["binding_slo"] == "itl"
    assert (l4["rank"], l4["tp"], l4["gpus"], l4["min_tp"]) == (2, 8, 16, 8)


def test_ranked_by_cost_the_cheaper_gpu_hours_win(small_catalog):
    prices = {"NVIDIA H100 SXM5": 2.0, "NVIDIA L4": 1.0}
    table = fleets(small_catalog, prices=prices, rank_by="cost").set_index("gpu")
    # static: H100, t = 2: 10 GPUs x 24 h x $2 = $480; L4, t = 8: 16 x 24 x $1 = $384.
    # Per GPU the cheapest size is kept: the H100's t = 2 ($480 < 12 x 24 x 2 = $576).
    assert table.loc["NVIDIA L4", "rank"] == 1 and table.loc["NVIDIA H100 SXM5", "rank"] == 2
    assert table.loc["NVIDIA L4", "usd_per_day"] == 384.0
    assert table.loc["NVIDIA H100 SXM5", ["tp", "usd_per_day"]].tolist() == [2, 480.0]
    # 96.768 M tokens a day: $384 / 96.768 = $3.97 per million
    assert table.loc["NVIDIA L4", "usd_per_1m_tokens"] == pytest.approx(384 / 96.768)


def test_hourly_scaling_rents_fewer_gpu_hours_than_static(small_catalog):
    static = fleets(small_catalog).iloc[0]
    hourly = fleets(small_catalog, scaling="hourly").iloc[0]
    assert static["gpus"] > static["mean_gpus"]  # 10 at the peak, 2.67 on average
    # hourly, t = 2: 2 h x 10 GPUs + 22 h x 2 GPUs = 64 GPU-hours; 2,800 + 22 x 240 Wh
    assert hourly["gpu_hours_per_day"] == 64 < static["gpu_hours_per_day"]
    assert hourly["energy_kwh_per_day"] == pytest.approx(8.08)


def test_the_smallest_size_that_would_hold_is_named(small_catalog):
    table = fleets(small_catalog, tp=(1, 2, 4))
    l4 = table.set_index("gpu").loc["NVIDIA L4"]
    assert pd.isna(l4["rank"]) and l4["min_tp"] == 8
    assert l4["reason"] == "weights 141.2 GB and one sequence's KV cache need TP 8 (8 x 24 GB)"


def test_max_gpus_caps_a_fleet(small_catalog):
    table = fleets(small_catalog, max_gpus=8)
    assert table["rank"].isna().all()
    # the H100 came closest with its fewest GPUs: 5 replicas of 2 at the peak
    h100 = table.set_index("gpu").loc["NVIDIA H100 SXM5"]
    assert h100["reason"] == "needs 10 GPUs at the peak, more than 8"


def users_stub(queries: pd.DataFrame, target: str) -> pd.DataFrame:
    """A closed loop: ITL = 10 + users / tp ms; power per GPU = 100 + users W."""
    users = queries["concurrency"].to_numpy(float)
    value = 10.0 + users / queries["num_gpus"].to_numpy(float)
    value = 100.0 + users if target == "power" else value
    return pd.DataFrame({"prediction": value, "lower": value, "upper": value, "warnings": ""})


def test_users_of_a_closed_loop_are_spread_over_replicas(small_catalog):
    table = size_fleets(
        LLM_70B,
        small_catalog,
        users_stub,
        concurrency=100.0,
        slos={"itl": 30.0},
        workload=WORKLOAD,
        gpus=["NVIDIA H100 SXM5"],
    )
    best = table.iloc[0]
    # ITL 10 + u / t meets 30 ms up to 20 t users: 40 at t = 2 (within the 89 sequences two
    # H100s hold: (160 - 141.2) GB x 0.9 / (327,680 B x 576 tokens)). 100 users: 3 replicas
    # of 34 users (whole), 6 GPUs at 134 W all day = 804 W, 19.3 kWh; t = 4: 2 x 4 GPUs at
    # 150 W = 1,200 W; t = 8: 8 GPUs at 200 W. Tokens: 100 users / (10 + 34 / 2) ms = 3,704/s.
    assert (best["tp"], best["replicas"], best["gpus"], best["capacity_users"]) == (2, 3, 6, 40)
    assert pd.isna(best["peak_hour"]) and best["mean_gpus"] == 6
    assert best["energy_kwh_per_day"] == pytest.approx(804 * 24 / 1000)
    assert best["energy_j_per_token"] == pytest.approx(804 / (100 / 0.027))


OPTION_NAMES = {"max_gpus": "--max-gpus", "scaling": "--scaling", "rank_by": "--rank-by"}
OPTION_NAMES |= {"tp": "--tp", "prices": "--price-file", "scenario": "--scenario"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_gpus": 0}, "--max-gpus must be a whole number from 1; got 0"),
        ({"tp": [1, 3]}, "--tp must be powers of two: 1, 2, 4, 8, 16, 32, 64; got 3"),
        ({"scaling": "daily"}, "--scaling must be one of static, hourly; got 'daily'"),
        ({"rank_by": "watts"}, "--rank-by must be one of energy, cost; got 'watts'"),
    ],
)
def test_fleet_options_are_checked(options, message):
    with pytest.raises(QueryError) as caught:
        checked_fleet(options, "server", OPTION_NAMES.get)
    assert str(caught.value) == message


def test_fleet_options_defaults_and_what_they_need():
    assert checked_fleet({}, "server", OPTION_NAMES.get) == {
        "fleet": True,
        "tp": (1, 2, 4, 8),
        "max_gpus": 64,
        "scaling": "static",
        "rank_by": "energy",
    }
    with pytest.raises(QueryError, match=r"^--rank-by cost needs prices: give --price-file$"):
        checked_fleet({"rank_by": "cost"}, "server", OPTION_NAMES.get, priced=False)
    with pytest.raises(QueryError, match=r"^fleets serve a server's load; got --scenario offline"):
        checked_fleet({}, "offline", OPTION_NAMES.get)
