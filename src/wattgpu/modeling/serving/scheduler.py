"""What an engine runs in its next step: each release line's scheduling policy, vectorised.

The policies of ``data/engine_lines.csv`` (``wattgpu.data.engine_lines``), as the engines'
schedulers implement them, over the requests of every row at once (one row of each array per
measured or asked set-up, one column per request slot):

* ``prefill_first`` (vLLM V0, SGLang): a step prefills the waiting prompts (FCFS, the first that
  does not fit stops the queue) and decodes nothing; with nothing to prefill, it decodes every
  running request;
* ``decode_first`` (vLLM V1, DeepSpeed-MII's SplitFuse): a step decodes every running request,
  then fills what is left of the token budget with prompt chunks;
* ``inflight`` (TensorRT-LLM): as ``decode_first``, with whole prompts only, each admitted when
  it fits the token budget on its own: the running decodes ride beside it (AIConfigurator's runs
  set ``max_num_tokens`` at least as large as their prompts, whose 8,192-token prompts joined
  running decodes under 8,192 tokens);
* ``prefill_pause`` (Hugging Face TGI): a new batch is prefilled, pausing the running one, only
  when at least floor(``waiting_served_ratio`` x running) requests wait (its router's
  ``min_size``), or ``max_waiting_steps`` decode steps have passed since the last prefill, or
  nothing runs;
* ``prefill_pause_decay`` (IBM's TGIS, TGI's fork): as ``prefill_pause``, the fewest waiting
  requests that start a prefill being max(1, floor(running x (W - t) / W)) after t decode steps
  without one (W: ``max_waiting_steps``), and 1 once at most one request runs or t reaches W
  (its ``router/src/batcher.rs``);
* ``static`` (Hugging Face generate, llama.cpp offline): a batch is admitted only when the last
  one has ended, and decodes until its longest answer ends.

Admission holds the engine's sequence cap and its KV cache (the prompt's tokens, or the whole
answer's for engines that reserve to completion); a full cache preempts the newest running
request back to the front of the queue (``preempt``). Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

# The policies, by code (``wattgpu.data.engine_lines.POLICIES`` names them in this order).
PREFILL_FIRST, DECODE_FIRST, INFLIGHT, PREFILL_PAUSE, STATIC, PREFILL_PAUSE_DECAY = range(6)

# Slot states, as int8 like ``Slots.state``: numpy compares an int8 array with an int8 in a third
# of the time it takes with a Python int, and the loop compares states many times a step.
IDLE, WAITING, RUNNING, PADDING, DONE = (np.int8(code) for code in range(5))


@dataclass(frozen=True)
class Scheduler:
    """Each row's engine, as its scheduler sees it.

    Attributes:
        policy: the policy's code (``PREFILL_FIRST`` ...).
        chunked: whether a prompt may be split across steps.
        budget: tokens a step may carry (decodes count one each, ``max_num_batched_tokens``).
        max_seqs: the most requests running at once (``max_num_seqs``).
        kv_tokens: tokens the KV cache holds, all running requests together.
        reserve_full: admission reserves the whole answer's KV cache (no preemption needed).
        waiting_ratio: ``prefill_pause``'s waiting-to-running ratio that starts a prefill.
        max_waiting_steps: a pausing engine's decode steps after which any waiting request is
            taken (TGI's ``max_waiting_tokens``; TGIS's W).

    """

    policy: np.ndarray
    chunked: np.ndarray
    budget: np.ndarray
    max_seqs: np.ndarray
    kv_tokens: np.ndarray
    reserve_full: np.ndarray
    waiting_ratio: np.ndarray
    max_waiting_steps: np.ndarray

    def take(self, rows: np.ndarray) -> Scheduler:
        """The schedulers of the rows ``rows`` only."""
        return Scheduler(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    # The policies' masks, kept: the loop asks for them every step, and a row's policy is fixed.
    @cached_property
    def mixed(self) -> np.ndarray:
        """Rows whose steps decode and prefill together (decode-first, in-flight)."""
        return (self.policy == DECODE_FIRST) | (self.policy == INFLIGHT)

    @cached_property
    def pause(self) -> np.ndarray:
        """Rows whose engine pauses its running batch to prefill a new one (TGI, TGIS)."""
        return (self.policy == PREFILL_PAUSE) | self.decay

    @cached_property
    def decay(self) -> np.ndarray:
        """Pausing rows whose fewest waiting requests to prefill fall with the wait (TGIS)."""
        return self.policy == PREFILL_PAUSE_DECAY

    @cached_property
    def whole_beside_decodes(self) -> np.ndarray:
        """Rows whose whole prompts take the token budget on their own, beside the decodes."""
        return (self.policy == INFLIGHT) & ~self.chunked

    @cached_property
    def static(self) -> np.ndarray:
        """Rows whose engine runs static batches."""
        return self.policy == STATIC

    @cached_property
    def alone(self) -> np.ndarray:
        """Rows whose engine decodes only in steps that prefill nothing."""
        return (self.policy == PREFILL_FIRST) | self.pause


@dataclass
class Slots:
    """The request slots of every row: one column per slot, one request (or cohort) each.

    A slot stands for ``weight`` identical requests (a cohort: ``N / slots`` users of a large
    closed loop), which the scheduler moves together.

    Attributes:
        weight: requests the slot stands for (0: an unused slot).
        state: ``IDLE``, ``WAITING``, ``RUNNING``, ``PADDING`` (a finished request a static
            batch still carries) or ``DONE``.
        prompt: the current request's prompt tokens; ``answer``: its output tokens.
        need: prompt tokens still to prefill, per request (the prompt and what was generated,
            after a preemption).
        context: tokens in the KV cache, per request.
        generated: output tokens generated so far.
        order: the FCFS key (arrival order; a preempted request gets the queue's front).
        arrived: arrival time; ``first``: first token's time; ``last``: last token's time;
        ``started``: end of the first step that prefilled part of it (a cohort's first
        member's first token).

    """

    weight: np.ndarray
    state: np.ndarray
    prompt: np.ndarray
    answer: np.ndarray
    need: np.ndarray
    context: np.ndarray
    generated: np.ndarray
    order: np.ndarray
    arrived: np.ndarray
    first: np.ndarray
    last: np.ndarray
    started: np.ndarray

    def take(self, rows: np.ndarray) -> Slots:
        """The slots of the rows ``rows`` only (copies)."""
        return Slots(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    def put(self, rows: np.ndarray, part: Slots) -> None:
        """Write ``part`` (from ``take(rows)``) back into the rows ``rows``."""
        for f in fields(self):
            getattr(self, f.name)[rows] = getattr(part, f.name)


@dataclass(frozen=True)
class Plan:
    """One step of every row: what it prefills and whether it decodes.

    Attributes:
        take: prompt tokens each slot prefills in the step, all its requests together.
        decodes: slots that decode one token each in the step.
        carried: slots the step carries without a token (a static batch's finished requests).
        admitted: slots admitted from the queue in the step.
        tokens: prompt tokens each row prefills in the step (``take``'s sum).
        decoded: requests each row decodes in the step (``decodes``' weights).

    """

    take: np.ndarray
    decodes: np.ndarray
    carried: np.ndarray
    admitted: np.ndarray
    tokens: np.ndarray
    decoded: np.ndarray


def kv_used(slots: Slots, sched: Scheduler) -> np.ndarray:
    """KV-cache tokens each row's running requests hold (or reserved, for no-evict engines)."""
    running = (slots.state == RUNNING) | (slots.state == PADDING)
    held = slots.context + slots.need
    if sched.reserve_full.any():
        held = np.where(sched.reserve_full[:, None], slots.prompt + slots.answer, held)
    return (np.where(running, slots.weight * held, 0.0)).sum(axis=1)


def preempt(
    slots: Slots, sched: Scheduler, next_order: np.ndarray, kv: np.ndarray | None = None
) -> np.ndarray:
    """Preempt the newest running requests of rows whose KV cache cannot take the next step.

    Each decoding request needs one more token of cache; where they do not fit, the most
    recently admitted running requests go back to the front of the queue, to prefill their
    prompt and what they had generated again (recompute), newest first, until the rest fit.
    Engines that reserve to completion never preempt. ``kv``: ``kv_used`` where the caller
    has it.

    Returns:
        The slots preempted (a mask).

    """
    running = slots.state == RUNNING
    grow = np.where(running & (slots.need <= 0), slots.weight, 0.0).sum(axis=1)
    used = kv_used(slots, sched) if kv is None else kv
    excess = used + grow - sched.kv_tokens
    hit = (excess > 0) & ~sched.reserve_full
    out = np.zeros(slots.state.shape, bool)
    if not hit.any():
        return out
    # only the rows whose cache is short are ranked
    rows = np.nonzero(hit)[0]
    running, order, excess = running[rows], slots.order[rows], excess[rows]
    # newest first: a running slot's order, descending; others last
    ranked = np.argsort(np.where(running, -order, np.inf), axis=1, kind="stable")
    at = rows[:, None]
    held = np.where(running, slots.weight[rows] * (slots.context[rows] + 1.0), 0.0)
    held = held[np.arange(len(rows))[:, None], ranked]
    freed_before = np.cumsum(held, axis=1) - held
    # keep the last running slot of a row even when the cache cannot hold it: it is the one the
    # engine runs alone (a request too long for the cache fails in the engine; here it runs)
    ranked_running = slots.state[at, ranked] == RUNNING
    last_running = np.cumsum(ranked_running[:, ::-1], axis=1)[:, ::-1] == 1
    out_ranked = ranked_running & (freed_before < excess[:, None]) & ~last_running
    out[at, ranked] = out_ranked
    if out.any():
        slots.state[out] = WAITING
        slots.need[out] = slots.prompt[out] + slots.generated[out]
        slots.context[out] = 0.0
        # the front of the queue, in the order they were running
        front = next_order[:, None] - 1e9 + slots.order
        slots.order[out] = front[out]
    return out


def plan_step(
    slots: Slots, sched: Scheduler, waited_steps: np.ndarray, kv: np.ndarray | None = None
) -> Plan:
    """The next step of every row under its engine's policy (see the module docstring).

    ``kv``: ``kv_used`` where the caller has it.
    """
    state, weight = slots.state, slots.weight
    running = state == RUNNING
    waiting = state == WAITING
    padding = state == PADDING
    prompt_left = slots.need > 0
    decoding = running & ~prompt_left
    partial = running & prompt_left
    running_w = np.where(running | padding, weight, 0.0).sum(axis=1)
    decode_w = np.where(decoding, weight, 0.0).sum(axis=1)

    # the tokens left for prompts in this step
    shared = sched.mixed & ~sched.whole_beside_decodes
    budget = np.where(shared, np.maximum(sched.budget - decode_w, 0.0), sched.budget)
    # who may be admitted at all this step
    admit_ok = ~(sched.static & (running_w > 0))
    if sched.pause.any():
        waiting_w = np.where(waiting, weight, 0.0).sum(axis=1)
        ready = waiting_w >= pause_minimum(sched, running_w, waited_steps)
        admit_ok &= ~sched.pause | ready

    candidates = waiting & admit_ok[:, None]
    # only the rows with a prompt to prefill go through the queue
    busy = np.nonzero((partial | candidates).any(axis=1))[0]
    if not busy.size:
        take = np.zeros(state.shape)
        admitted = np.zeros(state.shape, bool)
    else:
        every = busy.size == len(sched.policy)
        rows = slice(None) if every else busy
        used = kv_used(slots, sched) if kv is None else kv
        got, new = _fill(
            slots,
            sched,
            rows,
            used[rows],
            budget[rows],
            partial[rows],
            candidates[rows],
            running_w[rows],
        )
        if every:
            take, admitted = got, new
        else:
            take = np.zeros(state.shape)
            admitted = np.zeros(state.shape, bool)
            take[busy], admitted[busy] = got, new
    tokens = take.sum(axis=1)
    # prefill-first and pausing engines decode only in steps that prefill nothing; a static batch
    # decodes once all of it is prefilled
    decode_now = ~(sched.alone & (tokens > 0))
    if sched.static.any():
        decode_now &= ~(sched.static & ((partial | admitted).any(axis=1)))
    decodes = decoding & decode_now[:, None]
    carried = padding & decode_now[:, None]
    decoded = np.where(decodes, weight, 0.0).sum(axis=1)
    return Plan(
        take=take,
        decodes=decodes,
        carried=carried,
        admitted=admitted,
        tokens=tokens,
        decoded=decoded,
    )


def pause_minimum(sched: Scheduler, running: np.ndarray, waited: np.ndarray) -> np.ndarray:
    """The fewest waiting requests that make a pausing engine prefill a new batch.

    TGI: floor(``waiting_ratio`` x running), any once nothing runs; TGIS: max(1, floor(running
    x (W - t) / W)) after ``waited`` = t decode steps without a prefill, 1 once at most one runs.
    Both take any waiting request once t reaches W (``max_waiting_steps``). At least 1: an empty
    queue prefills nothing. ``running``: the requests each row runs.
    """
    steps = sched.max_waiting_steps
    with np.errstate(invalid="ignore", divide="ignore"):
        left = np.where(np.isfinite(steps), np.maximum(steps - waited, 0.0) / steps, 1.0)
    # the router's integer arithmetic (a small slack: 1.2 x 3 is 3.5999... in floats)
    decaying = np.where(running <= 1.0, 1.0, np.floor(running * left + 1e-9))
    ratio = np.where(running <= 0.0, 1.0, np.floor(sched.waiting_ratio * running + 1e-9))
    fewest = np.where(sched.decay, decaying, ratio)
    return np.where(waited >= steps, 1.0, np.maximum(fewest, 1.0))


def pause_due(sched: Scheduler, running: np.ndarray, waiting: np.ndarray, waited: np.ndarray):
    """Decode steps until a pausing engine's waiting requests are prefilled (1: at the next).

    TGI's rule holds still until W; TGIS's falls with each step: the first t at which
    floor(running x (W - t) / W) <= waiting is t > W - (waiting + 1) x W / running.
    """
    steps = sched.max_waiting_steps
    due = steps - waited
    with np.errstate(invalid="ignore", divide="ignore"):
        first = np.floor(steps - (waiting + 1.0) * steps / np.maximum(running, 1e-9)) + 1.0
    due = np.where(sched.decay, np.minimum(due, first - waited), due)
    return np.maximum(due, 1.0)


def _fill(
    slots: Slots,
    sched: Scheduler,
    rows: np.ndarray | slice,
    used: np.ndarray,
    budget: np.ndarray,
    partial: np.ndarray,
    candidates: np.ndarray,
    running_w: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Prompt tokens per slot of the rows ``rows`` within ``budget``, unfinished prompts first.

    Then the queue, FCFS. ``used``: the rows' ``kv_used``; the other arrays are the rows' only.

    A waiting request is admitted while the sequence cap and the KV cache hold it; the first
    that does not fit stops the queue. An unchunked engine takes a prompt whole (a cohort: as
    many of its requests' whole prompts as fit).
    """
    order = slots.order[rows]
    eligible = partial | candidates
    # unfinished prompts first (by order), then the queue (by order); the rest last
    key = np.where(partial, order - 1e12, np.where(candidates, order, np.inf))
    ranked = np.argsort(key, axis=1, kind="stable")
    at = np.arange(len(ranked))[:, None]

    def pick(a: np.ndarray) -> np.ndarray:
        return a[at, ranked]

    weight, need = pick(slots.weight[rows]), pick(slots.need[rows])
    is_new, is_in = pick(candidates), pick(eligible)
    demand = np.where(is_in, weight * need, 0.0)
    # admission: sequence cap and KV cache, cumulative over the queue in order
    reserve_full = sched.reserve_full[rows]
    if reserve_full.any():
        full = pick(slots.prompt[rows] + slots.answer[rows])
        reserve = np.where(reserve_full[:, None], full, need) * weight
    else:
        reserve = need * weight
    seats = np.cumsum(np.where(is_new, weight, 0.0), axis=1) + running_w[:, None]
    room = np.cumsum(np.where(is_new, reserve, 0.0), axis=1) + used[:, None]
    # an empty engine always takes the queue's first request (a cohort above the cap included)
    first = is_new & (seats - weight <= running_w[:, None] + 1e-9) & (running_w[:, None] <= 0)
    fits = (
        ~is_new
        | first
        | (
            (seats <= sched.max_seqs[rows][:, None] + 1e-9)
            & (room <= sched.kv_tokens[rows][:, None] + 1e-9)
        )
    )
    # a queue stops at its first request that cannot be admitted
    fits = np.logical_and.accumulate(fits | ~is_in, axis=1) & is_in
    counted = np.where(fits, demand, 0.0)
    before = np.cumsum(counted, axis=1) - counted
    left = np.maximum(budget[:, None] - before, 0.0)
    chunked = sched.chunked[rows]
    # a chunked engine takes what the budget leaves
    got = np.minimum(demand, left)
    if not chunked.all():
        whole = np.where(need > 0, np.floor(left / np.maximum(need, 1e-9) + 1e-9) * need, 0.0)
        got = np.where(chunked[:, None], got, np.minimum(demand, whole))
    # ``before`` counts every earlier prompt whole: after one that does not fit, nothing does
    got = np.where(fits, got, 0.0)
    admitted_ranked = is_new & (got > 0)
    take = np.empty_like(got)
    admitted = np.empty_like(admitted_ranked)
    take[at, ranked] = got
    admitted[at, ranked] = admitted_ranked
    return take, admitted
