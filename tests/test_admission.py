"""Admission as the engines do it (modeling/serving/scheduler.py), each case worked out by hand.

TensorRT-LLM's in-flight batching admits a whole prompt that fits its token budget on its own,
beside the running decodes; Hugging Face TGI's router prefills once floor(ratio x running)
requests wait; IBM's TGIS (LLM-Pilot's server, inferred) once max(1, floor(running x (W - t) /
W)) wait after t decode steps without a prefill.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_serving_loop import scheduler, slots

from wattgpu.modeling.serving.scheduler import (
    DECODE_FIRST,
    INFLIGHT,
    PREFILL_PAUSE,
    PREFILL_PAUSE_DECAY,
    RUNNING,
    WAITING,
    Scheduler,
    pause_due,
    pause_minimum,
    plan_step,
)
from wattgpu.modeling.serving.workload import engine_line_names


def queue(running: int, waiting: int, prompt: float = 100.0):
    """``running`` requests decoding, then ``waiting`` ones with a prompt of ``prompt`` tokens."""
    n = running + waiting
    return slots(
        state=[RUNNING] * running + [WAITING] * waiting,
        prompt=[100.0] * running + [prompt] * waiting,
        need=[0.0] * running + [prompt] * waiting,
        context=[150.0] * running + [0.0] * waiting,
        generated=[50.0] * running + [0.0] * waiting,
        answer=[200.0] * n,
    )


def pausing(policy: int, ratio: float, steps: float) -> Scheduler:
    base = scheduler(policy)
    return Scheduler(
        **{
            **{f: getattr(base, f) for f in base.__dataclass_fields__},
            "waiting_ratio": np.array([ratio]),
            "max_waiting_steps": np.array([float(steps)]),
        }
    )


def prefills(sched: Scheduler, running: int, waiting: int, waited: float) -> bool:
    plan = plan_step(queue(running, waiting), sched, np.array([float(waited)]))
    return bool(plan.tokens[0] > 0)


# --- TensorRT-LLM: a whole prompt that fits the budget on its own joins the decodes -------------


def test_an_8192_token_prompt_joins_two_running_decodes_under_an_8192_token_budget():
    s = queue(2, 1, prompt=8192)
    plan = plan_step(s, scheduler(INFLIGHT, budget=8192), np.zeros(1))
    # both decodes run, and the whole prompt with them (before: 8,192 - 2 = 8,190 tokens left,
    # the prompt never fit, and it waited for the decodes to end)
    assert plan.decodes[0].tolist() == [True, True, False]
    assert plan.take[0].tolist() == [0.0, 0.0, 8192.0]
    assert plan.admitted[0].tolist() == [False, False, True]


def test_a_second_whole_prompt_waits_when_the_first_took_the_budget():
    s = slots(
        state=[RUNNING, WAITING, WAITING],
        prompt=[100, 8000, 500],
        need=[0, 8000, 500],
        context=[150, 0, 0],
        generated=[50, 0, 0],
    )
    plan = plan_step(s, scheduler(INFLIGHT, budget=8192), np.zeros(1))
    # 8,000 tokens of the 8,192 taken: 192 left, the 500-token prompt waits
    assert plan.take[0].tolist() == [0.0, 8000.0, 0.0]


def test_a_chunked_engine_still_counts_its_decodes_in_the_budget():
    # vLLM V1: 8,192 - 2 decodes = 8,190 tokens of the prompt this step
    plan = plan_step(queue(2, 1, prompt=8192), scheduler(DECODE_FIRST, budget=8192), np.zeros(1))
    assert plan.take[0].tolist() == [0.0, 0.0, 8190.0]


# --- Hugging Face TGI: floor(ratio x running) waiting requests start a prefill ------------------

TGI = pausing(PREFILL_PAUSE, ratio=1.2, steps=20)


def test_tgi_prefills_one_waiting_request_beside_one_running_at_the_next_step():
    # floor(1.2 x 1) = 1 <= 1 waiting
    assert pause_minimum(TGI, np.array([1.0]), np.array([1.0]))[0] == 1
    assert prefills(TGI, running=1, waiting=1, waited=1)


def test_tgi_prefills_three_waiting_beside_three_running_at_once():
    # floor(1.2 x 3) = floor(3.6) = 3 <= 3 waiting (the old rule, 3 >= 3.6, waited)
    assert pause_minimum(TGI, np.array([3.0]), np.array([0.0]))[0] == 3
    assert prefills(TGI, running=3, waiting=3, waited=0)
    plan = plan_step(queue(3, 3), TGI, np.zeros(1))
    # a prefill-only step: the three prompts, no decode
    assert plan.take[0].tolist() == [0.0] * 3 + [100.0] * 3 and not plan.decodes.any()


def test_tgi_keeps_two_waiting_beside_three_running_for_twenty_decode_steps():
    assert not prefills(TGI, running=3, waiting=2, waited=0)
    assert not prefills(TGI, running=3, waiting=2, waited=19)
    assert prefills(TGI, running=3, waiting=2, waited=20)
    # the loop jumps the twenty steps at once
    assert pause_due(TGI, np.array([3.0]), np.array([2.0]), np.zeros(1))[0] == 20


def test_tgi_prefills_anything_once_nothing_runs():
    assert prefills(TGI, running=0, waiting=1, waited=0)


# --- IBM's TGIS: the fewest waiting requests fall with the steps since the last prefill --------

TGIS = pausing(PREFILL_PAUSE_DECAY, ratio=0.0, steps=12)


@pytest.mark.parametrize(
    ("waited", "fewest"),
    # max(1, floor(8 x (12 - t) / 12)): 88 / 12 = 7.3 -> 7; 32 / 12 = 2.7 -> 2; 16 / 12 -> 1;
    # from t = 12 on, any
    [(0, 8), (1, 7), (7, 3), (8, 2), (9, 2), (10, 1), (11, 1), (12, 1), (30, 1)],
)
def test_tgis_fewest_waiting_requests_beside_eight_running(waited, fewest):
    assert pause_minimum(TGIS, np.array([8.0]), np.array([float(waited)]))[0] == fewest


def test_tgis_prefills_two_waiting_at_eight_steps_and_one_at_ten():
    assert not prefills(TGIS, running=8, waiting=2, waited=7)
    assert prefills(TGIS, running=8, waiting=2, waited=8)
    assert not prefills(TGIS, running=8, waiting=1, waited=9)
    assert prefills(TGIS, running=8, waiting=1, waited=10)
    # and the loop knows when: 12 - 3 x 12 / 8 = 7.5 -> t = 8; 12 - 2 x 12 / 8 = 9 -> t = 10
    due = pause_due(TGIS, np.full(2, 8.0), np.array([2.0, 1.0]), np.zeros(2))
    assert due.tolist() == [8.0, 10.0]
    assert pause_due(TGIS, np.array([8.0]), np.array([2.0]), np.array([5.0]))[0] == 3.0


def test_tgis_prefills_one_waiting_request_beside_one_running_at_once():
    assert prefills(TGIS, running=1, waiting=1, waited=0)


def test_llm_pilots_client_runs_the_tgis_line_and_a_plain_tgi_query_tgis_own():
    rows = pd.DataFrame(
        {
            "engine": ["tgi", "tgi", "tgis"],
            "engine_version": [None, None, None],
            "engine_year": [2023.0, 2023.0, np.nan],
            "client": ["llm-pilot", "closed", "closed"],
            "scenario": ["server"] * 3,
            "users": [4.0] * 3,
        }
    )
    assert engine_line_names(rows).tolist() == ["tgis", "tgi", "tgis"]
