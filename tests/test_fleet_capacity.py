"""A replica's capacity (`recommendation.capacity`, `.replicas`), worked out by hand with stubs.

The stub predictors make ITL and TTFT known functions of the load, so the load where each
crosses its SLO is known exactly; then `recommend`'s engine options (item 6 of issue 66).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from wattgpu import recommendation as rec
from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.errors import QueryError
from wattgpu.recommendation.capacity import UNBOUNDED, lowest_crossing, user_grid
from wattgpu.recommendation.replicas import candidates, capacities, check_tp

LLM_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLM_70B = "meta-llama/Llama-3.1-70B-Instruct"
WORKLOAD = {
    "model": LLM_8B,
    "scenario": "server",
    "input_tokens": 512.0,
    "output_tokens": 64.0,
}


def stub(itl, ttft=lambda load: 100.0 + 0 * load):
    """A predictor whose ITL and TTFT (ms) are ``itl(load)``, ``ttft(load)``; p99 = 2 x median.

    The load is the query's rate, or its users for a closed loop; upper = 1.5 x median.
    """

    def predict(queries: pd.DataFrame, target: str) -> pd.DataFrame:
        load = queries.get("request_rate_rps", queries.get("concurrency")).to_numpy(float)
        value = {"itl": itl, "ttft": ttft}.get(target, lambda x: 300.0 + 0 * x)(load)
        value = np.asarray(value, dtype=float)
        return pd.DataFrame(
            {
                "gpu": queries["gpu"].to_numpy(),
                "prediction": value,
                "lower": value * 0.9,
                "upper": value * 1.5,
                "p90": value * 1.5,
                "p99": value * 2.0,
                "warnings": "",
            }
        )

    return predict


def held(small_catalog, tp=(1,), workload=WORKLOAD):
    found = candidates(small_catalog, ["NVIDIA H100 SXM5", "NVIDIA L4"], tp, workload)
    return found[found["holds"]]


def by_candidate(frame: pd.DataFrame, rows: pd.DataFrame) -> dict:
    keys = zip(rows["gpu"], rows["tp"], strict=True)
    return dict(zip(keys, frame.to_dict("records"), strict=True))


def test_a_straight_line_crosses_its_slo_where_it_is_solved(small_catalog):
    rows = held(small_catalog)
    # ITL = 10 + 2 x rate ms; 50 ms is crossed at rate (50 - 10) / 2 = 20 req/s, on both GPUs.
    # In flight at 20 req/s: 20 x 64 tokens x 0.050 s = 64 sequences, within both GPUs' caches.
    found = capacities(rows, stub(lambda r: 10 + 2 * r), WORKLOAD, {"itl": 50.0})
    assert found["capacity"].to_numpy() == pytest.approx([20.0, 20.0])
    assert list(found["binding_slo"]) == ["itl", "itl"]
    # at p99 (2 x the median): 20 + 4 r = 50 at r = 7.5; strict: 1.5 x (10 + 2 r) = 50 at 11.67
    p99 = capacities(rows, stub(lambda r: 10 + 2 * r), WORKLOAD, {"itl": 50.0}, percentile=99)
    assert p99["capacity"].to_numpy() == pytest.approx([7.5, 7.5])
    strict = capacities(rows, stub(lambda r: 10 + 2 * r), WORKLOAD, {"itl": 50.0}, strict=True)
    assert strict["capacity"].to_numpy() == pytest.approx([35 / 3, 35 / 3])


def test_the_lowest_crossing_binds_where_the_latency_is_not_monotone(small_catalog):
    # A tent: 10 + 40 r up to r = 1.5 (70 ms), down to 10 ms at r = 3, then 10 + (r - 3) ms.
    # It meets 50 ms again from r = 3 to 43: the capacity is the first crossing, r = 1.
    def tent(r):
        return np.where(r < 1.5, 10 + 40 * r, np.where(r < 3, 70 - 40 * (r - 1.5), 10 + (r - 3)))

    found = capacities(held(small_catalog), stub(tent), WORKLOAD, {"itl": 50.0})
    assert found["capacity"].to_numpy() == pytest.approx([1.0, 1.0])
    # the grid core: the crossing of the first missed load, never a later one
    loads = np.array([[1.0, 2.0, 3.0, 4.0]])
    capacity, binding = lowest_crossing(loads, {"itl": np.array([[0.5, 1.5, 0.5, 0.5]])})
    assert capacity == pytest.approx([1.5]) and list(binding) == ["itl"]  # 1 + 0.5 / 1.0


def test_the_limit_that_binds_is_named(small_catalog):
    rows = held(small_catalog)
    # ITL 10 + 2 r crosses 50 ms at 20; TTFT 100 + 100 r crosses 600 ms at 5: TTFT binds.
    predictor = stub(lambda r: 10 + 2 * r, lambda r: 100 + 100 * r)
    found = capacities(rows, predictor, WORKLOAD, {"itl": 50.0, "ttft": 600.0})
    assert found["capacity"].to_numpy() == pytest.approx([5.0, 5.0])
    assert list(found["binding_slo"]) == ["ttft", "ttft"]
    # no SLO at all: the KV cache and the engine's batch of 256 bind. H100, ITL 10 ms: the
    # batch, at 256 / (64 x 0.010) = 400 req/s. L4 24 GB: 24 - 16.06 GB of weights leave
    # 7.94 GB x 0.9 for the cache; one sequence: 131,072 B x 576 tokens = 75.5 MB -> 94.66
    # sequences, at 94.66 / (64 x 0.010) = 147.9 req/s.
    open_ended = by_candidate(capacities(rows, stub(lambda r: 10 + 0 * r), WORKLOAD, {}), rows)
    assert open_ended["NVIDIA H100 SXM5", 1]["capacity"] == pytest.approx(400.0)
    l4_seqs = (24e9 - 16.06e9) * 0.9 / (131072 * 576)
    assert open_ended["NVIDIA L4", 1]["capacity"] == pytest.approx(l4_seqs / 0.64, rel=1e-3)
    assert {r["binding_slo"] for r in open_ended.values()} == {"memory"}


def test_users_of_a_closed_loop_are_whole_and_none_binds_beyond_the_grid(small_catalog):
    rows = held(small_catalog)
    closed = {**WORKLOAD, "output_tokens": 64.0}
    # ITL = 20 + 0.5 x users ms: 50 ms at 60 users (within the L4's 94 sequences).
    found = capacities(rows, stub(lambda u: 20 + 0.5 * u), closed, {"itl": 50.0}, closed=True)
    assert list(found["capacity"]) == [60.0, 60.0] and set(found["binding_slo"]) == {"itl"}
    # a crossing between two whole numbers: the whole users below it
    found = capacities(rows, stub(lambda u: 20 + 0.5 * u), closed, {"itl": 61.7}, closed=True)
    assert list(found["capacity"]) == [83.0, 83.0]  # (61.7 - 20) / 0.5 = 83.4 -> 83
    # a flat ITL on the H100 with a short grid: nothing binds, the grid's end is the capacity
    grid = user_grid(16)
    flat = capacities(
        rows.iloc[:1], stub(lambda u: 5 + 0 * u), closed, {"itl": 50.0}, closed=True, grid=grid
    )
    assert list(flat["capacity"]) == [16.0] and list(flat["binding_slo"]) == [UNBOUNDED]


def test_a_70b_is_held_only_from_two_h100s(small_catalog):
    found = candidates(
        small_catalog,
        ["NVIDIA H100 SXM5", "NVIDIA L4"],
        (1, 2, 4, 8),
        {**WORKLOAD, "model": LLM_70B},
    )
    holds = {(g, t) for g, t, h in zip(found["gpu"], found["tp"], found["holds"], strict=True) if h}
    # 70.6B x 2 B = 141.2 GB: two 80 GB H100s (160 GB); L4s from 8 x 24 = 192 GB
    assert holds == {("NVIDIA H100 SXM5", 2), ("NVIDIA H100 SXM5", 4), ("NVIDIA H100 SXM5", 8)} | {
        ("NVIDIA L4", 8)
    }


@pytest.mark.parametrize("bad", [3, 0, 128, "two", 1.5])
def test_tp_sizes_are_powers_of_two(bad):
    with pytest.raises(QueryError, match=r"^--tp must be powers of two: 1, 2, 4, 8, 16, 32, 64"):
        check_tp([1, bad], "--tp")
    assert check_tp(["8", 2, 2.0]) == (2, 8)


def test_the_engine_and_the_weights_format_reach_every_query(small_catalog):
    asked = []

    def predictor(queries, target):
        asked.append(queries)
        return stub(lambda r: 10 + 0 * r)(queries, target)

    engine = {"engine": "sglang", "engine_version": "0.5.9", "dtype": "fp8"}
    table = rec.recommend(
        LLM_8B, rate=1.0, catalog=small_catalog, predictor=predictor, setup=engine
    )
    assert all(set(q["engine"]) == {"sglang"} and set(q["dtype"]) == {"fp8"} for q in asked)
    assert all(set(q["engine_version"]) == {"0.5.9"} for q in asked)
    # fp8: 8.03B - 1.05B of embeddings and head (128,256 x 4,096, untied) at 1 B, those at 2 B
    embedding = 128256 * 4096 * 2
    weights = {row["gpu"]: row["weights_gb"] for row in table.to_dict("records")}
    assert weights["NVIDIA L4"] == pytest.approx((8.03e9 - embedding + 2 * embedding) / 1e9)
    assert table.attrs["request"]["dtype"] == "fp8"


@pytest.fixture
def invoke(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("WATTGPU_DATA_DIR", str(SHIPPED_DATA_DIR))

    def run(*args):
        result = CliRunner().invoke(cli, ["recommend", "--model", LLM_8B, "--rate", "1", *args])
        assert "Traceback" not in result.output
        return result

    return run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--dtype", "fp7"],
            "Error: --dtype must be one of float32, fp32, float16, fp16, bfloat16, bf16, fp8, "
            "float8, int8, int4, mxfp4, nvfp4, fp8_block, int4_wo; got 'fp7'",
        ),
        (
            ["--engine", "sglang", "--engine-version", "9.9"],
            "Error: --engine-version must be a release of sglang with a known date "
            "(glm5-hopper, nightly-dev, 0.5.9, 0.5.8, 0.5, 0.4, 0.3, 0.2; or give "
            "--engine-year); got '9.9'",
        ),
        (
            ["--engine-year", "1990"],
            "Error: --engine-year must be a whole number from 2000 to 2100; got 1990",
        ),
    ],
)
def test_engine_options_are_refused_in_one_line_before_any_model(invoke, args, message):
    result = invoke(*args)
    assert result.exit_code == 1
    assert result.output.strip() == message


def test_the_finer_pass_runs_only_where_the_fleet_depends_on_it(small_catalog):
    asked = []

    def counting(queries, target):
        asked.append(target)
        return stub(lambda r: 10 + 2 * r)(queries, target)

    rows = held(small_catalog)
    # 1 req/s: one replica whatever the capacity between the grid loads around 20 req/s
    found = capacities(rows, counting, WORKLOAD, {"itl": 50.0}, day=np.array([1.0, 0.0]))
    assert asked == ["itl"] and found["capacity"].to_numpy() == pytest.approx([20.0, 20.0])
    # 100 req/s: ceil(100 / low) > ceil(100 / high) across a bracket about 1.9 wide: refined
    asked.clear()
    capacities(rows, counting, WORKLOAD, {"itl": 50.0}, day=np.array([100.0]))
    assert asked == ["itl", "itl"]


class TailCounting:
    """``stub``'s answers, with the ``medians`` form a registry's predictor has (no tails).

    Records each call as (target, tails asked, loads asked).
    """

    def __init__(self, itl, ttft=lambda load: 100.0 + 0 * load):
        self.answer, self.calls = stub(itl, ttft), []

    def __call__(self, queries, target):
        self.calls.append((target, True, queries["request_rate_rps"].to_numpy(float)))
        return self.answer(queries, target)

    def medians(self, queries, target):
        self.calls.append((target, False, queries["request_rate_rps"].to_numpy(float)))
        return self.answer(queries, target).drop(columns=["p90", "p99"])


def test_tails_are_asked_from_the_lowest_load_up_to_the_first_miss(small_catalog):
    rows = held(small_catalog)
    grid = np.array([1.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0])
    slos = {"itl": 50.0, "ttft": 600.0}
    # ITL 10 + 2 r: median 50 ms at r = 20, p99 (2 x) at r = 7.5; TTFT 100 + 20 r: median 600
    # ms at r = 25, p99 at r = 10. The medians first miss at 25 (ITL 60 > 50 ms; TTFT's 600
    # meets 600). Tails are asked four loads at a time from the lowest: ITL's at 1, 5, 10, 15,
    # where its p99 first misses at 10 (60 ms); TTFT's up to there; nothing past.
    counting = TailCounting(lambda r: 10 + 2 * r, lambda r: 100 + 20 * r)
    found = capacities(rows, counting, WORKLOAD, slos, percentile=99, grid=grid)
    # p99: ITL 20 + 4 r = 50 at 7.5, TTFT 200 + 40 r = 600 at 10: ITL binds at 7.5
    assert found["capacity"].to_numpy() == pytest.approx([7.5, 7.5])
    assert list(found["binding_slo"]) == ["itl", "itl"]
    plain = capacities(
        rows,
        stub(lambda r: 10 + 2 * r, lambda r: 100 + 20 * r),
        WORKLOAD,
        slos,
        percentile=99,
        grid=grid,
    )
    pd.testing.assert_frame_equal(found, plain)
    first = [(target, tails, sorted(set(loads))) for target, tails, loads in counting.calls[:4]]
    assert first == [
        ("itl", False, [1.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]),  # every load's median
        ("ttft", False, [1.0, 5.0, 10.0, 15.0, 20.0, 25.0]),  # up to ITL's miss at 25
        ("itl", True, [1.0, 5.0, 10.0, 15.0]),  # the first four loads' tails
        ("ttft", True, [1.0, 5.0, 10.0]),  # up to the ITL p99's miss at 10
    ]
    # a first miss in the second four: 20 + 4 r > 50 ms first at r = 8 (52 ms), so the walk
    # asks 1-4, then 5-8, and stops; the crossing between 7 (48 ms) and 8 is 7.5
    counting = TailCounting(lambda r: 10 + 2 * r)
    ones = np.arange(1.0, 13.0)
    found = capacities(rows, counting, WORKLOAD, {"itl": 50.0}, percentile=99, grid=ones)
    assert found["capacity"].to_numpy() == pytest.approx([7.5, 7.5])
    walked = [(tails, sorted(set(loads))) for _, tails, loads in counting.calls[:3]]
    assert walked == [
        (False, list(ones)),
        (True, [1.0, 2.0, 3.0, 4.0]),
        (True, [5.0, 6.0, 7.0, 8.0]),
    ]
    # at the median no tail is asked at all, in the first pass nor in the finer one
    counting.calls.clear()
    capacities(rows, counting, WORKLOAD, slos, grid=grid)
    assert len(counting.calls) == 4 and not any(tails for _, tails, _ in counting.calls)


def test_the_first_grid_stops_at_the_physics_and_never_past_the_default_end(small_catalog):
    from wattgpu.recommendation.replicas import first_grid

    rows = held(small_catalog)
    grid = first_grid(rows, 1.0, closed=False)
    # H100: 256 sequences / (1 token x 16.06 GB / 3,350 GB/s) x 2 = 106,800 req/s: capped at
    # the default grid's 2,000 (queries allow 10,000). L4: 94.65 sequences (of 576 tokens) /
    # 53.5 ms x 2 = 3,537, capped too; with 1,000 output tokens a step each, 3.5 req/s.
    assert grid[:, -1].tolist() == pytest.approx([2000.0, 2000.0])
    l4_most = 2 * (24e9 - 16.06e9) * 0.9 / (131072 * 576) / (1000 * 16.06e9 / 300e9)
    assert first_grid(rows, 1000.0, closed=False)[1, -1] == pytest.approx(l4_most, rel=1e-3)
