"""The serving loop of each row, simulated: costs, set-up and loop put together, rows at once.

A row's step costs come from the prior's description of its work on its GPUs
(``physical.operations``, ``physical.costs``) at today's constants' kernel shares; its client,
scheduler and host time from its harness and engine line (``workload``). Rows of one slot width,
whatever their client, run together through ``loop.simulate``. An open loop that arrives faster
than its engine serves is then run as the engine full (``_saturate``) and flagged ``overloaded``.
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pandas as pd

from wattgpu.modeling.physical.costs import silicon
from wattgpu.modeling.physical.operations import Rows, describe_step, length
from wattgpu.modeling.physical.physics import DEFAULT_CONSTANTS, PhysicalConstants
from wattgpu.modeling.serving.checks import check_setup
from wattgpu.modeling.serving.jitter import Jitter
from wattgpu.modeling.serving.loop import (
    CLOSED,
    POISSON,
    POISSON_SLOTS,
    SLOTS,
    STATISTICS,
    WIDE_SLOTS,
    simulate,
    slots_needed,
)
from wattgpu.modeling.serving.step import TokenCosts, token_costs
from wattgpu.modeling.serving.workload import (
    MIN_MEASURED,
    SETTLED_MEASURED,
    SETTLED_WARMUP,
    Setup,
    setup,
)

# A row's prefill efficiency: its prompt tokens' tensor work over the prior's (``ttft_terms``).
PROMPT_SCALE = "prefill_scale"
# A row's per-request overhead, s, which every TTFT of its loop pays on top (``ttft_terms``;
# the loop does not run it: ``answering.tails`` adds it to the simulated TTFTs).
TTFT_OVERHEAD = "ttft_overhead_s"


def simulate_rows(
    rows: Rows,
    constants: PhysicalConstants = DEFAULT_CONSTANTS,
    seed: int = 0,
    jitter: Jitter | None = None,
) -> pd.DataFrame:
    """The ``loop.STATISTICS`` of each row's own client and engine, one frame row per row.

    ``rows`` carry the physics features (``physical.features.build_features``), and where fitted
    a prefill efficiency (``PROMPT_SCALE``); ``constants`` give the kernels' shares a serving
    step reaches (not refitted here); ``jitter``, where fitted, spreads every step's time before
    the gaps' percentiles are read (``serving.jitter``).

    Raises:
        QueryError: a row's client or engine knob cannot be run (``checks.check_setup``).

    """
    check_setup(rows)
    gpus = silicon(rows, constants.memory_efficiency, constants.compute_efficiency)
    costs = token_costs(describe_step(rows), gpus)
    if PROMPT_SCALE in rows:  # a fitted prefill efficiency (``ttft_terms``); blank: 1
        scale = np.asarray(rows[PROMPT_SCALE], dtype=float)
        costs = replace(costs, prompt_scale=np.where(np.isfinite(scale), scale, 1.0))
    plan = setup(rows)
    spread = None if jitter is None else jitter.multipliers()
    keys = _keys(costs, plan, seed, spread)
    out = np.full((length(rows), len(STATISTICS)), np.nan)
    kept = np.array([key in _SIMULATED for key in keys], dtype=bool)
    for i in np.nonzero(kept)[0]:
        out[i] = _SIMULATED[keys[i]]
    missing = np.nonzero(~kept)[0]
    if missing.size:
        out[missing] = _simulated(costs.take(missing), _take(plan, missing), seed, spread)
        if len(_SIMULATED) + missing.size > _MAX_KEPT:
            _SIMULATED.clear()
        for i in missing:
            _SIMULATED[keys[i]] = out[i].copy()
    index = rows.index if isinstance(rows, pd.DataFrame) else None
    return pd.DataFrame(out, columns=list(STATISTICS), index=index)


# The statistics of each row simulated in this process, by the content the loop reads of it
# (``_keys``): predict asks for the ITL and the TTFT of the same rows, and a row's answer
# depends on its own inputs only, an overloaded one's too (``_saturate`` runs every saturated
# loop in ``SLOTS`` slots; tests/test_serving_loop.py).
_SIMULATED: dict[bytes, np.ndarray] = {}
_MAX_KEPT = 100_000


def forget_simulated() -> None:
    """Forget the rows this process simulated (a benchmark times a query simulated afresh)."""
    _SIMULATED.clear()


def _keys(costs: TokenCosts, plan: Setup, seed: int, jitter: np.ndarray | None) -> list[bytes]:
    """A key per row: the bytes of every number the loop reads of it, the seed and the jitter."""
    parts = [
        np.asarray(getattr(costs, f.name), dtype=float)
        for f in fields(costs)
        if getattr(costs, f.name) is not None
    ]
    for part in (plan.host, plan.scheduler, plan.client):
        for f in fields(part):
            value = np.asarray(getattr(part, f.name), dtype=float)
            parts.append(value.reshape(len(value), -1) if value.ndim > 1 else value)
    parts.append(np.full(len(parts[0]), float(seed)))
    spread = b"" if jitter is None else jitter.tobytes()
    return [row.tobytes() + spread for row in np.ascontiguousarray(np.column_stack(parts))]


def _take(plan: Setup, rows: np.ndarray) -> Setup:
    return Setup(plan.host.take(rows), plan.scheduler.take(rows), plan.client.take(rows))


def _simulated(
    costs: TokenCosts, plan: Setup, seed: int, jitter: np.ndarray | None = None
) -> np.ndarray:
    """The ``STATISTICS`` of every row of ``plan``, simulated (an array, a row per row)."""
    out = np.full((len(plan.client.kind), len(STATISTICS)), np.nan)
    # rows of one width run together, whatever their client (a row's answer depends on its own
    # inputs only, and a loop's iterations cost the same for few rows as for many): an open loop,
    # or a cohort of a big closed loop, needs wider slot arrays
    width = slots_needed(plan.client, plan.scheduler)
    width = np.where(
        plan.client.kind == POISSON, POISSON_SLOTS, np.where(width > SLOTS, WIDE_SLOTS, width)
    )
    for group in np.unique(width):
        part = np.nonzero(width == group)[0]
        stats = simulate(
            costs.take(part),
            plan.host.take(part),
            plan.scheduler.take(part),
            plan.client.take(part),
            seed=seed,
            slots=int(width[part[0]]),
            jitter=jitter,
        )
        out[part] = np.column_stack([stats[name] for name in STATISTICS])
    _saturate(out, costs, plan, seed, jitter)
    return out


def _saturate(
    out: np.ndarray, costs: TokenCosts, plan: Setup, seed: int, jitter: np.ndarray | None
) -> None:
    """Open loops that arrive faster than their engine serves: the engine full, as it runs then.

    Such a queue grows without end; while it does, the engine runs as many requests as it holds
    (its sequence cap, or what its KV cache holds), a closed loop of that many users, whose
    statistics stand for the row (still flagged ``overloaded``).
    """
    column = STATISTICS.index("overloaded")
    over = np.nonzero((plan.client.kind == POISSON) & (out[:, column] > 0))[0]
    if not over.size:
        return
    client, sched = plan.client.take(over), plan.scheduler.take(over)
    held = sched.kv_tokens / np.maximum(client.prompt + client.answer, 1.0)
    users = np.maximum(np.floor(np.minimum(sched.max_seqs, held)), 1.0)
    full = replace(
        client,
        kind=np.full(len(over), CLOSED),
        users=users,
        warmup=users * SETTLED_WARMUP,
        measured=np.maximum(users * SETTLED_MEASURED, MIN_MEASURED),
    )
    # a closed loop of the users an engine holds needs at most 8 slots (``slots_needed``): SLOTS
    # serve every saturated row, whose answer then does not depend on the rows beside it
    stats = simulate(
        costs.take(over), plan.host.take(over), sched, full, seed, SLOTS, jitter=jitter
    )
    out[over] = np.column_stack([stats[name] for name in STATISTICS])
    out[over, column] = 1.0
