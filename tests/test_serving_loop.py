"""The simulated serving loop (modeling/serving: loop.py, scheduler.py), checked by hand.

Every case uses round costs so that each step's time can be written down: a step reads 10 ms
of weights, decodes cost nothing more, and a prompt token costs 0.1 ms of tensor work (a
1,000-token prompt: 100 ms, compute-bound).
"""

from __future__ import annotations

import numpy as np
import pytest

from wattgpu.modeling.serving.loop import CLOSED, ONESHOT, Client, simulate
from wattgpu.modeling.serving.scheduler import (
    DECODE_FIRST,
    INFLIGHT,
    PREFILL_FIRST,
    RUNNING,
    WAITING,
    Scheduler,
    Slots,
    plan_step,
    preempt,
)
from wattgpu.modeling.serving.step import HostTime, TokenCosts

WEIGHTS_S = 0.01
TOKEN_S = 1e-4


def costs(n: int = 1) -> TokenCosts:
    f = np.full
    return TokenCosts(
        mem_dense=f(n, WEIGHTS_S),
        mem_expert=f(n, 0.0),
        experts=f(n, 1.0),
        per_token=f(n, 1.0),
        kv_read=f(n, 0.0),
        comp=f(n, TOKEN_S),
        attn=f(n, 0.0),
        reduce_a=f(n, 0.0),
        reduce_b=f(n, 0.0),
    )


def host(fixed: float = 0.0, n: int = 1) -> HostTime:
    return HostTime(fixed=np.full(n, fixed), per_seq=np.zeros(n))


def scheduler(policy: int, budget: float = 1e6, seqs: float = 1e6, kv: float = np.inf, n=1):
    return Scheduler(
        policy=np.full(n, policy),
        chunked=np.full(n, policy == DECODE_FIRST),
        budget=np.full(n, float(budget)),
        max_seqs=np.full(n, float(seqs)),
        kv_tokens=np.full(n, float(kv)),
        reserve_full=np.full(n, policy == INFLIGHT),
        waiting_ratio=np.zeros(n),
        max_waiting_steps=np.full(n, np.inf),
    )


def client(kind: int, users: float, prompt: float, answer: float, warmup=0.0, measured=None):
    measured = users if measured is None else measured
    return Client(
        kind=np.array([kind]),
        users=np.array([float(users)]),
        rate=np.zeros(1),
        prompt=np.array([float(prompt)]),
        answer=np.array([float(answer)]),
        prompt_shape=np.ones((1, 21)),
        answer_shape=np.ones((1, 21)),
        warmup=np.array([float(warmup)]),
        measured=np.array([float(measured)]),
    )


def test_one_user_alone_waits_one_prefill_and_the_host_time():
    # the prompt's step: 2 ms of host + max(10 ms of weights, 1,000 x 0.1 ms of tensor work)
    out = simulate(costs(), host(0.002), scheduler(DECODE_FIRST), client(CLOSED, 1, 1000, 50, 1, 3))
    assert out["ttft_mean_s"][0] == pytest.approx(0.002 + 0.1)
    assert out["ttft_p50_s"][0] == pytest.approx(0.102)
    # every later token: a step of 2 ms + 10 ms
    assert out["itl_p50_s"][0] == pytest.approx(0.012)
    assert out["tpot_mean_s"][0] == pytest.approx(0.012)


def test_a_closed_loop_beyond_the_engines_slots_waits_for_one():
    # 8 users, 4 slots, 100-token prompts (one 10 ms step: 400 x 0.1 ms = 40 ms of tensor work
    # for four) and 100 output tokens: a group of four holds the slots for its prefill (40 ms)
    # and 99 decode steps (0.99 s), a service time of 1.03 s; the other four wait for it:
    # (N - M) / M x service = 1 x 1.03 s, then prefill (40 ms)
    out = simulate(
        costs(), host(), scheduler(DECODE_FIRST, seqs=4), client(CLOSED, 8, 100, 100, 8, 24)
    )
    service = 0.04 + 99 * 0.01
    assert out["ttft_mean_s"][0] == pytest.approx((8 - 4) / 4 * service + 0.04)
    assert out["decode_batch"][0] == pytest.approx(4.0, rel=0.05)


def test_prefill_first_whole_steps_stall_the_running_decodes():
    # two requests at once, a budget of one 1,000-token prompt a step: A's prompt (100 ms),
    # then B's (100 ms) while A waits, then both decode in 10 ms steps to 10 tokens each
    out = simulate(
        costs(),
        host(),
        scheduler(PREFILL_FIRST, budget=1000),
        client(ONESHOT, 2, 1000, 10),
    )
    # TTFT: A at 0.1 s, B at 0.2 s
    assert out["ttft_mean_s"][0] == pytest.approx(0.15)
    # A's first gap spans B's prefill and a decode step (0.11 s), its 8 others and B's 9 are
    # 10 ms: the mean of 18 gaps, the largest 0.11 s
    assert out["itl_mean_s"][0] == pytest.approx((0.11 + 17 * 0.01) / 18)
    assert out["itl_p99_s"][0] == pytest.approx(0.11)
    # TPOT per request: A (0.29 - 0.1) / 9, B (0.29 - 0.2) / 9
    assert out["tpot_mean_s"][0] == pytest.approx(((0.19 + 0.09) / 9) / 2)


def slots(**columns) -> Slots:
    n = len(columns["state"])
    base = {
        "weight": np.ones(n),
        "prompt": np.zeros(n),
        "answer": np.full(n, 100.0),
        "need": np.zeros(n),
        "context": np.zeros(n),
        "generated": np.zeros(n),
        "order": np.arange(n, dtype=float),
        "arrived": np.zeros(n),
        "first": np.full(n, np.nan),
        "last": np.zeros(n),
        "started": np.full(n, np.nan),
    }
    base.update(columns)
    return Slots(
        **{
            k: np.asarray(v, dtype=np.int8 if k == "state" else float)[None, :]
            for k, v in base.items()
        }
    )


def test_a_chunked_step_carries_every_decode_and_one_chunk_within_the_budget():
    # two requests decoding, a 2,000-token prompt waiting, a budget of 512 tokens: the step
    # decodes both and takes 510 tokens of the prompt
    s = slots(
        state=[RUNNING, RUNNING, WAITING],
        prompt=[100, 100, 2000],
        need=[0, 0, 2000],
        context=[150, 120, 0],
        generated=[50, 20, 0],
    )
    plan = plan_step(s, scheduler(DECODE_FIRST, budget=512), np.zeros(1))
    assert plan.decodes[0].tolist() == [True, True, False]
    assert plan.take[0].tolist() == [0.0, 0.0, 510.0]
    assert plan.admitted[0].tolist() == [False, False, True]
    # prefill-first: the same queue gets a prefill-only step of the budget
    plan = plan_step(s, scheduler(PREFILL_FIRST, budget=4096), np.zeros(1))
    assert not plan.decodes.any() and plan.take[0].tolist() == [0.0, 0.0, 2000.0]


def test_a_full_kv_cache_preempts_the_newest_request_to_the_front_of_the_queue():
    # three running requests of 100 cached tokens each and one waiting; the cache holds 302
    # tokens, the next step needs 303: the newest running one (order 2) goes back, ahead of
    # the waiting one (order 3), to prefill its prompt and its 40 tokens again
    s = slots(
        state=[RUNNING, RUNNING, RUNNING, WAITING],
        prompt=[60, 60, 60, 60],
        need=[0, 0, 0, 60],
        context=[100, 100, 100, 0],
        generated=[40, 40, 40, 0],
    )
    out = preempt(s, scheduler(DECODE_FIRST, kv=302), np.array([4.0]))
    assert out[0].tolist() == [False, False, True, False]
    assert s.state[0].tolist() == [RUNNING, RUNNING, WAITING, WAITING]
    assert s.need[0, 2] == 100.0 and s.context[0, 2] == 0.0
    assert s.order[0, 2] < s.order[0, 3]
    # with room for 303 tokens nothing moves
    s2 = slots(state=[RUNNING] * 3, context=[100, 100, 100], generated=[40, 40, 40])
    assert not preempt(s2, scheduler(DECODE_FIRST, kv=303), np.array([3.0])).any()


def test_the_same_seed_gives_the_same_answer_and_another_seed_a_close_one():
    spread = Client(
        kind=np.array([CLOSED]),
        users=np.array([16.0]),
        rate=np.zeros(1),
        prompt=np.array([500.0]),
        answer=np.array([100.0]),
        prompt_shape=np.linspace(0.5, 1.5, 21)[None, :],
        answer_shape=np.linspace(0.2, 1.8, 21)[None, :],
        warmup=np.array([16.0]),
        measured=np.array([48.0]),
    )
    args = (costs(), host(0.001), scheduler(DECODE_FIRST, budget=2048), spread)
    one, same, other = simulate(*args, seed=1), simulate(*args, seed=1), simulate(*args, seed=2)
    for name in one:
        np.testing.assert_array_equal(one[name], same[name])
    assert other["itl_p50_s"][0] == pytest.approx(one["itl_p50_s"][0], rel=0.2)
    assert other["ttft_mean_s"][0] != one["ttft_mean_s"][0]


def test_a_row_answers_the_same_whatever_rows_run_beside_it():
    alone = simulate(costs(), host(), scheduler(DECODE_FIRST), client(CLOSED, 4, 300, 40, 4, 12))
    both = simulate(
        costs(2),
        host(n=2),
        scheduler(DECODE_FIRST, n=2),
        Client(
            kind=np.array([CLOSED, CLOSED]),
            users=np.array([4.0, 64.0]),
            rate=np.zeros(2),
            prompt=np.array([300.0, 2000.0]),
            answer=np.array([40.0, 500.0]),
            prompt_shape=np.ones((2, 21)),
            answer_shape=np.ones((2, 21)),
            warmup=np.array([4.0, 64.0]),
            measured=np.array([12.0, 192.0]),
        ),
    )
    for name in alone:
        np.testing.assert_allclose(both[name][0], alone[name][0])


# One release of every engine line of data/engine_lines.csv.
LINES = (
    ("vllm", "0.5.4"),
    ("vllm", "0.6.3"),
    ("vllm", "0.19.0"),
    ("sglang", "0.5.9"),
    ("trtllm", "1.0.0"),
    ("tgi", "1.4.5"),
    ("tgi", "2.0.2"),
    ("tgis", None),
    ("hf", None),
    ("deepspeed-mii", None),
    ("llama.cpp", None),
)
GPUS = (
    "NVIDIA A10",
    "NVIDIA L40S",
    "NVIDIA A100 SXM4 80GB",
    "NVIDIA H100 SXM5",
    "NVIDIA H200 SXM",
    "NVIDIA B200",
)
LLMS = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "microsoft/Phi-3-mini-4k-instruct",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
)
USERS = (1, 2, 4, 8, 16, 32, 64, 128)


def test_ttft_and_itl_never_fall_as_users_are_added(catalog):
    import pandas as pd

    from wattgpu.modeling.physical.features import build_features
    from wattgpu.modeling.serving.run import simulate_rows

    rows = pd.DataFrame(
        [
            {
                "gpu": gpu,
                "model": llm,
                "dtype": "fp8" if "30B" in llm else "bfloat16",
                "scenario": "server",
                "concurrency": float(users),
                "input_tokens": 1000.0,
                "output_tokens": 200.0,
                "engine": engine,
                "engine_version": version,
            }
            for gpu in GPUS
            for llm in LLMS
            for engine, version in LINES
            for users in USERS
        ]
    )
    out = build_features(rows, catalog)
    out = out[(out["fits_in_memory"] > 0).to_numpy()].reset_index(drop=True)
    out = out.join(simulate_rows(out).add_prefix("sim_"))
    key = ["gpu", "model", "engine", "engine_version"]
    # the statistics the answers are built on: the median TTFT and the median gap
    for column in ("sim_ttft_p50_s", "sim_itl_p50_s"):
        values = out[column].to_numpy()
        step = out.groupby(key, dropna=False)[column].transform(lambda s: s.cummax())
        # 5 % of slack: a median of a few dozen sampled requests moves that much with the draws
        fallen = values < step.to_numpy() * (1 - 0.05)
        assert not fallen.any(), out.loc[fallen, [*key, "users", column]].head().to_string()


def test_an_overloaded_row_answers_the_same_whatever_rows_run_beside_it(catalog, monkeypatch):
    import pandas as pd

    from wattgpu.modeling.physical.features import build_features
    from wattgpu.modeling.serving import run
    from wattgpu.modeling.serving.run import STATISTICS, forget_simulated, simulate_rows

    def rows(*setups):
        base = {"model": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "server"}
        return build_features(pd.DataFrame([{**base, **setup} for setup in setups]), catalog)

    # an L4 at 200 req/s queues without end (overloaded); beside it an H100 at 2,000 req/s,
    # whose engine holds far more sequences, and an unloaded H100 at 1 req/s
    l4 = {"gpu": "NVIDIA L4", "request_rate_rps": 200.0}
    others = (
        {"gpu": "NVIDIA H100 SXM5", "request_rate_rps": 2000.0, "input_tokens": 4000.0},
        {"gpu": "NVIDIA H100 SXM5", "request_rate_rps": 1.0},
    )
    forget_simulated()
    alone = simulate_rows(rows(l4))
    forget_simulated()
    beside = simulate_rows(rows(l4, *others))
    forget_simulated()
    assert alone.loc[0, "overloaded"] == 1.0 and beside.loc[1, "overloaded"] == 1.0
    pd.testing.assert_series_equal(alone.loc[0, list(STATISTICS)], beside.loc[0, list(STATISTICS)])
    # so it is kept like any row: asked again (predict's TTFT after its ITL), it is not rerun
    simulate_rows(rows(l4))
    ran = []
    real = run._simulated
    monkeypatch.setattr(run, "_simulated", lambda *a, **k: ran.append(1) or real(*a, **k))
    again = simulate_rows(rows(l4))
    forget_simulated()
    assert not ran
    pd.testing.assert_frame_equal(again, alone)


def featured(catalog, **overrides):
    import pandas as pd

    from wattgpu.modeling.physical.features import build_features

    row = {
        "gpu": "NVIDIA H100 SXM5",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "scenario": "server",
        "concurrency": 16.0,
        "input_tokens": 1000.0,
        "output_tokens": 200.0,
        **overrides,
    }
    return build_features(pd.DataFrame([row]), catalog)


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"max_num_seqs": 0}, "max_num_seqs", "max_num_seqs must be a whole number 1-65536; got 0"),
        (
            {"max_batched_tokens": 100.5},
            "max_batched_tokens",
            "max_batched_tokens must be a whole number 16-1048576; got 100.5",
        ),
        ({"chunked_prefill": 2}, "chunked_prefill", "chunked_prefill must be 0 or 1; got 2"),
        (
            {"client": "locust"},
            "client",
            "client must be one of aiconfigurator, aiperf, argonne, batch, closed, llm-pilot, "
            "mlenergy-hf, mlenergy-v1, mlenergy-v2, mlenergy-v3, poisson; got 'locust'",
        ),
        (
            {"client": "poisson"},
            "client",
            "client 'poisson' sends requests at a rate: give request_rate_rps for a server",
        ),
        (
            {"client": "batch"},
            "client",
            "client 'batch' sends every request at once: it applies to offline only",
        ),
    ],
)
def test_a_client_or_knob_the_simulator_cannot_run_is_refused_in_one_line(
    catalog, overrides, field, message
):
    from wattgpu.errors import QueryError
    from wattgpu.modeling.serving.run import simulate_rows

    with pytest.raises(QueryError) as refused:
        simulate_rows(featured(catalog, **overrides))
    assert (refused.value.field, str(refused.value)) == (field, f"row 0: {message}")


def test_a_stated_knob_within_its_range_runs(catalog):
    from wattgpu.modeling.serving.run import simulate_rows

    # a cap of 4 sequences on 16 users: three in four wait, so TTFT grows well past one prefill
    capped = simulate_rows(featured(catalog, max_num_seqs=4, chunked_prefill=1))
    free = simulate_rows(featured(catalog))
    assert capped["decode_batch"][0] <= 4.0
    assert capped["ttft_p50_s"][0] > 2 * free["ttft_p50_s"][0]
